"""Packing many short documents against the copy floor, measured in one run.

The corpus is ``--docs`` one-line documents (``documents="lines"``, ``n_bytes=1``; a lines corpus has no
headers), or with ``--files N`` a folder of N files of ``--file-bytes`` bytes each in two class folders (whole files,
``metadata=None``). The floor is one numpy pass over the bytes a store's ``.bin`` must hold: read the file (each
file), widen its bytes to the store's ``uint16``, write them and fsync (what any packer must at least do).
``consumer pack`` then writes the whole Megatron store (``.bin``, ``.idx``, file table, chunk sums, sidecar) from a
dataset built beforehand; both run in fresh child processes whose peak RSS is reported (VmHWM). The ratio pack /
floor is the figure to watch.

    python -m benchmarks probe pack_floor --docs 10000000 [--dir DIR]
    python -m benchmarks probe pack_floor --files 10000 --file-bytes 100000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

from ..children import STATUS, child_json
from .open_packed import _lines

NAME = "pack_floor"
DESCRIPTION = "pack many short documents (documents='lines') against one numpy read-widen-write-fsync pass"

FLOOR = STATUS + """
import json, os, sys, time
import numpy as np
src = sys.argv[1]
files = [src] if os.path.isfile(src) else sorted(os.path.join(d, n) for d, _, ns in os.walk(src) for n in ns)
t0 = time.perf_counter()
written = 0
with open(sys.argv[2], "wb") as f:
    for path in files:
        wide = np.fromfile(path, dtype=np.uint8).astype(np.uint16)
        f.write(wide.data)
        written += wide.nbytes
    f.flush()
    os.fsync(f.fileno())
seconds = time.perf_counter() - t0
peak = status("VmHWM")
print(json.dumps({"seconds": seconds, "peak_rss": peak, "bytes": written}))
"""

PACK = STATUS + """
import json, sys, time
from consumer import Consumer
kind = dict(documents="lines") if sys.argv[5] == "lines" else dict(metadata=None)
ds = Consumer(sys.argv[1], n_bytes=1, seqlen=2048, cache_dir=sys.argv[3], **kind)
t0 = time.perf_counter()
ds.pack(sys.argv[2], format=sys.argv[4])
seconds = time.perf_counter() - t0
peak = status("VmHWM")
print(json.dumps({"seconds": seconds, "peak_rss": peak}))
"""


def _child(code: str, *args: str) -> dict:
    return child_json(["-c", code, *args], check=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--docs", type=int, default=100_000, help="one-line documents to pack")
    parser.add_argument("--files", type=int, default=0, help="pack a folder of this many files instead of lines")
    parser.add_argument("--file-bytes", type=int, default=100_000, help="bytes of each file (with --files)")
    parser.add_argument("--format", default="megatron", choices=["megatron", "modalities"])
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")


def _folder(root: str, n: int, size: int) -> None:
    """``n`` files of ``size`` seeded bytes in two class folders."""
    rng = np.random.default_rng(0)
    for i in range(n):
        folder = os.path.join(root, f"c{i % 2}")
        os.makedirs(folder, exist_ok=True)
        rng.integers(0, 256, size, dtype=np.uint8).tofile(os.path.join(folder, f"f{i:06d}.bin"))


def run(args: argparse.Namespace) -> dict:
    """The floor and the pack, each in a fresh child, on the same corpus with the page cache warm."""
    kind = "files" if args.files else "lines"
    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        src = os.path.join(work, "lines.txt" if kind == "lines" else "corpus")
        if kind == "lines":
            _lines(src, args.docs)
        else:
            _folder(src, args.files, args.file_bytes)
        cache = os.path.join(work, "cache")
        _child(PACK, src, os.path.join(work, "warm"), cache, args.format, kind)  # builds and caches the dataset
        floor = _child(FLOOR, src, os.path.join(work, "floor.bin"))
        pack = _child(PACK, src, os.path.join(work, "store"), cache, args.format, kind)
        source = os.path.getsize(src) if kind == "lines" else args.files * args.file_bytes
        out = {"kind": kind, "documents": args.docs if kind == "lines" else args.files, "format": args.format,
               "source_bytes": source, "floor": floor, "pack": pack, "ratio": pack["seconds"] / floor["seconds"]}
    print(f"{kind}: floor {floor['seconds']:.2f} s, pack {pack['seconds']:.2f} s = {out['ratio']:.1f}x the floor, "
          f"peak RSS {pack['peak_rss'] / 2**20:.0f} MiB", file=sys.stderr)
    return out
