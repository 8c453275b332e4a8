"""One system answering the catalog question and the byte predicate over a folder, in a fresh process.

``python -m benchmarks.peers.firstanswer SYSTEM ROOT REPS`` (run by ``benchmarks/probes/catalog_peers.py``)
prints one JSON line:

- ``import_s``: importing the system's library;
- ``first_answer_s``: from nothing (library imported) to the answer of
  ``SELECT class, count(*), sum(size) FROM files GROUP BY class`` (class: the file's parent folder);
- ``head_s``: the best of ``REPS`` runs of the byte predicate, the count of files whose first 4 bytes are
  ``\\x89PNG`` (after the first answer, so every system starts from the same page cache);
- ``groups`` and ``png``: the answers, compared across systems by the probe.

Systems: ``consumer`` (``Consumer(ROOT, metadata=None, cache_dir=False)`` + ``ds.sql``, ``head(path, 4)``),
``daft`` (``from_glob_path`` + ``groupby``; ``url.download()`` + slice) and ``duckdb`` (``read_blob``, sizes
only for the catalog; ``content[1:4]`` for the predicate). Only the system's own library is imported.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

PNG = b"\x89PNG"
_CLASS_RE = r"/([^/]+)/[^/]+$"


def _consumer(root: str) -> tuple[Callable[[], list], Callable[[], int]]:
    from consumer import Consumer

    box: dict = {}

    def groups() -> list:
        box["ds"] = Consumer(root, metadata=None, cache_dir=False)
        return box["ds"].sql("SELECT class, count(*), sum(size) FROM files GROUP BY class")

    def png() -> int:
        return int(box["ds"].sql("SELECT count(*) FROM files WHERE head(path, 4) = x'89504E47'")[0][0])

    return groups, png


def _daft(root: str) -> tuple[Callable[[], list], Callable[[], int]]:
    import daft
    from daft import col

    pattern = os.path.join(root, "**")

    def groups() -> list:
        df = daft.from_glob_path(pattern).with_column("class", col("path").regexp_extract(_CLASS_RE, 1))
        d = df.groupby("class").agg(col("path").count().alias("n"), col("size").sum().alias("bytes")).to_pydict()
        return list(zip(d["class"], d["n"], d["bytes"]))

    def png() -> int:
        df = daft.from_glob_path(pattern).with_column("head", col("path").download().slice(0, 4))
        return int(df.where(col("head") == PNG).count_rows())

    return groups, png


def _duckdb(root: str) -> tuple[Callable[[], list], Callable[[], int]]:
    import duckdb

    conn = duckdb.connect()
    glob = os.path.join(root, "*", "*")

    def groups() -> list:
        return conn.execute(f"SELECT regexp_extract(filename, '{_CLASS_RE}', 1) AS class, count(*), sum(size) "
                            f"FROM read_blob('{glob}') GROUP BY class").fetchall()

    def png() -> int:
        return int(conn.execute(f"SELECT count(*) FROM read_blob('{glob}') "
                                "WHERE content[1:4] = x'89504E47'").fetchall()[0][0])

    return groups, png


SYSTEMS = {"consumer": _consumer, "daft": _daft, "duckdb": _duckdb}


def measure(system: str, root: str, reps: int) -> dict:
    """The figures of the module docstring for one system."""
    t0 = time.perf_counter()
    groups, png = SYSTEMS[system](root)
    t1 = time.perf_counter()
    answer = groups()
    t2 = time.perf_counter()
    heads, count = [], -1
    for _ in range(max(1, reps)):
        t = time.perf_counter()
        count = png()
        heads.append(time.perf_counter() - t)
    return {"import_s": t1 - t0, "first_answer_s": t2 - t1, "head_s": min(heads), "head_runs_s": heads,
            "groups": sorted([str(c), int(n), int(b)] for c, n, b in answer), "png": count}


def main(argv: list[str]) -> int:
    """Run one system (see the module docstring); an ImportError becomes ``{"error": ...}``."""
    try:
        out = measure(argv[0], argv[1], int(argv[2]))
    except ImportError as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stderr.flush()
    # Daft 0.7's worker threads can abort the interpreter's shutdown ("PyGILState_Release: thread state must be
    # current"), after the answer is out: leave without finalizing, the result is printed and flushed
    os._exit(0)
