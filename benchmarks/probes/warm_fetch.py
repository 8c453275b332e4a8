"""Probe: the warm random fetch of a packed store, this checkout against a baseline checkout, in one run.

The store (``--prefix``; by default the 16 KiB-sums twin that ``cold_fetch`` packs) is in the page cache. For each
round, a fresh process per code version (``--baseline``: the root of another checkout of ``consumer``, e.g. made
with ``git archive``; and this one) opens it, fetches every batch once (its chunks verified, its pages mapped),
then times each ``ds.fetch_numpy`` call of the same batches three times more, per batch size of ``--sizes``
(the median call). A store of 1 MiB sums can
be given to the baseline (``--baseline-prefix``: what its stores were). Result: microseconds per call (best
round) per version and batch size, and after / before. Run: ``python -m benchmarks.probes.warm_fetch --baseline DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

NAME = "warm_fetch"
DESCRIPTION = "warm random fetch (batch 1, 4, 20, 256), this checkout against a baseline checkout, in one run"
_WORK = os.path.join(tempfile.gettempdir(), "consumer-cold-fetch")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--baseline", default=None,
                        help="root of the baseline checkout (default: none, this checkout alone)")
    parser.add_argument("--prefix", default=os.path.join(_WORK, "sums16k"))
    parser.add_argument("--baseline-prefix", default=None, help="the store the baseline reads (default: --prefix)")
    parser.add_argument("--seqlen", type=int, default=8192)
    parser.add_argument("--sizes", default="1,4,20,256")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=4000, help="rows fetched per batch size per timing")


def _child(spec: dict) -> dict:
    import warnings

    warnings.simplefilter("ignore")
    from consumer import Consumer

    ds = Consumer.from_packed(spec["prefix"], style="concat", seqlen=spec["seqlen"])
    rng = np.random.default_rng(7)
    out = {}
    for b in spec["sizes"]:
        batches = [rng.choice(len(ds), b, replace=False) for _ in range(max(spec["rows"] // b, 8))]
        for ids in batches:  # warm: chunks verified, pages mapped
            ds.fetch_numpy(ids)
        times = []  # per call: on a busy machine, the median call is the one no other process interrupted
        for _ in range(3):
            for ids in batches:
                t = time.perf_counter()
                ds.fetch_numpy(ids)
                times.append(time.perf_counter() - t)
        out[str(b)] = 1e6 * float(np.median(times))
    return out


def run(args: argparse.Namespace) -> dict:
    """Alternate the two versions round by round; best round per version and batch size."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sizes = [int(s) for s in str(args.sizes).split(",") if s]
    versions = {"after": (here, args.prefix)}
    if args.baseline:
        versions = {"before": (os.path.abspath(args.baseline), args.baseline_prefix or args.prefix), **versions}
    best: dict[str, dict[str, float]] = {v: {} for v in versions}
    for _ in range(args.rounds):
        for name, (root, prefix) in versions.items():
            spec = {"prefix": prefix, "seqlen": args.seqlen, "sizes": sizes, "rows": args.rows}
            env = dict(os.environ, PYTHONPATH=root)
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)], env=env,
                                  capture_output=True, text=True, check=False, cwd=root)
            if done.returncode:
                raise RuntimeError(f"{name}: child failed:\n{done.stderr[-3000:]}")
            got = json.loads(done.stdout.strip().splitlines()[-1])
            for b, us in got.items():
                best[name][b] = min(best[name].get(b, float("inf")), us)
    return {"seqlen": args.seqlen, "rounds": args.rounds, "us_per_call": best,
            "after_over_before": {b: best["after"][b] / best["before"][b] for b in best["after"]}
            if "before" in best else None}


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(_child(json.loads(sys.argv[2]))))
        sys.exit(0)
    _parser = argparse.ArgumentParser(prog=f"python -m benchmarks.probes.{NAME}", description=DESCRIPTION)
    add_arguments(_parser)
    print(json.dumps(run(_parser.parse_args()), indent=1))
