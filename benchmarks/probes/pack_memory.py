"""Peak memory of packing one huge document: a sparse file of a few GiB packed in a child process.

The file is made with ``truncate`` (sparse: it costs no disk, reads as zeros); the child builds a
dataset over it (``n_bytes=1``, no header, in-memory cache) and packs it; the parent reports the
child's peak resident set (``getrusage(RUSAGE_CHILDREN).ru_maxrss``), the document's size as int64
tokens, the wall time and the store size. An address-space limit (``--limit-gib``) keeps a pack that
would hold the whole document in memory from taking the machine down: it then fails with
``MemoryError`` and the row says so.

    python -m benchmarks probe pack_memory --gib 3 [--format megatron] [--limit-gib 8]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

NAME = "pack_memory"
DESCRIPTION = "peak memory of packing one huge (sparse) document in a child process"

CHILD = """
import resource, sys
limit = int(sys.argv[4])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from consumer import Consumer
ds = Consumer({'big': [sys.argv[1]]}, n_bytes=1, metadata=None, seqlen=4096, cache_dir=False)
ds.pack(sys.argv[2], format=sys.argv[3])
"""


def pack_once(size: int, fmt: str, limit: int, workdir: str) -> dict:
    """Pack a sparse file of ``size`` bytes in a child limited to ``limit`` bytes of address space."""
    src = os.path.join(workdir, "big.bin")
    with open(src, "wb") as f:
        f.truncate(size)
    prefix = os.path.join(workdir, "store")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, src, prefix, fmt, str(limit)], capture_output=True,
                          text=True)
    seconds = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = {"size": size, "format": fmt, "seconds": seconds, "returncode": proc.returncode,
           "peak_rss": peak_kib * 1024 if peak_kib > before else None,
           "error": proc.stderr.strip().splitlines()[-1] if proc.returncode else "",
           "store_bytes": sum(os.path.getsize(os.path.join(workdir, n)) for n in os.listdir(workdir)
                              if n.startswith("store.") and not n.endswith(".tmp"))}
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--gib", type=float, default=3.0, help="size of the sparse source file in GiB")
    parser.add_argument("--format", default="megatron", choices=["megatron", "modalities"])
    parser.add_argument("--limit-gib", type=float, default=8.0, help="address-space limit of the child (0: none)")
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")


def run(args: argparse.Namespace) -> dict:
    """Check the disk, run one pack: its peak RSS, wall time and outcome."""
    size = int(args.gib * (1 << 30))
    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        need = size * 2  # uint16 tokens for n_bytes=1
        free = shutil.disk_usage(work).free
        if free < need + (1 << 30):
            raise SystemExit(f"not enough free disk in {work}: the store needs {need} bytes, {free} free")
        r = pack_once(size, args.format, int(args.limit_gib * (1 << 30)), work)
    r["int64_token_bytes"] = size * 8
    return r
