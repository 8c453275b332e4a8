"""What the causal objective and the document columns cost over the plain query, on a warm packed store.

Workload: the generated ``small`` corpus (``--files`` files of 256 B .. 4 KB, three classes), ``n_bytes=2``, written
once with ``ds.pack(prefix)`` and read through (page cache), opened with ``Consumer.from_packed(prefix,
style=S, seqlen=8192)`` for ``S`` in concat and packed; every row fetched once before timing (chunk sums checked,
pages touched). Per style, ``--reps`` repetitions of ``--batch`` random rows (without replacement; the same ids for
every query of a repetition, the queries' order rotated each repetition), each query timed once per repetition
through ``ds.fetch_numpy(ids, q)`` and ``ds.fetch(ids, q)`` (torch):

- ``plain``: ``None``; ``causal``: ``"causal"``;
- ``causal+doc``: ``["causal", "document_ids", "position_ids", "cu_seqlens", "max_seqlen", "loss_mask"]``;
- ``doc``: ``["input_array", "document_ids", "cu_seqlens"]``.

The same calls are also timed back to back (each query over all the batches in a run of its own, as a training
loop calls one query step after step), and each query alone in a fresh child process (``--fresh-reps`` calls,
numpy), once with glibc's default malloc settings and once with ``MALLOC_TRIM_THRESHOLD_`` and
``MALLOC_MMAP_THRESHOLD_`` at 256 MiB (freed memory kept by the process): the allocator's state differs between
these orders, and the minor page faults per call show when a query's arrays come fresh from the kernel each time.

Reported: median and best µs per batch, minor page faults per call (fresh memory the allocator took from the
kernel), and the ratio to the plain query of the same API (the median of the per-repetition ratios, paired on the
same ids; target: causal and the document columns add <= 15 %, i.e. ratio <= 1.15). Next to them the copy floor:
``np.copyto`` of one ``[batch, 8192]`` int64 batch (``labels`` is a second array of that size).

Then ``cu_seqlens`` of a large batch (target <= 50 µs): a ``band`` corpus of ``--cu-files`` files of
``--cu-band`` bytes (many documents per row), its own store, ``style="packed"``, ``seqlen=--cu-seqlen``, batches
of ``--cu-batch`` random rows: ``["input_array", "cu_seqlens"]`` minus the plain query (median of the paired
differences), and the layout alone: ``batch_layout(ds.index, ids, ds.seqlen).cu_seqlens()`` (and its two halves).

Run: ``python -m benchmarks probe objective_costs [--files 10000] [--reps 60] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from ..measure import median, memcpy_seconds
from ._styles import back_to_back, interleaved, summary, warm_rows, warm_store

NAME = "objective_costs"
DESCRIPTION = "causal labels and document columns (cu_seqlens ...) against the plain query, packed store, 2 styles"

QUERIES: dict[str, object] = {
    "plain": None,
    "causal": "causal",
    "causal+doc": ["causal", "document_ids", "position_ids", "cu_seqlens", "max_seqlen", "loss_mask"],
    "doc": ["input_array", "document_ids", "cu_seqlens"],
}


# one query back to back in a process of its own (a trainer's process asks one query every step): the allocator's
# state is then the query's own, not the one other queries left
CHILD = """
import json, resource, sys, time
import numpy as np
from consumer import Consumer
prefix, style, seqlen, query, batch, reps, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), \\
    json.loads(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
ds = Consumer.from_packed(prefix, style=style, seqlen=seqlen)
for i in range(0, len(ds), batch):  # every row once, in batches of the timed size (as a trainer's first epoch)
    ds.fetch_numpy(np.arange(i, min(i + batch, len(ds)), dtype=np.int64), None)
rng = np.random.default_rng(seed)
seconds, faults = [], []
for r in range(reps + 3):
    ids = rng.choice(len(ds), batch, replace=False).astype(np.int64)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    ds.fetch_numpy(ids, query)
    t1 = time.perf_counter()
    if r >= 3:
        seconds.append(t1 - t0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
print(json.dumps({"median_us": float(np.median(seconds)) * 1e6, "best_us": min(seconds) * 1e6,
                  "faults_per_call": float(np.median(faults))}))
"""
# glibc keeps freed memory instead of handing it back to the kernel (no trim, no mmap below 256 MiB)
KEEP_MEMORY = {"MALLOC_TRIM_THRESHOLD_": str(256 << 20), "MALLOC_MMAP_THRESHOLD_": str(256 << 20)}


def _fresh(prefix: str, style: str, query: object, args: argparse.Namespace, env: dict | None) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, prefix, style, str(args.seqlen), json.dumps(query),
                           str(args.batch), str(args.fresh_reps), str(args.seed)], capture_output=True, text=True,
                          check=True, env={**os.environ, **(env or {})})
    out: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def _fresh_costs(prefix: str, style: str, args: argparse.Namespace) -> dict:
    """Each query in a fresh child, back to back, with glibc's default settings and with ``KEEP_MEMORY``."""
    out: dict = {}
    for label, env in (("default_malloc", None), ("keep_memory_malloc", KEEP_MEMORY)):
        res = {name: _fresh(prefix, style, q, args, env) for name, q in QUERIES.items()}
        for name, r in res.items():
            r["ratio_of_medians"] = r["median_us"] / res["plain"]["median_us"]
            print(f"{style:6s} fresh {label:18s} {name:10s} {r['median_us']:8.0f} µs (best {r['best_us']:6.0f}) "
                  f"x{r['ratio_of_medians']:.2f} plain, faults/call {r['faults_per_call']:.0f}", file=sys.stderr)
        out[label] = res
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--files", type=int, default=10_000, help="files of the small corpus")
    parser.add_argument("--batch", type=int, default=20, help="rows per batch")
    parser.add_argument("--seqlen", type=int, default=8192, help="tokens per row")
    parser.add_argument("--reps", type=int, default=60, help="repetitions (random batches) per style")
    parser.add_argument("--fresh-reps", type=int, default=100, help="calls per fresh child (0: no children)")
    parser.add_argument("--styles", default="concat,packed", help="comma-separated styles")
    parser.add_argument("--cu-files", type=int, default=20_000, help="files of the cu_seqlens corpus")
    parser.add_argument("--cu-band", default="150,250", help="sizes of its files in bytes: lo,hi")
    parser.add_argument("--cu-batch", type=int, default=256, help="rows per cu_seqlens batch")
    parser.add_argument("--cu-seqlen", type=int, default=2048, help="tokens per cu_seqlens row")
    parser.add_argument("--cu-reps", type=int, default=200, help="cu_seqlens repetitions")
    parser.add_argument("--keep", default=None, help="keep corpora and stores in this directory (reused next time)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the batches")


def _batches(n: int, batch: int, reps: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.choice(n, min(batch, n), replace=False).astype(np.int64) for _ in range(reps + 3)]


def _style_costs(prefix: str, style: str, args: argparse.Namespace) -> dict:
    from consumer import Consumer

    ds = Consumer.from_packed(prefix, style=style, seqlen=args.seqlen)
    warm_rows(ds, args.batch)
    ds.fetch(np.arange(2, dtype=np.int64), None)  # torch imported outside the timing
    cases = {}
    for name, q in QUERIES.items():
        cases[f"numpy {name}"] = lambda ids, q=q: ds.fetch_numpy(ids, q)
        cases[f"torch {name}"] = lambda ids, q=q: ds.fetch(ids, q)
    batches = _batches(len(ds), args.batch, args.reps, args.seed)
    out: dict = {"rows": len(ds)}
    for order, timer in (("interleaved", interleaved), ("back_to_back", back_to_back)):
        times = timer(cases, batches)
        for api in ("numpy", "torch"):
            sub = {k.split(" ", 1)[1]: v for k, v in times.items() if k.startswith(api)}
            out.setdefault(order, {})[api] = res = summary(sub, "plain")
            for name, r in res.items():
                print(f"{style:6s} {order:12s} {api:5s} {name:10s} {r['median_us']:8.0f} µs (best {r['best_us']:6.0f}) "
                      f"x{r['ratio']:.2f} plain, faults/call {r['faults_per_call']:.0f}", file=sys.stderr)
    ids = _batches(len(ds), args.batch, 1, args.seed)[0]
    out["pieces_per_batch"] = int(ds.fetch_numpy(ids, ["input_array", "cu_seqlens"])["cu_seqlens"].size - 1)
    return out


def _cu_seqlens(work: str, args: argparse.Namespace) -> dict:
    from consumer import Consumer
    from consumer.fetch.layout import batch_layout

    lo, hi = (int(x) for x in str(args.cu_band).split(","))
    info, prefix = warm_store(work, "band", args.cu_files, seqlen=args.cu_seqlen, band=(lo, hi))
    ds = Consumer.from_packed(prefix, style="packed", seqlen=args.cu_seqlen)
    warm_rows(ds, 256)
    index, L = ds.index, ds.seqlen
    layouts: dict[int, object] = {}

    def layout_only(ids: np.ndarray) -> None:
        layouts[0] = batch_layout(index, ids, L)

    cases = {
        "plain": lambda ids: ds.fetch_numpy(ids, None),
        "input_array+cu_seqlens": lambda ids: ds.fetch_numpy(ids, ["input_array", "cu_seqlens"]),
        "layout+cu_seqlens": lambda ids: batch_layout(index, ids, L).cu_seqlens(),
        "layout only": layout_only,
        "cu_seqlens of a made layout": lambda ids: layouts[0].cu_seqlens(),
    }
    batches = _batches(len(ds), args.cu_batch, args.cu_reps, args.seed + 1)
    ids = batches[0]
    pieces = int(batch_layout(index, ids, L).length.size)
    out: dict = {"files": info.n_files, "band": [lo, hi], "rows": len(ds), "batch": args.cu_batch, "seqlen": L,
                 "pieces_per_batch": pieces}
    for order, timer in (("interleaved", interleaved), ("back_to_back", back_to_back)):
        times = timer(cases, batches)
        s = summary(times, "plain")
        diff = np.asarray(times["input_array+cu_seqlens"]["seconds"]) - np.asarray(times["plain"]["seconds"])
        q, p, lay = s["input_array+cu_seqlens"], s["plain"], s["layout+cu_seqlens"]
        out[order] = {"timings": s, "query_minus_plain_us": median(diff) * 1e6,
                      "query_minus_plain_of_medians_us": q["median_us"] - p["median_us"],
                      "query_minus_plain_of_bests_us": q["best_us"] - p["best_us"]}
        print(f"cu_seqlens {order}: {args.cu_batch} x {L}, {pieces} pieces: plain {p['median_us']:.0f} µs, "
              f"query - plain {out[order]['query_minus_plain_us']:.0f} µs (paired median), "
              f"layout+cu_seqlens {lay['median_us']:.0f} µs (best {lay['best_us']:.0f})", file=sys.stderr)
    return out


def run(args: argparse.Namespace) -> dict:
    """Per style and API the four queries' µs per batch and ratio to plain; then the cost of cu_seqlens."""
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        info, prefix = warm_store(work, "small", args.files, seqlen=args.seqlen)
        out: dict = {"files": info.n_files, "corpus_bytes": info.total_bytes, "batch": args.batch,
                     "seqlen": args.seqlen, "reps": args.reps, "queries": QUERIES,
                     "copy_floor_us": memcpy_seconds((args.batch, args.seqlen)) * 1e6, "styles": {}}
        for style in str(args.styles).split(","):
            out["styles"][style] = _style_costs(prefix, style, args)
            if args.fresh_reps:
                out["styles"][style]["fresh_process"] = _fresh_costs(prefix, style, args)
        out["cu_seqlens"] = _cu_seqlens(work, args)
        return out
