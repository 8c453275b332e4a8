"""Training-loader benchmark (issue 8): what ``make_loader`` delivers to a training loop, next to the bare fetch.

Workload: the generated ``small`` corpus of ``benchmarks.corpora.make_corpus`` (default 10,000 files of 256 B .. 4 KB in
three classes), ``n_bytes=2``, ``concat`` style, ``seqlen=8192``, batches of 20 samples, query
``["input_array"]``; read from the raw files and from a Megatron ``.bin/.idx`` pack of them
(``ds.pack(prefix)`` then ``Consumer.from_packed(prefix, style="concat", seqlen=8192)``).

Reported per source, all in this one run:
- ``fetch``: ``to_tensors(ds.fetch_numpy(ids, query, epoch=0))`` on the loader's own batches, called
  directly: the work the loader wraps (median and mean ms per batch);
- ``get_next_batch``: ``create_batches(20)`` + ``get_next_batch(query)`` (median and mean);
- the loader with ``num_workers`` 0, 1 and 2: wall time of ``--batches`` consecutive batches after the
  first (so worker start-up is left out), i.e. the mean per batch; at ``num_workers=0`` also the
  median ms per batch and its overhead over the median ``fetch`` (target <= 10%), next to torch's own
  single-process ``DataLoader`` iterator over the same sampler and dataset.
Rates are samples/s and tokens/s (``20 x 8192`` tensor elements per batch).
Each measurement is repeated ``--rounds`` times, interleaved, and the best round is kept (the machine
is shared: the best round is the least disturbed one).

Run: ``python -m benchmarks probe loader [--files 10000] [--batches 200] [--rounds 3] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from consumer import Consumer, make_loader
from consumer.fetch.collate import to_tensors

from ..corpora import make_corpus

NAME = "loader"
DESCRIPTION = "what the training loader delivers next to the bare fetch (0, 1, 2 workers)"

B, L = 20, 8192
QUERY = ["input_array"]


def per_batch_ms(step, items, n: int) -> tuple[float, float]:
    """Median and mean ms of ``step(next(items))`` over ``n`` calls (after 5 warm-up calls)."""
    for _ in range(5):
        step(next(items))
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step(next(items))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3, float(np.mean(times)) * 1e3


def bench_source(ds: Consumer, n: int, rounds: int) -> dict:
    """fetch / get_next_batch / loader(0, 1, 2 workers) figures of one dataset."""
    epoch_size = (n + 10) * B  # one epoch holds every measured batch
    ids = make_loader(ds, B, query=QUERY, epoch_size=epoch_size).plan.batches(0)
    best: dict[str, float] = {}

    def keep(name: str, value: float | tuple[float, float]) -> None:
        if isinstance(value, tuple):
            keep(name, value[0])
            keep(name.replace("_ms", "_mean_ms"), value[1])
            return
        best[name] = min(best.get(name, float("inf")), value)

    for _ in range(rounds):
        keep("fetch_ms", per_batch_ms(lambda b: to_tensors(ds.fetch_numpy(b, QUERY, epoch=0)), iter(ids), n))
        ds.create_batches(B, seed=1)
        keep("gnb_ms", per_batch_ms(lambda _: ds.get_next_batch(QUERY), iter(ids), n))
        loader = make_loader(ds, B, query=QUERY, epoch_size=epoch_size, num_workers=0)
        keep("loader0_ms", per_batch_ms(lambda _: None, iter(loader), n))
        loader = make_loader(ds, B, query=QUERY, epoch_size=epoch_size, num_workers=0)
        keep("torch0_ms", per_batch_ms(lambda _: None, iter(loader.torch_loader), n))  # torch's own iterator
        for w in (0, 1, 2):
            loader = make_loader(ds, B, query=QUERY, epoch_size=epoch_size, num_workers=w,
                                 **({"multiprocessing_context": "fork", "prefetch_factor": 4} if w else {}))
            batches = iter(loader)
            next(batches)  # worker start-up excluded
            t0 = time.perf_counter()
            for _ in range(n):
                next(batches)
            keep(f"wall{w}_s", time.perf_counter() - t0)
            del batches  # ends the workers
    return best


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", default=None, help="keep the generated corpus in this directory")


def run(args: argparse.Namespace) -> dict:
    """Per source (raw files, packed store): the figures of the module docstring."""
    with tempfile.TemporaryDirectory() as tmp:
        root = make_corpus(args.keep or os.path.join(tmp, "data"), "small", args.files).root
        raw = Consumer(root, n_bytes=2, style="concat", seqlen=L, seed=4)
        raw.pack(os.path.join(tmp, "corpus"))
        packed = Consumer.from_packed(os.path.join(tmp, "corpus"), style="concat", seqlen=L, seed=4)
        out: dict = {"batch": B, "seqlen": L, "query": QUERY, "batches": args.batches, "rounds": args.rounds}
        for name, ds in (("raw files", raw), ("packed (megatron .bin/.idx)", packed)):
            r = bench_source(ds, args.batches, args.rounds)
            r["loader0_overhead_over_fetch"] = r["loader0_ms"] / r["fetch_ms"] - 1
            out[name] = r
        return out
