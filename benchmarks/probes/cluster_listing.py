"""The listing of a local folder by a cluster build against the local scan: wall, the client's CPU and peak memory.

``files`` small files (64 B) in one of two layouts: ``nested`` (``classes`` class folders of 50 sub-folders each)
or ``flat`` (one folder of files: the class ``"null"``, which a cluster listing cuts into slices of its sorted
entries). Each listing runs in a **fresh process** (the client): the local
:func:`~consumer.sources.listing.scan_directory`, or the same scan walked on a Dask ``LocalCluster`` (127.0.0.1,
worker processes of one thread; the scheduler lives in this parent process, not in the client) of 1 and 2
workers. Per configuration: best wall and client CPU seconds over ``reps`` interleaved rounds, and the client's
peak resident memory (``VmHWM``) above what it held before the scan (imports, the connected ``Client``). Every
cluster listing is checked equal to the local one (a digest of paths, sizes, stamps and identities) first. On a
machine with fewer cores than workers + client the walls cannot show scaling; the client's CPU and memory can.

    python -m benchmarks probe cluster_listing --files 100000 --layouts nested,flat
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

NAME = "cluster_listing"
DESCRIPTION = "listing a local folder on 1-2 Dask workers against the local scan: wall, client CPU and peak RSS"

_CHILD = r"""
import hashlib, json, resource, sys, time
from benchmarks.measure import peak_rss_mb
from consumer.sources.listing import scan_directory
root, where = sys.argv[1], sys.argv[2]
walker = None
if where != "local":
    import distributed
    from consumer.scale.engines import DaskEngine
    from consumer.scale.scan import walker_on
    client = distributed.Client(where)
    walker = walker_on(DaskEngine(client))
base = peak_rss_mb()
t0 = time.perf_counter(); r0 = resource.getrusage(resource.RUSAGE_SELF)
listing = scan_directory(root, "raise", walker)
wall = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
h = hashlib.sha256(listing.paths.packed().tobytes())
for a in (listing.paths.offsets(), listing.sizes, listing.stamps, listing.ident):
    h.update(a.tobytes())
h.update(json.dumps([(c.name, len(c.paths)) for c in listing.corpus.classes]).encode())
print(json.dumps({"wall_s": wall, "cpu_s": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
                  "peak_rss_mb": peak_rss_mb(), "rss_before_mb": base, "files": len(listing.sizes),
                  "digest": h.hexdigest()}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--files``, ``--classes``, ``--layouts``, ``--workers``, ``--reps``."""
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--classes", type=int, default=20)
    parser.add_argument("--layouts", default="nested,flat", help="comma-separated: nested, flat")
    parser.add_argument("--workers", default="1,2", help="comma-separated cluster sizes")
    parser.add_argument("--reps", type=int, default=2)


def _corpus(root: str, files: int, classes: int, layout: str) -> None:
    made: set[str] = set()
    for i in range(files):
        d = root if layout == "flat" else os.path.join(root, f"c{i % classes:03d}", f"d{(i // classes) % 50:02d}")
        if d not in made:
            os.makedirs(d, exist_ok=True)
            made.add(d)
        fd = os.open(os.path.join(d, f"f{i:08d}.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"x" * 64)
        os.close(fd)


def _layout(root: str, where: dict[str, str], reps: int) -> dict[str, Any]:
    from benchmarks.children import child_json  # noqa: PLC0415

    for name, addr in where.items():  # warm-up: workers import consumer once; the equality check
        if name != "local":
            child_json(["-c", _CHILD, root, addr])
    runs: dict[str, list[dict]] = {name: [] for name in where}
    for _ in range(reps):
        for name, addr in where.items():
            got = child_json(["-c", _CHILD, root, addr])
            if "error" in got:
                raise RuntimeError(f"{name}: {got['error']}")
            runs[name].append(got)
    digest = runs["local"][0]["digest"]
    if any(r["digest"] != digest for rs in runs.values() for r in rs):
        raise RuntimeError("a cluster listing differs from the local scan")
    local_wall = min(r["wall_s"] for r in runs["local"])
    local_cpu = min(r["cpu_s"] for r in runs["local"])
    local_mem = max(r["peak_rss_mb"] - r["rss_before_mb"] for r in runs["local"])
    out: dict[str, Any] = {"files": runs["local"][0]["files"]}
    for name, rs in runs.items():
        wall, cpu = min(r["wall_s"] for r in rs), min(r["cpu_s"] for r in rs)
        mem = max(r["peak_rss_mb"] - r["rss_before_mb"] for r in rs)
        out[name] = {"wall_s": round(wall, 3), "client_cpu_s": round(cpu, 3), "client_peak_rss_above_start_mb":
                     round(mem, 1), "client_peak_rss_mb": round(max(r["peak_rss_mb"] for r in rs), 1),
                     "wall_vs_local": round(wall / local_wall, 2), "cpu_vs_local": round(cpu / local_cpu, 2),
                     "mem_vs_local": round(mem / local_mem, 2) if local_mem > 0 else None}
    return out


def run(args: argparse.Namespace) -> dict:
    """Per layout: best wall, client CPU and client peak memory of the local scan and of each cluster size."""
    import distributed  # noqa: PLC0415

    sizes = [int(w) for w in args.workers.split(",") if w]
    out: dict[str, Any] = {"files": args.files, "classes": args.classes, "reps": args.reps,
                           "load_avg": os.getloadavg()[0]}
    clusters = [distributed.LocalCluster(host="127.0.0.1", n_workers=n, threads_per_worker=1, processes=True,
                                         dashboard_address="127.0.0.1:0", worker_dashboard_address=None)
                for n in sizes]
    try:
        where = {"local": "local", **{f"{n} workers": c.scheduler_address for n, c in zip(sizes, clusters)}}
        for layout in [x for x in args.layouts.split(",") if x]:
            if layout not in ("nested", "flat"):
                raise ValueError(f"--layouts: unknown layout {layout!r} (nested, flat)")
            with tempfile.TemporaryDirectory() as tmp:
                _corpus(tmp, args.files, args.classes, layout)
                out[layout] = _layout(tmp, where, args.reps)
    finally:
        for c in clusters:
            c.close()
    out["load_avg_end"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    import json

    p = argparse.ArgumentParser()
    add_arguments(p)
    print(json.dumps(run(p.parse_args()), indent=1))
