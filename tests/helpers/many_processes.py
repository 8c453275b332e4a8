"""Many processes on one catalog and cache directory: the worker and the checks of its run.

Used by ``tests/dataset/test_many_processes.py`` (8 processes, once) and ``benchmarks/probes/many_processes.py``
(the same run N times). :func:`run` starts ``workers`` real processes (multiprocessing, spawn) that at the
same time, on one ``cache_dir``:

1. build a dataset (catalog sync with libmagic, index cache entry): even ranks every file, odd ranks the
   files of two of the three classes (another index entry over the same catalog rows),
2. run SQL naming content columns (the content pass: sha256, entropy, ...) and every libmagic column,
3. pack the dataset to a prefix of its own and verify the store, and pack it again to a prefix all the
   processes of that dataset share (concurrent packs of one store);

then the parent rewrites some files in place (edits) and every worker does it all again (a re-index after
edits). Each worker counts what it computed: libmagic calls (python-magic's ``Magic.from_file`` and
``from_descriptor``, the real library calls) and files read by the content pass (what
``Catalog.ensure_content`` returns), and reports its SQL rows, its build's cache outcome and its store's
checksum. Any exception in a worker is reported with its traceback.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sqlite3
import traceback
from pathlib import Path

import numpy as np

SQL = "SELECT path, size, sha256, entropy, printable, zeros, hex(histogram), description, mime FROM files ORDER BY path"
SETTINGS = {"metadata": "file", "style": "concat", "seqlen": 256, "n_bytes": 1}


def write_files(root: Path, files: int, seed: int = 0) -> list[str]:
    """``files`` files of 200 B to 6 KB (text-like and binary) in three class folders."""
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(files):
        folder = root / f"c{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        n = int(rng.integers(200, 6000))
        data = (rng.integers(32, 127, n) if i % 2 else rng.integers(0, 256, n)).astype(np.uint8).tobytes()
        path = folder / f"f{i:04d}.{'txt' if i % 2 else 'bin'}"
        path.write_bytes(data)
        paths.append(str(path))
    return paths


def edit_files(paths: list[str], every: int, seed: int) -> list[str]:
    """Rewrite every ``every``-th file in place with other bytes (half of them with another size)."""
    rng = np.random.default_rng(seed)
    edited = paths[::every]
    for k, p in enumerate(edited):
        n = os.path.getsize(p) + (k % 2) * 17
        Path(p).write_bytes(rng.integers(0, 256, n).astype(np.uint8).tobytes())
    return edited


def _counting():
    """Count real libmagic calls and content-pass reads of this process (wrapping the library calls)."""
    from consumer.catalog.catalog import Catalog

    from .magic_counter import wrap_libmagic

    counts = {"libmagic": 0, "content": 0}
    ensure = Catalog.ensure_content

    def counted_magic(path):
        counts["libmagic"] += 1

    def counted_ensure(self, *args, **kwargs):
        read = ensure(self, *args, **kwargs)
        counts["content"] += read
        return read

    wrap_libmagic(counted_magic)
    Catalog.ensure_content = counted_ensure
    return counts


def _datasets(data: str) -> list:
    """The two datasets the processes ask for over one folder: every file, and the files of two classes only
    (another index cache entry, the same catalog rows)."""
    root = Path(data)
    return [data, {c: sorted(str(p) for p in (root / c).iterdir()) for c in ("c0", "c1")}]


def _store_sha256(prefix: str) -> str:
    with open(prefix + ".bin", "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _phase(rank: int, phase: int, data: str, cache: str, out: str, counts: dict) -> dict:
    from consumer import Consumer, verify_packed

    before = dict(counts)
    which = rank % 2
    ds = Consumer(_datasets(data)[which], cache_dir=cache, **SETTINGS)
    rows = [tuple(r) for r in ds.sql(SQL)]
    prefix = os.path.join(out, f"store-{rank}-{phase}")
    ds.pack(prefix)
    report = verify_packed(prefix)
    ds.pack(os.path.join(out, f"shared-{which}-{phase}"))  # every process of this dataset packs to one prefix
    result = {"dataset": which, "cache": ds.build_info["cache"], "rows": rows, "store": _store_sha256(prefix),
              "checksum": report["checksum"], "libmagic": counts["libmagic"] - before["libmagic"],
              "content": counts["content"] - before["content"]}
    ds.close()
    return result


def worker(rank: int, data: str, cache: str, out: str, barrier, results) -> None:
    """One process: phase 1, wait, (the parent edits), wait, phase 2; reports each phase to ``results``."""
    counts = _counting()
    for phase in (1, 2):
        try:
            barrier.wait()  # every process starts the phase at once
            results.put((rank, phase, _phase(rank, phase, data, cache, out, counts)))
        except BaseException:  # noqa: BLE001  (reported to the parent, which fails the run)
            results.put((rank, phase, {"error": traceback.format_exc()}))
        barrier.wait()  # phase done everywhere (the parent edits files after phase 1)


def truth(data: str) -> list[tuple[list[tuple], str]]:
    """Per dataset (:func:`_datasets`), the SQL rows and store checksum of one process alone, without any cache."""
    import tempfile

    from consumer import Consumer

    out = []
    for fps in _datasets(data):
        ds = Consumer(fps, cache_dir=False, **SETTINGS)
        rows = [tuple(r) for r in ds.sql(SQL)]
        with tempfile.TemporaryDirectory() as tmp:
            ds.pack(os.path.join(tmp, "store"))
            out.append((rows, _store_sha256(os.path.join(tmp, "store"))))
        ds.close()
    return out


def run(root: Path, *, workers: int = 8, files: int = 120, every: int = 10, timeout: float = 300) -> dict:
    """One run (see the module docstring); returns ``{"phases": {1: [...], 2: [...]}, "files": n, "edited": e,
    "truth": {1: (rows, store), 2: (rows, store)}}``; results are per worker, in rank order."""
    data, cache, out = root / "data", root / "cache", root / "out"
    out.mkdir(parents=True)
    paths = write_files(data, files)
    expected = {1: truth(str(data))}
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, str(data), str(cache), str(out), barrier, results))
             for r in range(workers)]
    for p in procs:
        p.start()
    got: dict[int, dict[int, dict]] = {1: {}, 2: {}}
    try:
        barrier.wait(timeout)  # start phase 1
        for _ in range(workers):
            rank, phase, res = results.get(timeout=timeout)
            got[phase][rank] = res
        barrier.wait(timeout)  # phase 1 done
        edited = edit_files(paths, every, seed=1)
        expected[2] = truth(str(data))
        barrier.wait(timeout)  # start phase 2
        for _ in range(workers):
            rank, phase, res = results.get(timeout=timeout)
            got[phase][rank] = res
        barrier.wait(timeout)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return {"phases": {ph: [got[ph][r] for r in range(workers)] for ph in (1, 2)}, "files": files,
            "edited": len(edited), "truth": expected, "exitcodes": [p.exitcode for p in procs], "out": str(out)}


def integrity(cache: Path) -> list[str]:
    """What is wrong with a cache directory after the run (empty: nothing): SQLite's integrity_check of the
    catalog, every row's check, every index entry's digests, leftover temporary files, things moved aside."""
    from consumer.catalog.catalog import Catalog
    from consumer.dataset.cache import INDEX_DIR, load_entry
    from consumer.util.fileio import is_temp_name

    problems = []
    db = cache / "catalog.sqlite"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        check = conn.execute("PRAGMA integrity_check").fetchall()
        if check != [("ok",)]:
            problems.append(f"integrity_check: {check}")
        total = conn.execute("SELECT count(*) FROM files").fetchone()[0]
    finally:
        conn.close()
    catalog = Catalog(str(db))
    verified = len(catalog.verified_rows())
    catalog.close()
    if verified != total:
        problems.append(f"{total - verified} catalog row(s) fail their check")
    entries = [p for p in (cache / INDEX_DIR).iterdir()]
    for entry in entries:
        if is_temp_name(entry.name):
            problems.append(f"temporary folder left: {entry}")
        elif load_entry(str(cache), entry.name) is None:
            problems.append(f"index entry fails its digests: {entry}")
    for dirpath, dirnames, filenames in os.walk(cache):
        for name in dirnames + filenames:
            if ".corrupt" in name or (is_temp_name(name) and dirpath != str(cache / INDEX_DIR)):
                problems.append(f"left behind: {os.path.join(dirpath, name)}")
    return problems


def problems(result: dict, cache: Path) -> list[str]:
    """Everything the run got wrong (empty: nothing): errors in a worker, rows or stores that differ from a
    process alone, work done more than once in all, more than one index build per phase, and what
    :func:`integrity` finds in the cache directory."""
    workers = len(result["exitcodes"])
    out = [f"worker {r}, phase {ph}: {res['error']}" for ph in (1, 2) for r, res in enumerate(result["phases"][ph])
           if "error" in res]
    if out:
        return out
    if result["exitcodes"] != [0] * workers:
        out.append(f"exit codes {result['exitcodes']}")
    from consumer import verify_packed

    for phase, files in ((1, result["files"]), (2, result["edited"])):
        res = result["phases"][phase]
        for r, got in enumerate(res):
            rows, store = result["truth"][phase][got["dataset"]]
            if got["rows"] != rows:
                out.append(f"phase {phase}: worker {r} saw other SQL rows than a process alone")
            if got["store"] != store or got["checksum"] != "ok":
                out.append(f"phase {phase}: worker {r} packed another store ({got['checksum']})")
        for which, (_, store) in enumerate(result["truth"][phase]):  # packed by several processes at once
            shared = os.path.join(result["out"], f"shared-{which}-{phase}")
            if verify_packed(shared)["checksum"] != "ok" or _store_sha256(shared) != store:
                out.append(f"phase {phase}: the store {shared} packed by several processes at once is not whole")
        magic = [r["libmagic"] for r in res]
        content = [r["content"] for r in res]
        if sum(magic) != 2 * files:  # description and MIME type of each new file version, once
            out.append(f"phase {phase}: {sum(magic)} libmagic calls for {files} files ({magic})")
        if sum(content) != files:
            out.append(f"phase {phase}: {sum(content)} content reads for {files} files ({content})")
        for which in (0, 1):  # each dataset's index entry is built once; its other processes wait and open it
            outcomes = sorted(r["cache"] for r in res if r["dataset"] == which)
            if outcomes.count("miss") != 1 or set(outcomes) - {"hit", "miss"}:
                out.append(f"phase {phase}: dataset {which}: index cache outcomes {outcomes} (one miss expected)")
    return out + integrity(cache)
