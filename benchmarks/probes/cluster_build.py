"""A cluster build of a local folder, from the client's side: its peak resident memory and CPU seconds, cold and warm.

Per corpus size (``--sizes``): small files (64 B) in the nested layout of the ``cluster_listing`` probe (20 class
folders of 50 sub-folders each; ``--root DIR`` reuses a folder made before, e.g. for 10^6 files). Each build runs in a
**fresh process** (the client), connected to a Dask ``LocalCluster`` (127.0.0.1, ``--workers`` worker processes of
one thread; the scheduler lives in this parent process, not in the client):
``Consumer(root, cache_dir=fresh, metadata=M, seqlen=64, engine=client)`` **cold** (the workers walk, join, run
libmagic when ``M`` is ``"file"``, write the parts and the index cache entry), then the same call again **warm**
(walked again on the workers; the parts and the entry found and mapped). Per build: wall, the client's CPU seconds,
its peak resident memory (``VmHWM``, file-backed pages it mapped and touched included) and the part of it above what
it held before the build (imports and the connected ``Client``), the cache state and the parts used. ``--check``
also builds locally (fresh process, another cache) and requires the same index cache key and sample count.

    python -m benchmarks probe cluster_build --sizes 100000,1000000 --metadata none,file --workers 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from typing import Any

from .cluster_listing import _corpus

NAME = "cluster_build"
DESCRIPTION = "a cluster build of a local folder: the client's peak RSS and CPU seconds, cold and warm, 10^5-10^6 files"

_CHILD = r"""
import json, resource, sys, time
from benchmarks.measure import peak_rss_mb
from consumer import Consumer
root, cache, where, metadata = sys.argv[1], sys.argv[2], sys.argv[3], None if sys.argv[4] == "none" else sys.argv[4]
engine = None
if where != "local":
    import distributed
    engine = distributed.Client(where)
base = peak_rss_mb()
t0 = time.perf_counter(); r0 = resource.getrusage(resource.RUSAGE_SELF)
ds = Consumer(root, cache_dir=cache, metadata=metadata, seqlen=64, engine=engine)
wall = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
info = ds.build_info
print(json.dumps({"wall_s": wall, "cpu_s": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
                  "peak_rss_mb": peak_rss_mb(), "rss_before_mb": base, "files": len(ds.files), "samples": len(ds),
                  "cache": info["cache"], "key": info["key"], "libmagic_calls": info["libmagic_calls"],
                  "parts": info.get("parts")}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--sizes``, ``--metadata``, ``--workers``, ``--root``, ``--check``."""
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated file counts")
    parser.add_argument("--metadata", default="none,file", help="comma-separated header modes: none, file, mime")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--root", default=None,
                        help="a folder of such corpora to reuse (ROOT/<size>, made there when missing)")
    parser.add_argument("--check", action="store_true", help="also build locally and compare key and samples")


def _child(root: str, cache: str, where: str, metadata: str) -> dict:
    from benchmarks.children import child_json  # noqa: PLC0415

    got = child_json(["-c", _CHILD, root, cache, where, metadata])
    if "error" in got:
        raise RuntimeError(f"{where} build of {root}: {got['error']}")
    return got


def _row(got: dict) -> dict:
    return {"wall_s": round(got["wall_s"], 3), "client_cpu_s": round(got["cpu_s"], 3),
            "client_peak_rss_mb": round(got["peak_rss_mb"], 1),
            "client_peak_above_start_mb": round(got["peak_rss_mb"] - got["rss_before_mb"], 1),
            "cache": got["cache"], "libmagic_calls": got["libmagic_calls"], "parts": got["parts"]}


def _size(root: str, address: str, metadata: str, check: bool, work: str) -> dict[str, Any]:
    cache = os.path.join(work, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    cold, warm = _child(root, cache, address, metadata), _child(root, cache, address, metadata)
    out: dict[str, Any] = {"files": cold["files"], "samples": cold["samples"], "cold": _row(cold), "warm": _row(warm)}
    if check:
        local = _child(root, os.path.join(work, "local"), "local", metadata)
        shutil.rmtree(os.path.join(work, "local"), ignore_errors=True)
        if (local["key"], local["samples"]) != (cold["key"], cold["samples"]) or warm["key"] != cold["key"]:
            raise RuntimeError(f"the cluster build of {root} differs from the local one")
        out["local"] = _row(local)
    shutil.rmtree(cache, ignore_errors=True)
    return out


def run(args: argparse.Namespace) -> dict:
    """Per size and header mode: the cold and the warm cluster build's wall, client CPU and client peak memory."""
    import distributed  # noqa: PLC0415

    out: dict[str, Any] = {"workers": args.workers, "threads_per_worker": 1, "load_avg": os.getloadavg()[0]}
    cluster = distributed.LocalCluster(host="127.0.0.1", n_workers=args.workers, threads_per_worker=1,
                                       processes=True, dashboard_address="127.0.0.1:0",
                                       worker_dashboard_address=None)
    try:
        with tempfile.TemporaryDirectory() as work:
            for n in [int(s) for s in args.sizes.split(",") if s]:
                root = os.path.join(args.root or work, str(n))
                if not os.path.isdir(root):
                    _corpus(root, n, 20, "nested")
                for metadata in [m for m in args.metadata.split(",") if m]:
                    out[f"{n} files, metadata={metadata}"] = _size(root, cluster.scheduler_address, metadata,
                                                                   args.check, work)
    finally:
        cluster.close()
    out["load_avg_end"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    import json

    p = argparse.ArgumentParser()
    add_arguments(p)
    print(json.dumps(run(p.parse_args()), indent=1))
