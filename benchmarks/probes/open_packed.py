"""Opening a packed store of many short documents: open time, memory beyond the imports, first row.

A file of ``--docs`` one-line documents (20-80 bytes each) is built as ``documents="lines"`` (``n_bytes=1``) and
packed as a Megatron store; then each setting is opened in fresh child processes, with the page cache warm:
the first open with an empty index cache (the sample index is built and cached), then ``--repeat`` reopens
(the index mapped from the cache). Each child reports the open's wall time, VmRSS after the open minus VmRSS after
``import consumer, torch`` ("beyond imports"), and the time of the first ``ds[k]`` (``k`` in the middle).

    python -m benchmarks probe open_packed --docs 10000000 [--repeat 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

from ..children import STATUS, child_json

NAME = "open_packed"
DESCRIPTION = "open a packed store of many short documents: wall time, RSS beyond imports, first row"

CHILD = STATUS + """
import json, sys, time
rss = lambda: status("VmRSS")
import consumer, torch
base = rss()
t0 = time.perf_counter()
ds = consumer.Consumer.from_packed(sys.argv[1], style=sys.argv[2], seqlen=int(sys.argv[3]), cache_dir=sys.argv[4])
t1 = time.perf_counter()
ds[len(ds) // 2]
t2 = time.perf_counter()
print(json.dumps({"open_s": t1 - t0, "first_row_s": t2 - t1, "rss_beyond_imports": rss() - base,
                  "samples": len(ds), "index": ds.build_info.get("index")}))
"""


def _lines(path: str, n: int, seed: int = 0) -> None:
    """``n`` one-line documents of 20-80 bytes (``doc <i> `` and letters), written a block at a time."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for lo in range(0, n, 1 << 17):
            m = min(1 << 17, n - lo)
            widths = rng.integers(10, 70, m)
            f.write("".join(f"doc {lo + j} " + "x" * int(w) + "\n" for j, w in enumerate(widths.tolist())))


def _child(prefix: str, style: str, seqlen: int, cache: str) -> dict:
    return child_json(["-c", CHILD, prefix, style, str(seqlen), cache], check=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--docs", type=int, default=100_000, help="one-line documents in the store")
    parser.add_argument("--repeat", type=int, default=3, help="reopens per setting (best and all reported)")
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")


def run(args: argparse.Namespace) -> dict:
    """Build and pack the corpus once, then open it per setting: the first open and the reopens."""
    from consumer import Consumer

    out: dict = {"documents": args.docs, "settings": {}}
    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        src, prefix = os.path.join(work, "lines.txt"), os.path.join(work, "store")
        _lines(src, args.docs)
        t0 = time.perf_counter()
        Consumer(src, documents="lines", n_bytes=1, seqlen=2048, cache_dir=False).pack(prefix)
        out["pack_s"] = time.perf_counter() - t0
        out["store_bytes"] = sum(os.path.getsize(os.path.join(work, n)) for n in os.listdir(work)
                                 if n.startswith("store."))
        for style, seqlen in (("concat", 2048), ("diff", 128)):
            cache = os.path.join(work, f"cache_{style}")
            first = _child(prefix, style, seqlen, cache)
            again = [_child(prefix, style, seqlen, cache) for _ in range(args.repeat)]
            best = min(again, key=lambda r: r["open_s"])
            out["settings"][f"{style}/{seqlen}"] = {"first_open": first, "reopen_best": best, "reopens": again}
            print(f"{style}: first open {first['open_s']:.3f} s, reopen {best['open_s']:.3f} s, "
                  f"{best['rss_beyond_imports'] / 2**20:.0f} MiB beyond imports, first row "
                  f"{best['first_row_s'] * 1e3:.1f} ms", file=sys.stderr)
    return out
