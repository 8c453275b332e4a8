"""The listing of a local folder by a cluster build against the local scan, in one run.

``files`` small files (64 B) in ``classes`` class folders (two levels deep). Timed: the local
:func:`~consumer.sources.listing.scan_directory`, and the same scan with each class folder walked on a Dask
``LocalCluster`` (127.0.0.1, worker processes, one thread each) of 1 and 2 workers, best of ``reps``,
interleaved. Reported per configuration: wall seconds, the client's CPU seconds (what the client itself does:
list the root, merge the parts) and the ratio to the local scan. Every cluster listing is checked equal to the
local one first. On a machine with fewer cores than workers + client the walls cannot show scaling.

    python -m benchmarks.probes.cluster_listing --files 100000
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import numpy as np

NAME = "cluster_listing"
DESCRIPTION = "listing a local folder on 1-2 Dask workers against the local scan"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--files``, ``--classes``, ``--reps``."""
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--classes", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)


def _corpus(root: str, files: int, classes: int) -> None:
    for i in range(files):
        d = os.path.join(root, f"c{i % classes:03d}", f"d{(i // classes) % 50:02d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:08d}.txt"), "wb") as f:
            f.write(b"x" * 64)


def _timed(fn: Any) -> tuple[float, float, Any]:
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def run(args: argparse.Namespace) -> dict:
    """Best wall and client CPU seconds of the local scan and of 1 and 2 workers."""
    import distributed  # noqa: PLC0415

    from consumer.scale.engines import DaskEngine  # noqa: PLC0415
    from consumer.scale.scan import walker_on  # noqa: PLC0415
    from consumer.sources.listing import scan_directory  # noqa: PLC0415

    out: dict[str, Any] = {"files": args.files, "classes": args.classes}
    with tempfile.TemporaryDirectory() as tmp:
        _corpus(tmp, args.files, args.classes)
        best: dict[str, list[float]] = {}
        ref = scan_directory(tmp)
        for workers in (1, 2):
            cluster = distributed.LocalCluster(host="127.0.0.1", n_workers=workers, threads_per_worker=1,
                                               processes=True, dashboard_address=None)
            client = distributed.Client(cluster)
            walker = walker_on(DaskEngine(client))
            got = scan_directory(tmp, "raise", walker)  # warm-up and the equality check
            if list(got.paths) != list(ref.paths) or not np.array_equal(got.ident, ref.ident):
                raise RuntimeError("the cluster listing differs from the local scan")
            for _ in range(args.reps):
                for name, fn in (("local", lambda: scan_directory(tmp)),
                                 (f"{workers} workers", lambda w=walker: scan_directory(tmp, "raise", w))):
                    wall, cpu, _ = _timed(fn)
                    b = best.setdefault(name, [float("inf"), float("inf")])
                    best[name] = [min(b[0], wall), min(b[1], cpu)]
            client.close()
            cluster.close()
    local = best["local"][0]
    out["results"] = {k: {"wall_s": round(w, 3), "client_cpu_s": round(c, 3), "vs_local": round(w / local, 2)}
                      for k, (w, c) in best.items()}
    return out


if __name__ == "__main__":
    import json

    p = argparse.ArgumentParser()
    add_arguments(p)
    print(json.dumps(run(p.parse_args()), indent=1))
