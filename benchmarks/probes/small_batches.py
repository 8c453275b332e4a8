"""Probe: one row through the public API (``ds[i]``, ``ds.fetch([i])``, ``ds.fetch(array)``) against megatron-core.

A warm packed store (concat rows of ``--seqlen`` tokens, int32) is read one row per call, in one process, the
readers interleaved round by round on the same random ids: ``ds[i]``, ``ds.fetch([i])`` with a list,
``ds.fetch(np.array([i]))``, ``ds.fetch_numpy``, and megatron-core's ``IndexedDataset.get`` of the same tokens
copied into a preallocated int64 row (its reader hands out a view of its memory map; a trainer needs int64), and
``np.array([i])`` alone (the array calls make their argument inside the timed call). The result is microseconds per
call (the median call of the best round) and each reader's ratio to megatron's.
Run: ``python -m benchmarks.probes.small_batches``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

NAME = "small_batches"
DESCRIPTION = "one row per call through ds[i] / ds.fetch(list) / ds.fetch(array), against megatron-core's get"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "consumer-small-batches"))
    parser.add_argument("--seqlen", type=int, default=512)
    parser.add_argument("--calls", type=int, default=20000, help="calls per reader per round")
    parser.add_argument("--rounds", type=int, default=5)


def _store(work: Path, seqlen: int) -> Path:
    from consumer import Consumer

    prefix = work / "store"
    if not Path(f"{prefix}.consumer.json").exists():
        corpus = work / "corpus" / "c"
        shutil.rmtree(work / "corpus", ignore_errors=True)
        corpus.mkdir(parents=True)
        rng = np.random.default_rng(0)
        for i in range(256):  # 256 files of 64 KiB: 32k tokens each (n_bytes=2)
            (corpus / f"f{i:04d}.bin").write_bytes(rng.integers(0, 256, 1 << 16, dtype=np.uint8).tobytes())
        Consumer(str(work / "corpus"), style="concat", n_bytes=2, seqlen=seqlen, metadata=None,
                 cache_dir=False).pack(str(prefix))
        shutil.rmtree(work / "corpus")
    return prefix


def _per_call(fn, ids: list) -> float:
    """The median call's seconds (on a busy machine, the median call is one no other process interrupted)."""
    times = []
    clock = time.perf_counter
    for i in ids:
        t = clock()
        fn(i)
        times.append(clock() - t)
    return float(np.median(times))


def run(args: argparse.Namespace) -> dict:
    """Readers interleaved per round on the same ids; best round per reader; ratios to megatron's get."""
    import torch  # noqa: F401  (loaded before timing)

    from consumer import Consumer
    from consumer.fetch.reader import packed_runs

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    prefix = _store(work, args.seqlen)
    ds = Consumer.from_packed(str(prefix), style="concat", seqlen=args.seqlen)
    L = args.seqlen
    start = packed_runs(ds.index, ds.documents)
    doc_ptr = ds.documents.source.tokens.doc_ptr
    readers: dict[str, Any] = {
        "ds[i]": lambda i: ds[i],
        "ds.fetch([i]) list": lambda i: ds.fetch([i]),
        "ds.fetch(array) numpy": lambda i: ds.fetch(np.array([i])),
        "ds.fetch_numpy(array)": lambda i: ds.fetch_numpy(np.array([i])),
        "np.array([i]) alone": lambda i: np.array([i]),  # what the two array calls spend making their argument
    }
    try:
        from megatron.core.datasets.indexed_dataset import IndexedDataset

        meg = IndexedDataset(str(prefix), mmap=True)
        row = np.empty(L, dtype=np.int64)
        # the rows that lie inside one document (megatron's get reads within a document): its doc and offset
        sorted_ptr, order = np.sort(doc_ptr), np.argsort(doc_ptr)  # documents in store order (megatron's ids)
        store_doc = np.searchsorted(sorted_ptr, start, side="right") - 1
        where = {i: (int(d), int(start[i] - sorted_ptr[d])) for i, d in enumerate(store_doc.tolist())}

        def megatron(i: int) -> np.ndarray:
            d, off = where[i]
            row[:] = meg.get(d, off, L)
            return row

        readers["megatron get -> int64 row"] = megatron
        inside = np.flatnonzero(start + L <= sorted_ptr[store_doc] + ds.documents.doc_len[order][store_doc])
    except ImportError:
        inside = np.arange(len(ds))
    rng = np.random.default_rng(3)
    best: dict[str, float] = {k: float("inf") for k in readers}
    for _ in range(args.rounds):
        ids = [int(i) for i in rng.choice(inside, args.calls)]
        for name, fn in readers.items():
            _per_call(fn, ids[:200])
            best[name] = min(best[name], _per_call(fn, ids))
    if "megatron get -> int64 row" in readers:  # the same tokens
        i = int(inside[0])
        if not np.array_equal(readers["megatron get -> int64 row"](i), ds.fetch_numpy(np.array([i]))["input_array"][0]):
            raise RuntimeError(f"megatron's get and ds.fetch disagree on sample {i}")
    base = best.get("megatron get -> int64 row")
    return {"seqlen": L, "calls": args.calls, "rounds": args.rounds,
            "us_per_call": {k: 1e6 * v for k, v in best.items()},
            "x_megatron": {k: v / base for k, v in best.items()} if base else {}}


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog=f"python -m benchmarks.probes.{NAME}", description=DESCRIPTION)
    add_arguments(_parser)
    print(json.dumps(run(_parser.parse_args()), indent=1))
