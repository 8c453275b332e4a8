"""Cold catalog of a folder of small files: from nothing to the first ``GROUP BY class`` answer, vs Daft and DuckDB.

Workload: the ``small`` corpus of :func:`benchmarks.corpora.make_corpus` (``--files`` files of 256 B .. 4 KB in
three class folders, seed 1). Each system runs once, in a fresh process (the interpreter's start and every import
included, timed by this driver), one after the other, in the order below:

- ``consumer_nocache``: ``Consumer(root, metadata=None, cache_dir=False)`` then
  ``SELECT class, count(*), sum(size) FROM files GROUP BY class``;
- ``consumer_cache``: the same with an empty ``cache_dir`` (the persistent index entry is written);
- ``daft``: ``daft.from_glob_path(root/*/*)``, the class taken from the path, ``groupby(class)`` count and sum of
  sizes (in the Python given by ``--daft-python``, e.g. a venv of its own);
- ``duckdb``: ``read_blob(root/*/*)`` selecting only ``filename`` and ``size``, grouped the same way.

Before the timings one untimed ``os.walk`` with a ``stat`` per file brings the folder's metadata into the kernel's
caches, so that no system pays for the disk alone by running first. Every system must give the same
``(class, files, bytes)`` rows. The result holds the seconds of each, the ratio of each consumer run to Daft's,
and the answers' agreement.

Run: ``python benchmarks/probes/cold_catalog.py --files 100000 [--daft-python PY] [--data-root DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

NAME = "cold_catalog"
DESCRIPTION = "cold catalog of a folder of small files to the first GROUP BY answer, vs Daft and DuckDB"

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_DAFT_VENV = os.path.join(_REPO, "benchmarks", ".venvs", "daft", "bin", "python")

_CONSUMER = """
import json, sys
from consumer import Consumer
cache = sys.argv[2]
ds = Consumer(sys.argv[1], metadata=None, cache_dir=False if cache == "off" else cache)
rows = ds.sql("SELECT class, count(*), sum(size) FROM files GROUP BY class ORDER BY class")
print(json.dumps([[c, int(n), int(b)] for c, n, b in rows]))
"""

_DAFT = """
import json, sys
import daft
from daft import col
df = daft.from_glob_path(sys.argv[1] + "/*/*")
df = df.with_column("class", col("path").regexp_extract(r"/([^/]+)/[^/]+$", 1))
out = df.groupby("class").agg(col("path").count().alias("n"), col("size").sum().alias("b")).sort("class").to_pydict()
print(json.dumps([[c, int(n), int(b)] for c, n, b in zip(out["class"], out["n"], out["b"])]))
"""

_DUCKDB = """
import json, sys
import duckdb
rows = duckdb.sql(f"SELECT regexp_extract(filename, '/([^/]+)/[^/]+$', 1) AS class, count(*), sum(size) "
                  f"FROM read_blob('{sys.argv[1]}/*/*') GROUP BY class ORDER BY class").fetchall()
print(json.dumps([[c, int(n), int(b)] for c, n, b in rows]))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--files``, ``--data-root``, ``--daft-python``, ``--skip``."""
    parser.add_argument("--files", type=int, default=100_000, help="files in the corpus (default: %(default)s)")
    parser.add_argument("--data-root", default=None,
                        help="where the corpus is made or reused (default: a folder under the temporary directory)")
    parser.add_argument("--daft-python", default=_DAFT_VENV if os.path.exists(_DAFT_VENV) else sys.executable,
                        help="the Python that has daft installed (default: benchmarks/.venvs/daft if present)")
    parser.add_argument("--skip", nargs="*", default=[], help="systems not to run (consumer_cache, daft, duckdb)")


def _timed(argv: list[str], env: dict[str, str]) -> dict:
    """Wall seconds of one fresh process and its JSON answer (or its error)."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": f"exit status {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1]}"}
    return {"seconds": seconds, "answer": json.loads(proc.stdout.strip().splitlines()[-1])}


def run(args: argparse.Namespace) -> dict:
    """Make (or reuse) the corpus, then run each system once in a fresh process (see the module docstring)."""
    sys.path.insert(0, _REPO)
    from benchmarks.corpora import make_corpus  # noqa: PLC0415

    data_root = args.data_root or os.path.join(tempfile.gettempdir(), "consumer-bench-cold-catalog")
    corpus = make_corpus(data_root, "small", args.files, seed=1)
    env = {**os.environ, "PYTHONPATH": _REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cache = tempfile.mkdtemp(prefix="cold-catalog-cache-")
    plan = {
        "consumer_nocache": [sys.executable, "-c", _CONSUMER, corpus.root, "off"],
        "consumer_cache": [sys.executable, "-c", _CONSUMER, corpus.root, cache],
        "daft": [args.daft_python, "-c", _DAFT, corpus.root],
        "duckdb": [sys.executable, "-c", _DUCKDB, corpus.root],
    }
    results: dict = {"files": corpus.n_files, "bytes": corpus.total_bytes}
    for folder, _, names in os.walk(corpus.root):  # warm the kernel's metadata caches for every system alike
        for name in names:
            os.stat(os.path.join(folder, name))
    try:
        for name, argv in plan.items():
            if name not in args.skip:
                results[name] = _timed(argv, env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    answers = [r.pop("answer") for r in results.values() if isinstance(r, dict) and "answer" in r]
    results["answers_agree"] = all(a == answers[0] for a in answers)
    results["answer"] = answers[0] if answers else None
    daft_s = results.get("daft", {}).get("seconds")
    for name in ("consumer_nocache", "consumer_cache"):
        ours = results.get(name, {}).get("seconds")
        if ours and daft_s:
            results[f"{name}_vs_daft"] = round(ours / daft_s, 3)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(parser)
    print(json.dumps(run(parser.parse_args()), indent=1))
