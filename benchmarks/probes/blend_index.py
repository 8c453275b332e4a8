"""Megatron-core's blending indices: ``consumer.formats.megatron_blending`` (numpy) against megatron-core's compiled
``helpers.build_blending_indices`` (C++), same weights, same sizes.

``--parts`` weights are drawn once (seeded, uniform in [0, 1), or ``--weights``) and normalised as ``BlendedDataset``
normalises them. For each size, each implementation runs in a fresh child process, which reports the wall time of
building the two arrays (``dataset_index`` int16 and ``dataset_sample_index`` int64: for megatron-core, the two
``numpy.zeros`` and the helper call, as ``BlendedDataset`` does; for ours, ``build_blending_indices``), best of
``--repeat``, its peak RSS (VmHWM) and its RSS after imports, and a blake2b digest of both arrays (computed after the
clock stops): equal digests mean bit-identical arrays. Megatron-core's helper is loaded from its ``.so`` file, so
neither child imports torch; without megatron-core installed its side reports why.

    python -m benchmarks probe blend_index --sizes 10000000,100000000 --parts 10
"""

from __future__ import annotations

import argparse
import json
import sys

from ..children import STATUS, child_json

NAME = "blend_index"
DESCRIPTION = "build megatron-core's blending indices (10^7 and 10^8 samples, 10 parts): numpy vs its C++ helper"

CHILD = STATUS + """
import glob, hashlib, importlib.machinery, importlib.util, json, os, sys, time
import numpy as np
which, size, repeat, weights = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
if which == "consumer":
    from consumer.formats.megatron_blending import build_blending_indices
    build = lambda: build_blending_indices(weights, size, normalize=False)
else:
    spec = importlib.util.find_spec("megatron")
    paths = [p for root in ((spec.submodule_search_locations or []) if spec else [])
             for p in sorted(glob.glob(os.path.join(root, "core", "datasets", "helpers_cpp*.so")))]
    if not paths:
        print(json.dumps({"available": False, "reason": "megatron-core's compiled helpers_cpp is not installed"}))
        sys.exit(0)
    loader = importlib.machinery.ExtensionFileLoader("helpers_cpp", paths[0])
    helpers = importlib.util.module_from_spec(importlib.util.spec_from_file_location("helpers_cpp", paths[0],
                                                                                     loader=loader))
    loader.exec_module(helpers)
    def build():
        index, sample = np.zeros(size, dtype=np.int16), np.zeros(size, dtype=np.int64)
        helpers.build_blending_indices(index, sample, weights, len(weights), size, False)
        return index, sample
base = status("VmRSS")
seconds = []
for _ in range(repeat):
    out = None
    t0 = time.perf_counter()
    out = build()
    seconds.append(time.perf_counter() - t0)
digest = hashlib.blake2b(digest_size=16)
digest.update(out[0]); digest.update(out[1])
print(json.dumps({"available": True, "seconds": min(seconds), "all_seconds": seconds, "peak_rss": status("VmHWM"),
                  "rss_after_imports": base, "digest": digest.hexdigest()}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--sizes", default="10000000,100000000", help="comma-separated numbers of samples")
    parser.add_argument("--parts", type=int, default=10, help="number of blended parts (random weights)")
    parser.add_argument("--weights", default="", help="comma-separated weights instead of random ones")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--repeat", type=int, default=1, help="builds per child (the fastest counts)")


def _weights(args: argparse.Namespace) -> list[float]:
    import numpy as np

    raw = [float(v) for v in args.weights.split(",")] if args.weights else \
        np.random.default_rng(args.seed).random(args.parts).tolist()
    w = np.array(raw, dtype=np.float64)
    return (w / np.sum(w)).tolist()  # megatron.core.datasets.utils.normalize, as BlendedDataset applies it


def _child(which: str, size: int, repeat: int, weights: list[float]) -> dict:
    out = child_json(["-c", CHILD, which, str(size), str(repeat), json.dumps(weights)])
    return {"available": False, "reason": out["error"]} if "error" in out else out


def run(args: argparse.Namespace) -> dict:
    """Each size built by megatron-core's helper and by ours, each in a fresh child: seconds, ratio, peak RSS."""
    weights = _weights(args)
    out: dict = {"parts": len(weights), "weights": weights, "repeat": args.repeat, "sizes": []}
    for size in (int(s) for s in str(args.sizes).split(",")):
        row: dict = {"size": size}
        for which in ("megatron", "consumer"):
            row[which] = r = _child(which, size, args.repeat, weights)
            if r.get("available"):
                print(f"{size:,} samples, {which}: {r['seconds']:.2f} s, peak RSS {r['peak_rss'] / 2**20:.0f} MiB",
                      file=sys.stderr)
            else:
                print(f"{size:,} samples, {which}: not run ({r['reason']})", file=sys.stderr)
        if row["megatron"].get("available") and row["consumer"].get("available"):
            row["time_ratio"] = row["consumer"]["seconds"] / row["megatron"]["seconds"]
            row["identical"] = row["consumer"]["digest"] == row["megatron"]["digest"]
            print(f"{size:,} samples: consumer / megatron = {row['time_ratio']:.2f}, identical: {row['identical']}",
                  file=sys.stderr)
        out["sizes"].append(row)
    return out
