"""Packing many short documents against the copy floor, measured in one run.

The corpus is ``--docs`` one-line documents (``documents="lines"``, ``n_bytes=1``; a lines corpus has no
headers). The floor is one numpy pass over the bytes a store's ``.bin`` must hold: read the file, widen its bytes
to the store's ``uint16``, write them and fsync (what any packer must at least do). ``consumer pack`` then writes
the whole Megatron store (``.bin``, ``.idx``, file table, chunk sums, sidecar) from a dataset built beforehand; both
run in fresh child processes whose peak RSS is reported (VmHWM). The ratio pack / floor is the figure to watch.

    python -m benchmarks probe pack_floor --docs 10000000 [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from .open_packed import _lines

NAME = "pack_floor"
DESCRIPTION = "pack many short documents (documents='lines') against one numpy read-widen-write-fsync pass"

FLOOR = """
import json, os, sys, time
import numpy as np
t0 = time.perf_counter()
data = np.fromfile(sys.argv[1], dtype=np.uint8)
wide = data.astype(np.uint16)
with open(sys.argv[2], "wb") as f:
    f.write(wide.data)
    f.flush()
    os.fsync(f.fileno())
seconds = time.perf_counter() - t0
peak = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "peak_rss": peak, "bytes": int(wide.nbytes)}))
"""

PACK = """
import json, sys, time
from consumer import Consumer
ds = Consumer(sys.argv[1], documents="lines", n_bytes=1, seqlen=2048, cache_dir=sys.argv[3])
t0 = time.perf_counter()
ds.pack(sys.argv[2], format=sys.argv[4])
seconds = time.perf_counter() - t0
peak = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "peak_rss": peak}))
"""


def _child(code: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--docs", type=int, default=100_000, help="one-line documents to pack")
    parser.add_argument("--format", default="megatron", choices=["megatron", "modalities"])
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")


def run(args: argparse.Namespace) -> dict:
    """The floor and the pack, each in a fresh child, on the same corpus with the page cache warm."""
    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        src = os.path.join(work, "lines.txt")
        _lines(src, args.docs)
        cache = os.path.join(work, "cache")
        _child(PACK, src, os.path.join(work, "warm"), cache, args.format)  # builds and caches the dataset
        floor = _child(FLOOR, src, os.path.join(work, "floor.bin"))
        pack = _child(PACK, src, os.path.join(work, "store"), cache, args.format)
        out = {"documents": args.docs, "format": args.format, "source_bytes": os.path.getsize(src),
               "floor": floor, "pack": pack, "ratio": pack["seconds"] / floor["seconds"]}
    print(f"floor {floor['seconds']:.2f} s, pack {pack['seconds']:.2f} s = {out['ratio']:.1f}x the floor, "
          f"peak RSS {pack['peak_rss'] / 2**20:.0f} MiB", file=sys.stderr)
    return out
