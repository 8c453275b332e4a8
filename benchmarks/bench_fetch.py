"""Fetch and build benchmark of the core engine (issue: core engine).

Workload (gperc.md §4): a generated corpus of N small files (default 10,000), one third each of
text ``.py``, random ``.bin`` and ``.json`` files of 256 B .. 4 KB, one class per type. Batches of
20 x 8192 tokens at n_bytes=2, diff and concat, query None, served by create_batches/get_next_batch.

Reported, all measured in this one run:
- build time of ``Consumer`` (with libmagic and with ``metadata=None``) and the stat+read floor;
- ms per batch of ``consumer``, of a naive per-file numpy reader producing the *same* rows (checked
  equal), and of ``memcpy`` (``np.copyto``) of the int64 output, plus the ratios;
- gperc 0.7's figures on this machine come from ``shared/reference/gperc.md`` (it cannot be imported on
  Python 3.11 with its declared pins); they are quoted, not re-measured.

Run: ``python benchmarks/bench_fetch.py [--files 10000] [--batches 100]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from consumer import Consumer  # noqa: E402
from consumer.vocab import encode_bytes  # noqa: E402

GPERC_MS = {"diff": 120.0, "concat": 640.0}  # per batch of 20 x 8192, n_bytes=2, this machine (gperc.md §4)
B, L = 20, 8192


def make_corpus(root: str, n_files: int, seed: int = 0) -> None:
    """n_files files in three class folders (py / bin / json), sizes uniform in [256, 4096]."""
    rng = np.random.default_rng(seed)
    words = np.array(list(b"abcdefghijklmnopqrstuvwxyz_ (),:=\n"), dtype=np.uint8)
    for cls in ("py", "bin", "json"):
        os.makedirs(os.path.join(root, cls), exist_ok=True)
    for i in range(n_files):
        cls = ("py", "bin", "json")[i % 3]
        n = int(rng.integers(256, 4097))
        if cls == "bin":
            data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        elif cls == "py":
            data = b"def f():\n" + words[rng.integers(0, words.size, n - 9)].tobytes()
        else:
            body = words[rng.integers(0, 26, n - 12)].tobytes()
            data = b'{"text": "' + body + b'"}'
        with open(os.path.join(root, cls, f"{i:07d}.{cls}"), "wb") as f:
            f.write(data)


@contextlib.contextmanager
def generated_corpus(n_files: int, keep: str | None = None):
    """A corpus directory of ``n_files`` (``keep``: reuse or create that directory, else a temporary one)."""
    root = keep or tempfile.mkdtemp(prefix="consumer-bench-")
    try:
        if not os.path.isdir(os.path.join(root, "py")):
            make_corpus(root, n_files)
        yield root
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def naive_rows(ds: Consumer, ids: np.ndarray) -> np.ndarray:
    """The same rows as ``ds.fetch``, the naive way: per segment, read the whole file with
    np.fromfile, build its whole document (allocations and copies per file), slice, place."""
    v = ds.vocab
    out = np.full((ids.size, ds.seqlen), v.pad, dtype=np.int64)
    idx, docs = ds.index, ds.documents
    for r, s in enumerate(ids):
        for g in range(idx.seg_ptr[s], idx.seg_ptr[s + 1]):
            d = idx.seg_doc[g]
            data = np.fromfile(docs.paths[d], dtype=np.uint8)
            header = docs.header_tok[docs.header_ptr[docs.doc_header[d]]:docs.header_ptr[docs.doc_header[d] + 1]]
            doc = np.concatenate([header, [v.sep], encode_bytes(data, v), [v.eof]])
            a, n, c = idx.seg_start[g], idx.seg_len[g], idx.seg_col[g]
            out[r, c:c + n] = doc[a:a + n]
    return out


def time_per_call(fn, reps: int) -> float:
    """Median seconds per call over ``reps`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def memcpy_ms() -> float:
    """ms to copy one int64 batch (B x L) with np.copyto: the bandwidth floor for producing it."""
    src = np.random.default_rng(0).integers(0, 65536, (B, L), dtype=np.int64)
    dst = np.empty_like(src)
    return time_per_call(lambda: np.copyto(dst, src), 2000) * 1e3


def bench_build(root: str) -> dict:
    t0 = time.perf_counter()
    ds = Consumer(root, n_bytes=2, seqlen=L)
    with_magic = time.perf_counter() - t0
    t0 = time.perf_counter()
    Consumer(root, n_bytes=2, seqlen=L, metadata=None)
    without = time.perf_counter() - t0
    t0 = time.perf_counter()
    for p in ds.files:
        with open(p, "rb") as f:
            f.read()
    floor = time.perf_counter() - t0
    return {"files": len(ds.files), "build_s_libmagic": with_magic, "build_s_no_header": without,
            "stat_read_all_s": floor}


def bench_style(root: str, style: str, batches: int) -> dict:
    ds = Consumer(root, style=style, n_bytes=2, seqlen=L)
    ds.create_batches(B, seed=0)
    ds.get_next_batch()  # imports torch outside the timing
    epoch = ds.batches(1)
    ids_list = [epoch[i % len(epoch)] for i in range(batches)]
    for ids in ids_list[:5]:
        assert (naive_rows(ds, ids) == ds.fetch_numpy(ids)["input_array"]).all(), "naive reader disagrees"
    t0 = time.perf_counter()
    for _ in range(batches):
        ds.get_next_batch()
    ours = (time.perf_counter() - t0) / batches * 1e3
    t0 = time.perf_counter()
    for ids in ids_list:
        naive_rows(ds, ids)
    naive = (time.perf_counter() - t0) / batches * 1e3
    segs = float(np.mean([np.diff(ds.index.seg_ptr)[ids].sum() for ids in ids_list]))
    return {"style": style, "samples": len(ds), "segments_per_batch": segs, "ms_per_batch": ours,
            "naive_ms_per_batch": naive}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--batches", type=int, default=100)
    p.add_argument("--keep", help="corpus directory to reuse (created if missing)")
    args = p.parse_args()
    with generated_corpus(args.files, args.keep) as root:
        build = bench_build(root)
        mc = memcpy_ms()
        rows = [bench_style(root, s, args.batches) for s in ("diff", "concat")]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"build": build, "memcpy_ms": mc, "fetch": rows, "peak_rss_mb": peak_mb}, indent=1))
    print()
    print(f"build of {build['files']} files: {build['build_s_libmagic']:.2f} s with libmagic, "
          f"{build['build_s_no_header']:.2f} s without headers (stat+read of every file: {build['stat_read_all_s']:.2f} s)")
    print(f"memcpy of one {B}x{L} int64 batch: {mc:.3f} ms")
    print("| style | segments/batch | consumer ms/batch | naive ms/batch | naive / consumer | "
          "memcpy / consumer | gperc 0.7 ms (gperc.md) | gperc / consumer |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['style']} | {r['segments_per_batch']:.0f} | {r['ms_per_batch']:.2f} | {r['naive_ms_per_batch']:.2f} "
              f"| {r['naive_ms_per_batch'] / r['ms_per_batch']:.2f}x | {mc / r['ms_per_batch']:.3f} "
              f"| {GPERC_MS[r['style']]:.0f} | {GPERC_MS[r['style']] / r['ms_per_batch']:.0f}x |")
    print(f"peak RSS: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
