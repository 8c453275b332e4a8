"""Worker transport: batches/s that ``ds.dataloader(..., num_workers=w)`` delivers, against torch's own transport.

One packed diff store of the small-files corpus (``benchmarks.corpora``, 10,000 files), batches of 20 x 8192
int64 (1.3 MB). Measured with 1 and 2 workers, interleaved, ``--reps`` times (medians reported), ``--batches``
batches after the first of each loader (start-up excluded), through the harness's own loader factories
(:mod:`benchmarks.systems`):

- torch's transport ceiling: a dataset whose every batch is one memcpy, through torch's ``DataLoader``;
- ``ds.dataloader`` with the shared-memory ring (the default);
- the same with every batch copied out into fresh tensors in the loop (what a ring that handed out copies
  would cost);
- ``ds.dataloader(..., transport="torch")``: our batches through torch's workers.

Run: ``python -m benchmarks probe transport [--batches 300] [--reps 5] [--data DIR]``
"""

from __future__ import annotations

import argparse
import os
import statistics

from consumer import Consumer

from ..corpora import make_corpus
from ..measure import time_loader
from ..peers import ROOT
from ..systems import consumer_loader, transport_loader

NAME = "transport"
DESCRIPTION = "worker transport: ds.dataloader batches/s against torch's own transport"

B, L = 20, 8192


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--data", default=os.path.join(ROOT, "benchmarks", ".data"))


def run(args: argparse.Namespace) -> dict:
    """Build (or reuse) the store, then time every loader with 1 and 2 workers (interleaved)."""
    corpus = make_corpus(args.data, "small", 10_000, 0)
    store = os.path.join(args.data, "transport-store")
    if not os.path.exists(store + ".idx"):
        Consumer(corpus.root, style="diff", n_bytes=2, seqlen=L, metadata=None).pack(store)
    ds = Consumer.from_packed(store, style="diff", seqlen=L)
    systems = {"torch DataLoader transport (memcpy dataset)": transport_loader(len(ds), L),
               "ds.dataloader (ring)": consumer_loader(ds),
               "ds.dataloader (ring), each batch copied out": consumer_loader(ds, copy=True),
               "ds.dataloader(transport='torch')": consumer_loader(ds, transport="torch")}
    runs: dict[tuple[str, int], list[float]] = {(k, w): [] for k in systems for w in (1, 2)}
    for rep in range(args.reps):
        for w in (1, 2):
            for k, make in systems.items():
                assert make is not None
                runs[(k, w)].append(time_loader(lambda m=make, w=w, r=rep: m(B, w, r), args.batches)["batches_per_s"])
    out: dict = {"batch": B, "seqlen": L, "batches": args.batches, "reps": args.reps, "rows": []}
    for w in (1, 2):
        ceiling = statistics.median(runs[("torch DataLoader transport (memcpy dataset)", w)])
        for k in systems:
            m = statistics.median(runs[(k, w)])
            out["rows"].append({"system": k, "workers": w, "batches_per_s": m, "x_torch_transport": m / ceiling,
                                "per_rep": runs[(k, w)]})
    return out
