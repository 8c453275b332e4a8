"""Scale-out on Dask: build and pack on 1, 2 and 3 workers against the local engine, in one run.

Every Dask cluster is a ``LocalCluster`` on 127.0.0.1 (worker processes, the machine's cores split among the
workers as dask does by default), started for its run only (untimed, warmed up: imports and the libmagic
database loaded on the workers), so that one cluster at a time is alive; the configurations are interleaved
inside every repetition (local, 1, 2, 3 workers, then again), best of ``reps``, so that the load of a shared
machine cancels out. Measured on one corpus (``benchmarks.corpora`` "small": 256 B - 4 KB files):

- **build**: a cold ``Consumer(root, metadata="file")`` (fresh cache dir: stat, probe, libmagic, catalog
  commit, documents, index) — the local build, and ``engine=client`` for each cluster;
- **pack**: ``ds.pack(prefix)`` (Megatron) of that dataset, local and ``engine=client``;
- **overhead**: Dask with 1 worker over local (target ≤ 1.3×);
- **scheduling share**: the tasks of a Dask build or pack times the cost of an empty task on the same cluster
  (1,000 submitted at once, gathered: the scheduler's cost per task in flight), over the compute time of those
  tasks (from dask's task stream; target < 5 %); the round trip of one empty task alone is reported too;
- **Parquet catalog**: a 10^6-row partitioned catalog (10 parts) answering ``GROUP BY class, mime`` through
  DuckDB (target < 1 s).

Every Dask result is checked against the local one (catalog rows, samples, store bytes) before it counts.

    python -m benchmarks probe dask --files 20000 --reps 3
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import tempfile
import time
from typing import Any

import numpy as np

from ..corpora import make_corpus

NAME = "dask"
DESCRIPTION = "build and pack on Dask with 1-3 workers against the local engine"

__all__ = ["measure", "render_section", "add_arguments", "run"]

WORKERS = (1, 2, 3)
OVERHEAD_TARGET = 1.3
SCHEDULING_TARGET = 0.05
GROUP_BY_TARGET_S = 1.0


def _noop(x: int) -> int:
    return x


def _task_latency(client: Any, n: int = 100) -> float:
    """Seconds of one empty task's round trip (submit, run, result), one at a time."""
    for _ in range(5):
        client.submit(_noop, -1, pure=False).result()
    t = time.perf_counter()
    for i in range(n):
        client.submit(_noop, i, pure=False).result()
    return (time.perf_counter() - t) / n


def _task_cost(client: Any, n: int = 1000) -> float:
    """Seconds per empty task when ``n`` are submitted at once and gathered (the scheduler's cost per task when
    tasks are in flight together, as in a build or a pack)."""
    client.gather(client.map(_noop, range(-50, 0), pure=False))
    t = time.perf_counter()
    client.gather(client.map(_noop, range(n), pure=False))
    return (time.perf_counter() - t) / n


def _compute_seconds(stream: list[dict]) -> tuple[int, float]:
    """Tasks of the consumer passes in a task stream, and the sum of their compute time (s)."""
    keys, total = set(), 0.0
    for rec in stream:
        if not str(rec["key"]).startswith("consumer-"):
            continue
        keys.add(rec["key"])
        total += sum(s["stop"] - s["start"] for s in rec["startstops"] if s["action"] == "compute")
    return len(keys), total


def _same_catalog(a: str, b: str) -> bool:
    from consumer.catalog.catalog import Catalog

    x, y = Catalog(os.path.join(a, "catalog.sqlite")), Catalog(os.path.join(b, "catalog.sqlite"))
    try:
        return x.dump() == y.dump()
    finally:
        x.close(), y.close()


def _group_by(work: str, reps: int) -> dict:
    """A 10^6-row partitioned Parquet catalog (10 parts) and DuckDB's GROUP BY over it, best of ``reps``."""
    import duckdb

    from consumer.scale.parquet import open_parquet_catalog, write_manifest, write_part

    root = os.path.join(work, "parquet")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    rng = np.random.default_rng(0)
    n, per, parts = 1_000_000, 100_000, []
    classes = np.array([f"class{k}" for k in range(20)])
    mimes = np.array(["text/plain", "application/octet-stream", "image/png", "application/pdf", "text/x-python"])
    for k in range(n // per):
        name = f"part-{k:05d}.parquet"
        size = write_part({"file_id": np.arange(k * per, (k + 1) * per),
                           "path": [f"/corpus/d{k}/f{i}.dat" for i in range(per)],
                           "class": classes[rng.integers(0, classes.size, per)].tolist(),
                           "size": rng.integers(0, 1 << 20, per), "mtime_ns": rng.integers(0, 1 << 60, per),
                           "mime": mimes[rng.integers(0, mimes.size, per)].tolist(),
                           "entropy": rng.random(per) * 8}, os.path.join(root, name))
        parts.append((name, per, size))
    write_manifest(root, parts)
    cat = open_parquet_catalog(root)
    query = (f"SELECT class, mime, count(*) AS files, sum(size) AS bytes, avg(entropy) AS entropy FROM {cat.sql()} "
             "GROUP BY class, mime")
    best, groups = float("inf"), 0
    for _ in range(reps):
        con = duckdb.connect()  # a fresh connection each time: no result kept between runs
        t = time.perf_counter()
        groups = len(con.sql(query).fetchall())
        best = min(best, time.perf_counter() - t)
        con.close()
    bytes_ = sum(size for _, _, size in parts)
    shutil.rmtree(root, ignore_errors=True)
    return {"rows": n, "parts": len(parts), "bytes": bytes_, "groups": groups, "seconds": best,
            "target_s": GROUP_BY_TARGET_S, "met": best < GROUP_BY_TARGET_S}


def _warm(client: Any, root: str) -> None:
    """Imports and the libmagic database loaded on every worker (not timed): a few files described."""
    from consumer.scale.tasks import describe_task
    from consumer.sources.local import LocalFiles

    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)[:8]
    part = LocalFiles.listed(files)
    client.gather(client.map(describe_task, [part] * 8, [("description",)] * 8, pure=False))


def measure(files: int, reps: int, work: str, data: str, log=print) -> dict:
    """Build and pack times per engine, overhead, scheduling share and the Parquet GROUP BY (see the module)."""
    from distributed import Client, LocalCluster, get_task_stream

    from consumer import Consumer

    corpus = make_corpus(data, "small", files, 1)
    cores = os.cpu_count() or 1
    load_start = round(os.getloadavg()[0], 2)
    os.makedirs(work, exist_ok=True)
    labels = ["local", *(f"dask-{w}" for w in WORKERS)]
    layout = {f"dask-{w}": f"{w} × {max(1, cores // w)} thread{'s' if cores // w > 1 else ''}" for w in WORKERS}
    build: dict[str, list[float]] = {k: [] for k in labels}
    pack: dict[str, list[float]] = {k: [] for k in labels}
    latency: dict[str, float] = {}
    per_task: dict[str, float] = {}
    tasks: dict[str, dict] = {}
    checks: dict[str, bool] = {}

    def run(label: str, client: Any, check: bool) -> None:
        cache, prefix = os.path.join(work, f"cache-{label}"), os.path.join(work, f"store-{label}")
        shutil.rmtree(cache, ignore_errors=True)
        t = time.perf_counter()
        if client is None:
            ds = Consumer(corpus.root, cache_dir=cache, metadata="file", seqlen=1024)
            build[label].append(time.perf_counter() - t)
            t = time.perf_counter()
            ds.pack(prefix)
            pack[label].append(time.perf_counter() - t)
        else:
            with get_task_stream(client) as stream:
                ds = Consumer(corpus.root, cache_dir=cache, metadata="file", seqlen=1024, engine=client)
            build[label].append(time.perf_counter() - t)
            tasks.setdefault(label, {})["build"] = _compute_seconds(stream.data)
            t = time.perf_counter()
            with get_task_stream(client) as stream:
                ds.pack(prefix, engine=client)
            pack[label].append(time.perf_counter() - t)
            tasks[label]["pack"] = _compute_seconds(stream.data)
        if check and client is not None:  # equal to the local run of this repetition (it ran first)
            local = Consumer(corpus.root, cache_dir=os.path.join(work, "cache-local"), metadata="file", seqlen=1024)
            ids = np.arange(len(local))
            checks[label] = bool(
                _same_catalog(os.path.join(work, "cache-local"), cache)
                and np.array_equal(ds.fetch_numpy(ids)["input_array"], local.fetch_numpy(ids)["input_array"])
                and all(filecmp.cmp(prefix + x, os.path.join(work, "store-local") + x, shallow=False)
                        for x in (".bin", ".idx", ".consumer.npz")))
            local.close()
        ds.close()

    run("local", None, False)  # warm-up of the OS page cache and the imports (not timed)
    build["local"].clear(), pack["local"].clear()
    for rep in range(reps):
        for label in labels:
            if label == "local":
                run(label, None, False)
                continue
            w = int(label.split("-")[1])  # one cluster at a time, started (untimed) for this run only
            cluster = LocalCluster(host="127.0.0.1", protocol="tcp", n_workers=w,
                                   threads_per_worker=max(1, cores // w), processes=True,
                                   dashboard_address="127.0.0.1:0", worker_dashboard_address=None)
            client = Client(cluster)
            try:
                _warm(client, corpus.root)
                if rep == 0:
                    latency[label], per_task[label] = _task_latency(client), _task_cost(client)
                run(label, client, rep == 0)
            finally:
                client.close()
                cluster.close()
        log(f"dask bench rep {rep}: build {({k: round(v[-1], 2) for k, v in build.items()})}, "
            f"pack {({k: round(v[-1], 2) for k, v in pack.items()})}")
    return _summary(corpus, reps, cores, layout, load_start, build, pack, latency, per_task, tasks, checks,
                    _group_by(work, max(reps, 3)))


def _summary(corpus: Any, reps: int, cores: int, layout: dict, load_start: float, build: dict, pack: dict,
             latency: dict, per_task: dict, tasks: dict, checks: dict, group_by: dict) -> dict:
    """The section's results from the raw timings of :func:`measure`."""
    best = {"build": {k: min(v) for k, v in build.items()}, "pack": {k: min(v) for k, v in pack.items()}}
    overhead = {p: best[p]["dask-1"] / best[p]["local"] for p in ("build", "pack")}
    share = {k: {p: (n * per_task[k] / total if total else None) for p, (n, total) in v.items()}
             for k, v in tasks.items()}
    return {"files": corpus.n_files, "bytes": corpus.total_bytes, "reps": reps, "cores": cores, "layout": layout,
            "load_average": [load_start, round(os.getloadavg()[0], 2)],
            "seconds": best, "all": {"build": build, "pack": pack},
            "overhead": overhead, "overhead_target": OVERHEAD_TARGET,
            "overhead_met": all(v <= OVERHEAD_TARGET for v in overhead.values()),
            "task_latency_ms": {k: v * 1e3 for k, v in latency.items()},
            "task_cost_ms": {k: v * 1e3 for k, v in per_task.items()},
            "tasks": {k: {p: {"tasks": n, "compute_s": total} for p, (n, total) in v.items()}
                      for k, v in tasks.items()},
            "scheduling_share": share, "scheduling_target": SCHEDULING_TARGET, "identical": checks,
            "group_by": group_by}


def render_section(res: dict | None) -> list[str]:
    """The report's markdown lines for the ``dask`` results (none when the section did not run)."""
    if not res:
        return []
    if "absent" in res:
        return ["## Scale-out on Dask: build and pack on 1, 2, 3 workers", "", f"Not measured: {res['absent']}.", ""]
    out = ["## Scale-out on Dask: build and pack on 1, 2, 3 workers", "",
           f"{res['files']:,} files of 256 B – 4 KB ({res['bytes'] / 1e6:.1f} MB), {res['cores']} cores (load average "
           f"{' → '.join(str(x) for x in res.get('load_average', []))} over the run). Cold build "
           "with libmagic headers (`Consumer(root, metadata=\"file\")`, fresh cache dir) and a Megatron pack of it, "
           "locally and with `engine=client` on a `LocalCluster` on 127.0.0.1 (worker processes; the cores split "
           "among the workers; one cluster alive at a time, started and warmed up untimed). Configurations "
           "interleaved in every repetition; best of "
           f"{res['reps']}. Every Dask result was checked equal to the local one (catalog rows, samples, "
           ".bin/.idx bytes) before it counts. On 2 cores parallelism can give at most ~2×; the figure that matters "
           "is the overhead of 1 worker against the local engine "
           f"(target ≤ {res['overhead_target']:g}×) and the scheduling share (target < "
           f"{res['scheduling_target'] * 100:g} %: tasks × the cost of an empty task among 1,000 in flight ÷ the "
           "tasks' compute time).",
           ""]
    head = ["engine", "workers × threads", "build s", "build vs local", "pack s", "pack vs local",
            "tasks (build / pack)", "scheduling share (build / pack)", "identical"]
    rows = []
    for k, b in res["seconds"]["build"].items():
        p = res["seconds"]["pack"][k]
        t = res["tasks"].get(k, {})
        s = res["scheduling_share"].get(k, {})
        rows.append([k, res["layout"].get(k, "this process"), f"{b:.2f}",
                     f"{b / res['seconds']['build']['local']:.2f}×",
                     f"{p:.2f}", f"{p / res['seconds']['pack']['local']:.2f}×",
                     " / ".join(str(t[x]["tasks"]) for x in ("build", "pack") if x in t) or "–",
                     " / ".join(f"{s[x] * 100:.2f} %" for x in ("build", "pack") if s.get(x) is not None) or "–",
                     "–" if k == "local" else ("yes" if res["identical"].get(k) else "**no**")])
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    o = res["overhead"]
    g = res["group_by"]
    out += ["", f"Overhead of Dask with 1 worker: build **{o['build']:.2f}×**, pack **{o['pack']:.2f}×** the local "
            f"engine ({'met' if res['overhead_met'] else 'not met'}). An empty task costs "
            + ", ".join(f"{k} {v:.2f} ms" for k, v in res["task_cost_ms"].items())
            + " among 1,000 in flight; alone, its round trip is "
            + ", ".join(f"{k} {v:.1f} ms" for k, v in res["task_latency_ms"].items()) + ".",
            "", f"Partitioned Parquet catalog: {g['rows']:,} rows in {g['parts']} parts ({g['bytes'] / 1e6:.1f} MB); "
            f"`GROUP BY class, mime` (count, sum, avg; {g['groups']} groups) through DuckDB in "
            f"**{g['seconds']:.3f} s** "
            f"(target < {g['target_s']:g} s: {'met' if g['met'] else 'not met'}).", ""]
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=3)


def run(args: argparse.Namespace) -> dict:
    """Measure the section in a temporary folder (needs ``dask.distributed``)."""
    with tempfile.TemporaryDirectory() as tmp:
        return measure(args.files, args.reps, os.path.join(tmp, "work"), os.path.join(tmp, "data"))
