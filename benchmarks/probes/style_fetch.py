"""Fetching ``packed`` rows against ``concat`` rows: the same corpus, the same store, the same batches.

Workload: the generated ``small`` corpus (``--files`` files of 256 B .. 4 KB, three classes), ``n_bytes=2``,
``seqlen=8192``; five datasets: a Megatron store of it written by a concat dataset (``ds.pack``, read through into
the page cache) opened with ``Consumer.from_packed(prefix, style=S, seqlen=8192)``, and the raw files
(``Consumer(root, style=S, ...)``), for ``S`` in concat and packed; and ``own store packed``: the store the packed
dataset's own ``pack`` writes (its documents in the order of its rows, each row one range of the store) opened with
``style="packed"``. Every row of every dataset is fetched once before timing. ``--reps`` repetitions of
``--batch`` random rows (the same ids for every dataset: drawn below the smallest row count), the datasets'
order rotated per repetition, plain query ``ds.fetch_numpy(ids, None)``; then the same back to back (each dataset
over all the batches in a run of its own).

Reported per dataset: median and best µs per batch, document pieces per batch; per source the packed ÷ concat time
(the median of the per-repetition ratios, paired on the same ids; target <= 1.10): ``store`` (both styles over the
concat dataset's store), ``own_store`` (each style over the store its own dataset's ``pack`` writes: packed's own
store against the concat store) and ``files``.

Run: ``python -m benchmarks probe style_fetch [--files 10000] [--reps 100] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile

import numpy as np

from ..measure import median
from ._styles import back_to_back, interleaved, read_through, summary, warm_rows, warm_store

NAME = "style_fetch"
DESCRIPTION = "packed rows against concat rows: warm stores and the raw files, plain query, 20 x 8192 tokens"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--files", type=int, default=10_000, help="files of the small corpus")
    parser.add_argument("--batch", type=int, default=20, help="rows per batch")
    parser.add_argument("--seqlen", type=int, default=8192, help="tokens per row")
    parser.add_argument("--reps", type=int, default=100, help="repetitions (random batches)")
    parser.add_argument("--keep", default=None, help="keep the corpus and the store in this directory")
    parser.add_argument("--seed", type=int, default=0, help="seed of the batches")


def run(args: argparse.Namespace) -> dict:
    """Per source (store, files) and style the plain fetch's µs per batch; packed ÷ concat per source."""
    from consumer import Consumer

    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        info, prefix = warm_store(work, "small", args.files, seqlen=args.seqlen)
        own = f"{prefix}_packed_s{args.seqlen}"  # the packed dataset's own store (written in the order of its rows)
        if not os.path.exists(own + ".idx"):
            Consumer(info.root, style="packed", n_bytes=2, seqlen=args.seqlen,
                     cache_dir=os.path.join(work, "cache")).pack(own)
        read_through(glob.glob(own + "*"))
        sets = {}
        for style in ("concat", "packed"):
            sets[f"store {style}"] = Consumer.from_packed(prefix, style=style, seqlen=args.seqlen)
            sets[f"files {style}"] = Consumer(info.root, style=style, n_bytes=2, seqlen=args.seqlen,
                                              cache_dir=os.path.join(work, "cache"))
        sets["own store packed"] = Consumer.from_packed(own, style="packed", seqlen=args.seqlen)
        for ds in sets.values():
            warm_rows(ds, args.batch)
        n = min(len(ds) for ds in sets.values())
        rng = np.random.default_rng(args.seed)
        batches = [rng.choice(n, min(args.batch, n), replace=False).astype(np.int64) for _ in range(args.reps + 3)]
        cases = {name: (lambda ids, ds=ds: ds.fetch_numpy(ids, None)) for name, ds in sets.items()}
        out: dict = {"files": info.n_files, "corpus_bytes": info.total_bytes, "batch": args.batch,
                     "seqlen": args.seqlen, "reps": args.reps,
                     "rows": {name: len(ds) for name, ds in sets.items()},
                     "pieces_per_batch": {name: int(ds.fetch_numpy(batches[0], ["cu_seqlens"])["cu_seqlens"].size - 1)
                                          for name, ds in sets.items()}}
        for order, timer in (("interleaved", interleaved), ("back_to_back", back_to_back)):
            times = timer(cases, batches)
            res = out[order] = {"timings": summary(times, "store concat")}
            for source, concat, packed in (("store", "store concat", "store packed"),
                                           ("own_store", "store concat", "own store packed"),
                                           ("files", "files concat", "files packed")):
                c = np.asarray(times[concat]["seconds"])
                p = np.asarray(times[packed]["seconds"])
                res[f"{source}_packed_over_concat"] = median(p / c)
                res[f"{source}_packed_over_concat_best"] = float(p.min() / c.min())
            for name, r in res["timings"].items():
                print(f"{order:12s} {name:14s} {r['median_us']:8.0f} µs (best {r['best_us']:6.0f}), "
                      f"{out['pieces_per_batch'][name]} pieces/batch", file=sys.stderr)
            print(f"{order:12s} packed / concat: store x{res['store_packed_over_concat']:.2f}, own store "
                  f"x{res['own_store_packed_over_concat']:.2f}, files x{res['files_packed_over_concat']:.2f}",
                  file=sys.stderr)
        return out
