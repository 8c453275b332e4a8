"""The query engine against DuckDB on an Arrow table of the same rows, at 10^5, 10^6 and 10^7 files, in one run.

For each size a fresh child process builds a synthetic file table (20 classes, log-normal sizes; paths like
``/data/c07/d00123/f00123456.bin`` written straight into a :class:`~consumer.sources.paths.PathList` blob, no file
on disk), opens the engine ``ds.sql`` runs on (:class:`consumer.query.duck.DuckSQL` over
:func:`consumer.query.table.dataset_columns`, exactly what a dataset's session builds) and, side by side, a plain
DuckDB connection over a ``pyarrow.Table`` of the same rows (strings as ``string``, integers as ``int64``: what a
user holding the catalog as Arrow would query). The six statements of issue #18 run interleaved (ours, then
DuckDB's, every repetition; both fetch every row to Python); each figure is the best of ``reps``. A second child
per size runs ours alone and reports its peak RSS (the whole process: table, engine, results).

Two real-file sections: the byte predicate ``head(path, 4) = x'89504E47'`` on a real corpus against DuckDB's own
way to look at the bytes (``read_blob`` over the same files), and the first statement after a ``metadata=None``
build (``SELECT count(*) FROM files``: no libmagic, no file read). A catalog section gives the figures behind
keeping the durable catalog in SQLite (see docs/design.md).

    python -m benchmarks probe query_engine                      # 1e5, 1e6, 1e7 (writes benchmarks/out/query.json)
    python -m benchmarks probe query_engine --sizes 100000 --files 10000   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

NAME = "query_engine"
DESCRIPTION = "the query engine (ds.sql) against DuckDB on the same rows and files"

STATEMENTS = {
    "group by class": "SELECT class, count(*), sum(size) FROM files GROUP BY class",
    "order by size limit 100": "SELECT path, size FROM files ORDER BY size DESC LIMIT 100",
    "path like": "SELECT path FROM files WHERE path LIKE '%f00012%'",
    "per-class avg/min/max": "SELECT class, avg(size), min(size), max(size) FROM files GROUP BY class",
    "sizes occurring more than once": "SELECT size, count(*) FROM files GROUP BY size HAVING count(*) > 1",
    "top 10 per class": "SELECT class, path, size FROM (SELECT class, path, size, row_number() OVER "
                        "(PARTITION BY class ORDER BY size DESC) AS r FROM files) WHERE r <= 10",
}
BYTE_STATEMENT = "SELECT count(*) FROM files WHERE head(path, 4) = x'89504E47'"
CLASSES = 20


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic(n: int, seed: int = 0) -> dict[str, Any]:
    """The numpy arrays of a synthetic dataset of ``n`` files (paths in one NUL-joined blob, no Python str)."""
    from consumer.sources.paths import PathList

    rng = np.random.default_rng(seed)
    cls = rng.integers(0, CLASSES, n)
    i = np.arange(n)
    # "/data/cNN/dNNNNN/fNNNNNNNN.bin" + NUL: a fixed-width byte matrix with the digits filled in
    template = np.frombuffer(b"/data/c00/d00000/f00000000.bin\0", dtype=np.uint8)
    m = np.tile(template, (n, 1))
    for col, value, width in ((7, cls, 2), (11, i // 1000, 5), (18, i, 8)):
        for k in range(width):
            m[:, col + width - 1 - k] = 48 + (value // 10 ** k) % 10
    blob = m.reshape(-1)[:-1].copy()
    del m
    sizes = np.minimum(rng.lognormal(9.0, 1.5, n), 4 << 20).astype(np.int64)
    return {"paths": PathList.from_blob(blob), "doc_class": cls, "sizes": sizes,
            "mtimes": np.full(n, 1_700_000_000_000_000_000, dtype=np.int64), "tokens": sizes // 2 + 3,
            "samples": np.ones(n, dtype=np.int64)}


def ours(data: dict[str, Any]):
    """The engine ds.sql runs on, over the synthetic dataset (no catalog: lazy columns stay NULL)."""
    from consumer.query.duck import DuckSQL, LazyGroup, derived_groups
    from consumer.query.table import dataset_columns, derived_columns, path_array

    n = len(data["paths"])
    classes = [f"class{c:02d}" for c in range(CLASSES)]
    ids = np.arange(CLASSES)
    cols = dataset_columns(data["doc_class"], classes, ids, data["sizes"], data["mtimes"],
                           np.zeros(n, dtype=np.int32), [""])
    derived = derived_columns(n, data["doc_class"], ids, tokens=lambda: data["tokens"], samples=lambda: data["samples"])
    paths = data["paths"]  # as a session does: path and the derived columns are made when a statement names them
    return DuckSQL(cols, [LazyGroup(("path", "extension"), lambda: {"path": path_array(paths)}, star=True),
                          *derived_groups(derived)], rows=n)


def baseline(data: dict[str, Any]):
    """Plain DuckDB over a pyarrow.Table of the same rows."""
    import duckdb
    import pyarrow as pa

    from consumer.query.table import path_array

    n = len(data["paths"])
    classes = pa.array([f"class{c:02d}" for c in range(CLASSES)])
    table = pa.table({
        "file_id": np.arange(n), "path": path_array(data["paths"]).cast(pa.string()),
        "class": classes.take(pa.array(data["doc_class"])), "class_id": data["doc_class"].astype(np.int64),
        "size": data["sizes"], "mtime_ns": data["mtimes"], "tokens": data["tokens"], "samples": data["samples"]})
    conn = duckdb.connect()
    conn.register("files_arrow", table)
    conn.execute("CREATE VIEW files AS SELECT * FROM files_arrow")
    return conn


def compare(n: int, reps: int) -> dict:
    """Child: ours vs DuckDB, interleaved, best of ``reps`` per statement."""
    t = time.perf_counter()
    data = synthetic(n)
    made = time.perf_counter() - t
    t = time.perf_counter()
    engine = ours(data)
    engine.query("SELECT 1")
    first = time.perf_counter() - t
    t = time.perf_counter()
    engine.query("SELECT count(*) FROM files WHERE path IS NULL")
    first_path = time.perf_counter() - t
    conn = baseline(data)
    out: dict[str, Any] = {"files": n, "synthetic_s": made, "engine_open_s": first, "first_path_s": first_path,
                           "statements": {}}
    reps = max(reps, 40 if n <= 1_000_000 else 0)  # ms-long statements on a shared machine: more samples
    out["reps"] = reps
    for name, sql in STATEMENTS.items():
        a, b = [], []
        rows = None
        for _ in range(reps):
            t = time.perf_counter()
            rows = engine.query(sql)
            a.append(time.perf_counter() - t)
            t = time.perf_counter()
            conn.execute(sql).fetchall()
            b.append(time.perf_counter() - t)
        out["statements"][name] = {"sql": sql, "ours_s": min(a), "duckdb_s": min(b), "ratio": min(a) / min(b),
                                   "rows": len(rows or [])}
    out["peak_rss_mb"] = _peak_rss_mb()
    return out


def alone(n: int, reps: int) -> dict:
    """Child: ours alone (GROUP BY), for the peak RSS of a process that holds only the dataset and the engine."""
    data = synthetic(n)
    engine = ours(data)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        engine.query(STATEMENTS["group by class"])
        times.append(time.perf_counter() - t)
    return {"files": n, "group_by_s": min(times), "peak_rss_mb": _peak_rss_mb()}


def _write_files(root: str, n: int, seed: int = 1) -> int:
    """``n`` small real files in 4 classes, a quarter of them PNG-headed (half of those renamed .txt)."""
    rng = np.random.default_rng(seed)
    pngs = 0
    for c in range(4):
        os.makedirs(os.path.join(root, f"k{c}"), exist_ok=True)
    png = b"\x89PNG\r\n\x1a\n" + bytes(56)
    pool = rng.integers(0, 256, 1 << 16, dtype=np.uint8).tobytes()
    for i in range(n):
        is_png = i % 4 == 0
        pngs += is_png
        ext = ".txt" if is_png and i % 8 == 0 else ".png" if is_png else ".bin"
        start = int(rng.integers(0, 60000))
        body = pool[start:start + 64 + i % 512]
        with open(os.path.join(root, f"k{i % 4}", f"f{i:07d}{ext}"), "wb") as f:
            f.write(png + body if is_png else b"DATA" + body)
    return pngs


def real_files(n: int, reps: int) -> dict:
    """Child: a metadata=None build of ``n`` real files, the first statement, and the byte predicate against
    DuckDB's read_blob over the same files."""
    import duckdb
    import magic

    from consumer import Consumer

    calls = [0]
    original = magic.Magic.from_file

    def counting(self, path):
        calls[0] += 1
        return original(self, path)

    magic.Magic.from_file = counting
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "corpus")
        t = time.perf_counter()
        pngs = _write_files(root, n)
        write_s = time.perf_counter() - t
        t = time.perf_counter()
        ds = Consumer(root, cache_dir=os.path.join(tmp, "cache"), metadata=None, style="concat", seqlen=256)
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        count = ds.sql("SELECT count(*) FROM files")[0][0]
        first_s = time.perf_counter() - t
        assert count == n
        magic_after_first = calls[0]
        conn = duckdb.connect()
        glob = os.path.join(root, "*", "*")
        ours_t, theirs_t = [], []
        for _ in range(reps):
            t = time.perf_counter()
            got = ds.sql(BYTE_STATEMENT)[0][0]
            ours_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            theirs = conn.execute(f"SELECT count(*) FROM read_blob('{glob}') "
                                  "WHERE content[1:4] = x'89504E47'").fetchall()[0][0]
            theirs_t.append(time.perf_counter() - t)
            assert got == theirs == pngs, (got, theirs, pngs)
        ds.close()
    return {"files": n, "write_s": write_s, "build_s": build_s, "first_count_s": first_s,
            "libmagic_calls_build_and_first_statement": magic_after_first, "pngs": pngs,
            "byte_predicate": {"sql": BYTE_STATEMENT, "ours_s": min(ours_t), "duckdb_read_blob_s": min(theirs_t),
                               "ratio": min(ours_t) / min(theirs_t)}}


_HOLD = {  # open the database, write, report, then keep it open
    "duckdb": "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
              "c.execute('CREATE TABLE IF NOT EXISTS w(x INT)'); c.execute('INSERT INTO w VALUES (1)'); ",
    "sqlite": "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], timeout=10); "
              "c.execute('CREATE TABLE IF NOT EXISTS w(x INT)'); c.execute('INSERT INTO w VALUES (1)'); c.commit(); ",
}


def _second_writer(kind: str, path: str) -> str:
    """While one process holds ``path`` open (after a write), can a second process write to it?"""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD[kind] + "print('open', flush=True); time.sleep(60)", path],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "open":
            return f"holder failed: {holder.stderr.read().strip().splitlines()[-1:]}"
        second = subprocess.run([sys.executable, "-c", _HOLD[kind] + "print('wrote')", path], capture_output=True,
                                text=True, timeout=60, check=False)
        if second.returncode == 0 and "wrote" in second.stdout:
            return "a second process wrote while another held it open"
        return "refused: " + (second.stderr.strip().splitlines() or ["?"])[-1][:160]
    finally:
        holder.kill()
        holder.wait()


def catalog(n: int) -> dict:
    """Child: the durable catalog's options. Reading the libmagic columns of ``n`` files (what the first statement
    naming ``mime`` does on a warm catalog) from SQLite (verified rows) vs a DuckDB file vs Parquet; and whether a
    second process can write while one holds the catalog open (loader workers, ranks, concurrent builds)."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .catalog_rows import filled_catalog

    with tempfile.TemporaryDirectory() as tmp:
        cat, paths, sizes, mtimes = filled_catalog(os.path.join(tmp, "catalog.sqlite"), n)
        t = time.perf_counter()
        desc, mime = cat.sync(paths, sizes, mtimes, want=("description", "mime"))
        sqlite_s = time.perf_counter() - t
        cat.close()
        table = pa.table({"path": paths, "size": sizes, "mtime_ns": mtimes, "description": desc, "mime": mime})
        pq.write_table(table, os.path.join(tmp, "c.parquet"))
        dpath = os.path.join(tmp, "c.duckdb")
        w = duckdb.connect(dpath)
        w.register("t", table)
        w.execute("CREATE TABLE files AS SELECT * FROM t")
        w.close()
        t = time.perf_counter()
        pq.read_table(os.path.join(tmp, "c.parquet"), columns=["path", "description", "mime"])
        parquet_s = time.perf_counter() - t
        t = time.perf_counter()
        r = duckdb.connect(dpath, read_only=True)
        r.sql("SELECT path, description, mime FROM files").to_arrow_table()
        duck_s = time.perf_counter() - t
        r.close()
        duck_second = _second_writer("duckdb", os.path.join(tmp, "lock.duckdb"))
        sqlite_second = _second_writer("sqlite", os.path.join(tmp, "catalog.sqlite"))
    return {"files": n, "sqlite_sync_verified_s": sqlite_s, "parquet_read_s": parquet_s, "duckdb_file_read_s": duck_s,
            "duckdb_file_second_process": duck_second, "sqlite_second_process": sqlite_second}


def _child(kind: str, n: int, reps: int) -> dict:
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-m", "benchmarks.probes.query_engine", "--child", kind, str(n), str(reps)],
                         capture_output=True, text=True, env=env, cwd=root, check=False)
    if out.returncode:
        return {"files": n, "error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(sizes=(100_000, 1_000_000, 10_000_000), files: int = 100_000, reps: int = 5, log=print) -> dict:
    """Every section, each child in a fresh process; returns the results as one JSON-able dict."""
    res: dict[str, Any] = {"sizes": list(sizes), "reps": reps, "cores": os.cpu_count(),
                           "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
                           "compare": [], "alone": []}
    for n in sizes:
        log(f"query engine: {n} rows")
        res["compare"].append(_child("compare", n, reps))
        log(f"  {json.dumps(res['compare'][-1])[:400]}")
        res["alone"].append(_child("alone", n, reps))
        log(f"  {json.dumps(res['alone'][-1])}")
    log(f"query engine: {files} real files")
    res["real_files"] = _child("real", files, max(1, reps // 2))
    log(f"  {json.dumps(res['real_files'])}")
    res["catalog"] = _child("catalog", min(files, 100_000), 1)
    log(f"  {json.dumps(res['catalog'])}")
    return res


def table(res: dict) -> str:
    """The results as markdown."""
    lines = ["| rows | statement | `ds.sql` | DuckDB on Arrow | ratio |", "|---|---|---|---|---|"]
    for c in res["compare"]:
        if "error" in c:
            lines.append(f"| {c['files']:,} | (failed: {c['error']}) | | | |")
            continue
        for name, s in c["statements"].items():
            lines.append(f"| {c['files']:,} | {name} | {s['ours_s'] * 1e3:.1f} ms | {s['duckdb_s'] * 1e3:.1f} ms | "
                         f"{s['ratio']:.2f}x |")
    lines += ["", "| rows | engine open (first statement) | first statement naming `path` | GROUP BY alone | "
                  "peak RSS, engine alone | peak RSS, both side by side |", "|---|---|---|---|---|---|"]
    for c, a in zip(res["compare"], res["alone"]):
        if "error" in c or "error" in a:
            continue
        lines.append(f"| {c['files']:,} | {c['engine_open_s']:.2f} s | {c.get('first_path_s', 0):.2f} s | "
                     f"{a['group_by_s'] * 1e3:.0f} ms | "
                     f"{a['peak_rss_mb'] / 1024:.2f} GiB | {c['peak_rss_mb'] / 1024:.2f} GiB |")
    r = res.get("real_files", {})
    if "error" not in r and r:
        b = r["byte_predicate"]
        lines += ["", f"Real files ({r['files']:,}, metadata=None): build {r['build_s']:.2f} s, first "
                      f"`SELECT count(*) FROM files` {r['first_count_s'] * 1e3:.0f} ms, libmagic calls "
                      f"{r['libmagic_calls_build_and_first_statement']}. `{b['sql']}`: {b['ours_s'] * 1e3:.0f} ms "
                      f"(found {r['pngs']} PNGs) against DuckDB `read_blob` over the same files "
                      f"{b['duckdb_read_blob_s'] * 1e3:.0f} ms ({b['ratio']:.2f}x)."]
    c = res.get("catalog", {})
    if c and "error" not in c:
        lines += ["", f"Catalog ({c['files']:,} rows, description + mime): SQLite `sync` (verified rows) "
                      f"{c['sqlite_sync_verified_s']:.2f} s, Parquet read {c['parquet_read_s'] * 1e3:.0f} ms, "
                      f"DuckDB file read {c['duckdb_file_read_s'] * 1e3:.0f} ms; a second process opening the DuckDB "
                      f"file while one holds it: {_no_paths(c['duckdb_file_second_process'])}; SQLite: "
                      f"{_no_paths(c['sqlite_second_process'])}."]
    return "\n".join(lines)


def _no_paths(message: str) -> str:
    """``message`` with the file paths in it (a temporary folder, the interpreter holding a lock) as ``<path>``:
    the report names no machine's paths."""
    return re.sub(r"/[^\s\"']+", "<path>", str(message))


def render_section(res: dict | None) -> list[str]:
    """The report's markdown lines for the ``query`` results (none when the section did not run)."""
    if not res:
        return []
    return ["## The query engine against DuckDB on Arrow", "",
            f"Synthetic file tables ({', '.join(f'{n:,}' for n in res['sizes'])} rows, 20 classes) through the "
            "engine "
            "`ds.sql` runs on and through plain DuckDB over a `pyarrow.Table` of the same rows, interleaved, best of "
            f"{res['reps']}; every row fetched to Python on both sides (`python -m benchmarks probe query_engine`).",
            "",
            *table(res).splitlines(), ""]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--sizes", default="100000,1000000,10000000", help="comma list of table rows")
    parser.add_argument("--files", type=int, default=100_000,
                        help="real files for the byte predicate and first statement")
    parser.add_argument("--reps", type=int, default=5)


def run(args: argparse.Namespace) -> dict:
    """Every part, each child in a fresh process."""
    return measure(tuple(int(x) for x in args.sizes.split(",")), args.files, args.reps,
                   log=lambda *a: print(*a, file=sys.stderr, flush=True))


if __name__ == "__main__":  # one child's part: python -m benchmarks.probes.query_engine --child KIND N REPS
    _kind, _n, _reps = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    _fn = {"compare": compare, "alone": alone, "real": real_files, "catalog": lambda k, _r: catalog(k)}[_kind]
    print(json.dumps(_fn(_n, _reps)))
