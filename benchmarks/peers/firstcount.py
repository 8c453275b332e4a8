"""One system counting the records of a folder of JSONL shards from nothing, in a fresh process.

``python -m benchmarks.peers.firstcount SYSTEM GLOB [CORES]`` (run by ``benchmarks/probes/jsonl_peers.py``) prints one
JSON line: ``import_s`` (importing the system's library), ``first_count_s`` (from nothing, library imported, to
the record count), ``cpu_s`` (user and system CPU seconds of the process's threads during the count), ``count``
and ``peak_rss_mb`` (the process's peak resident memory, ``VmHWM``: import included). ``CORES``: the process runs
on the first that many CPUs it may use (its affinity set before anything is imported, as ``taskset`` would), so
each system sizes its threads to them. Systems:

- ``consumer``: ``Consumer(FOLDER, documents="jsonl", metadata=None, cache_dir=False)`` then
  ``ds.sql("SELECT count(*) FROM documents")`` (every record parsed: its text is a document);
- ``consumer_cached``: the same with an empty persistent cache dir (``cache_dir=CACHE``: the per-container
  indexes are written, as a first build does by default);
- ``consumer_pool``: ``consumer`` with ``engine=ProcessPoolExecutor(cores)`` (the containers indexed by worker
  processes, the opt-in parallel build);
- ``daft``: ``daft.read_json(GLOB).count_rows()``; ``daft_text``: the count and the sum of the texts' lengths
  (every record's text parsed, as consumer's index does);
- ``duckdb``: ``SELECT count(*) FROM read_json_auto(GLOB)``; ``duckdb_text``: ``count(*), sum(length(text))``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

_MADE: list[str] = []  # temporary folders this child made (it exits with os._exit: no atexit, no finalizers)


def _consumer(glob: str, cache: str | bool = False, pool: bool = False) -> Callable[[], int]:
    from concurrent.futures import ProcessPoolExecutor

    from consumer import Consumer

    def count() -> int:
        engine = ProcessPoolExecutor(len(os.sched_getaffinity(0))) if pool else None
        ds = Consumer(os.path.dirname(glob), documents="jsonl", metadata=None, cache_dir=cache, engine=engine)
        return int(ds.sql("SELECT count(*) FROM documents")[0][0])

    return count


def _consumer_pool(glob: str) -> Callable[[], int]:
    return _consumer(glob, pool=True)


def _consumer_cached(glob: str) -> Callable[[], int]:
    import tempfile

    cache = tempfile.mkdtemp(prefix="firstcount-")  # an empty cache directory, removed by main() after the count
    _MADE.append(cache)
    return _consumer(glob, cache)


def _daft(glob: str) -> Callable[[], int]:
    import daft

    def count() -> int:
        return int(daft.read_json(glob).count_rows())

    return count


def _daft_text(glob: str) -> Callable[[], int]:
    import daft
    from daft import col

    def count() -> int:
        d = daft.read_json(glob).agg(col("text").count().alias("n"), col("text").length().sum().alias("chars"))
        return int(d.to_pydict()["n"][0])

    return count


def _duckdb(glob: str) -> Callable[[], int]:
    import duckdb

    conn = duckdb.connect()

    def count() -> int:
        return int(conn.execute(f"SELECT count(*) FROM read_json_auto('{glob}')").fetchall()[0][0])

    return count


def _duckdb_text(glob: str) -> Callable[[], int]:
    import duckdb

    conn = duckdb.connect()

    def count() -> int:
        return int(conn.execute(f"SELECT count(*), sum(length(text)) FROM read_json_auto('{glob}')").fetchall()[0][0])

    return count


SYSTEMS = {"consumer": _consumer, "consumer_cached": _consumer_cached, "consumer_pool": _consumer_pool, "daft": _daft,
           "daft_text": _daft_text, "duckdb": _duckdb, "duckdb_text": _duckdb_text}


def measure(system: str, glob: str) -> dict:
    """The figures of the module docstring for one system."""
    t0 = time.perf_counter()
    count = SYSTEMS[system](glob)
    t1 = time.perf_counter()
    c1 = _cpu_s()
    n = count()
    t2 = time.perf_counter()
    cpu = _cpu_s() - c1
    from benchmarks.measure import peak_rss_mb  # after the timed count (it imports numpy)

    return {"import_s": t1 - t0, "first_count_s": t2 - t1, "count": n, "peak_rss_mb": peak_rss_mb(), "cpu_s": cpu}


def _cpu_s() -> float:
    """User and system CPU seconds of this process so far, every thread included (a worker process of
    ``consumer_pool`` is not: its time is its own)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: list[str]) -> int:
    """Run one system (see the module docstring); an ImportError becomes ``{"error": ...}``."""
    if len(argv) > 2:  # before any import: the libraries read the CPUs they may use when they start
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:int(argv[2])])
    try:
        out = measure(argv[0], argv[1])
    except ImportError as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        import shutil

        for folder in _MADE:
            shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(0)  # Daft's worker threads can abort the interpreter's shutdown after the answer is out
