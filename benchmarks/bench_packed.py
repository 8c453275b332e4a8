"""Packed-store benchmark (issue 4): fetch speed from ``.bin/.idx`` and ``.pbin`` stores, and pack throughput.

Workload: the generated corpus of ``bench_fetch.make_corpus`` (default 10,000 files of 256 B .. 4 KB in
three classes), ``n_bytes=2``, ``concat`` style, ``seqlen=8192``; random batches of 20 sample ids
(uniform, with a fixed seed), query None (``input_array``).

Reported, all measured in this one run:
- pack wall time (best of two) and throughput (source bytes / wall time) for both formats, and the
  time of ``Consumer.from_packed`` (open and validate the store, build the index);
- ms per batch of ``ds.fetch_numpy(ids)`` and of the torch path ``ds.fetch(ids)`` from each store and
  from the raw files (same ids, rows checked equal);
- ``memcpy`` (``np.copyto``) of one int64 ``20 x 8192`` batch (hot source, as in ``bench_fetch``) and
  the ratio memcpy / fetch (target >= 0.5); plus two floors that include reading the store: the same
  number of tokens copied, one slice per row, from random offsets of the store (cold: DRAM-bound)
  and from one fixed offset (hot: cache-resident).

Run: ``python benchmarks/bench_packed.py [--files 10000] [--batches 200] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench_fetch import generated_corpus, memcpy_ms  # noqa: E402

from consumer import Consumer  # noqa: E402

B, L = 20, 8192


def median_ms(fn, batches: list[np.ndarray]) -> float:
    """Median ms per call of ``fn(ids)`` over the batches (after one warm-up pass over a few)."""
    for ids in batches[:5]:
        fn(ids)
    times = []
    for ids in batches:
        t0 = time.perf_counter()
        fn(ids)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def store_floor_ms(tokens: np.ndarray, batches: list[np.ndarray], cold: bool) -> float:
    """ms to copy B x L tokens of the store into a preallocated int64 batch, one slice per row, from
    random offsets (cold) or always the same rows (hot): the floor of any reader of this store."""
    dst = np.empty((B, L), dtype=np.int64)
    span = tokens.size - L
    rng = np.random.default_rng(1)
    fixed = rng.integers(0, span, B).tolist()

    def copy(ids):
        offsets = rng.integers(0, span, B).tolist() if cold else fixed
        for r, s in enumerate(offsets):
            np.copyto(dst[r], tokens[s:s + L])

    return median_ms(copy, batches)


def bench(root: str, n_batches: int) -> dict:
    t0 = time.perf_counter()
    raw = Consumer(root, style="concat", n_bytes=2, seqlen=L)
    build_s = time.perf_counter() - t0
    source_bytes = int(raw.documents.doc_size.sum())
    work = tempfile.mkdtemp(prefix="consumer-packed-")
    out: dict = {"files": len(raw.files), "source_bytes": source_bytes, "build_s": build_s, "pack": {}, "fetch": []}
    try:
        stores = {}
        for fmt in ("megatron", "modalities"):
            prefix = os.path.join(work, fmt)
            walls = []
            for _ in range(2):  # best of two: the first pack of a run may also pay for cold caches
                t0 = time.perf_counter()
                summary = raw.pack(prefix, format=fmt)
                walls.append(time.perf_counter() - t0)
            wall = min(walls)
            out["pack"][fmt] = {"seconds": wall, "mb_s": source_bytes / wall / 1e6, "store_bytes": summary["bytes"],
                                "dtype": summary["dtype"]}
            t0 = time.perf_counter()
            stores[fmt] = Consumer.from_packed(prefix, style="concat", seqlen=L)
            out["pack"][fmt]["open_s"] = time.perf_counter() - t0
        rng = np.random.default_rng(0)
        batches = [rng.integers(0, len(raw), B) for _ in range(n_batches)]
        for ids in batches[:10]:
            expected = raw.fetch_numpy(ids)["input_array"]
            for ds in stores.values():
                assert (ds.fetch_numpy(ids)["input_array"] == expected).all(), "packed != raw"
        raw.fetch(batches[0])  # import torch outside the timings
        out["segments_per_batch"] = float(np.mean([np.diff(raw.index.seg_ptr)[ids].sum() for ids in batches]))
        out["memcpy_ms"] = memcpy_ms()
        tokens = stores["megatron"].documents.packed.tokens
        out["floor_cold_ms"] = store_floor_ms(tokens, batches, cold=True)
        out["floor_hot_ms"] = store_floor_ms(tokens, batches, cold=False)
        sources = [("raw files", raw), ("megatron .bin/.idx", stores["megatron"]),
                   ("modalities .pbin", stores["modalities"])]
        for name, ds in sources:
            out["fetch"].append({"source": name, "numpy_ms": median_ms(ds.fetch_numpy, batches),
                                 "torch_ms": median_ms(ds.fetch, batches)})
        out["memcpy_ms_after"] = memcpy_ms()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--keep", help="corpus directory to reuse (created if missing)")
    args = p.parse_args()
    with generated_corpus(args.files, args.keep) as root:
        r = bench(root, args.batches)
    mc = r["memcpy_ms"]
    print(f"corpus: {r['files']} files, {r['source_bytes'] / 1e6:.1f} MB; Consumer build {r['build_s']:.2f} s; "
          f"{r['segments_per_batch']:.0f} segments per {B} x {L} batch")
    print(f"memcpy of one {B}x{L} int64 batch (hot source): {mc:.3f} ms (again at the end: "
          f"{r['memcpy_ms_after']:.3f} ms)")
    print(f"floor: {B} row slices of the int32 store into a preallocated int64 batch: "
          f"{r['floor_cold_ms']:.3f} ms from random offsets (cold), {r['floor_hot_ms']:.3f} ms from fixed ones (hot); "
          f"memcpy / cold floor = {mc / r['floor_cold_ms']:.2f}\n")
    print("| pack format | store dtype | store MB | wall s | MB/s (source bytes) | open s |")
    print("|---|---|---|---|---|---|")
    for fmt, v in r["pack"].items():
        print(f"| {fmt} | {v['dtype']} | {v['store_bytes'] / 1e6:.1f} | {v['seconds']:.2f} | {v['mb_s']:.0f} "
              f"| {v['open_s']:.3f} |")
    print()
    print("| source | fetch_numpy ms/batch | memcpy / fetch_numpy | fetch (torch) ms/batch | memcpy / fetch "
          "| cold floor / fetch_numpy |")
    print("|---|---|---|---|---|---|")
    for v in r["fetch"]:
        print(f"| {v['source']} | {v['numpy_ms']:.3f} | {mc / v['numpy_ms']:.2f} | {v['torch_ms']:.3f} "
              f"| {mc / v['torch_ms']:.2f} | {r['floor_cold_ms'] / v['numpy_ms']:.2f} |")


if __name__ == "__main__":
    main()
