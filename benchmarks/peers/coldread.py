"""One reader of a packed store, run in a fresh process for the cold-store probe (``benchmarks/probes/cold_store.py``).

``python -m benchmarks.peers.coldread READER STORE PLAN IDS [LANCE_DIR [PASSES]]`` opens the store with one
reader, fetches every batch of ``IDS`` (an ``.npy`` of ``[n_batches, batch]`` row ids of the plan) as an int64
``[batch, seqlen]`` array or tensor, and prints one JSON line: the open time, the seconds of each batch,
the bytes read from the device during the fetches (``/proc/self/io``), the bytes served (the rows' token
bytes in the store), and the digest of the first batch's rows. With ``PASSES`` 2 the same batches are
fetched again (pages now cached: the warm fetch), their seconds in ``warm_seconds``. Readers:

- ``consumer``: ``Consumer.from_packed(STORE, style="concat", seqlen=...)`` + ``fetch(ids)``;
- ``megatron``: megatron-core's ``IndexedDataset`` (memory-mapped), ``get(doc, offset, length)`` per piece;
- ``lance``: ``lance.dataset(LANCE_DIR).take(ids)`` of a ``fixed_size_list<int32>`` column, converted to an
  int64 torch tensor (the conversion is timed too);
- ``pread``: ``os.pread`` of exactly each row's byte range of ``STORE.bin``: the floor.

``python -m benchmarks.peers.coldread write-lance STORE PLAN LANCE_DIR`` writes the Lance dataset of the plan's
rows (padded to ``seqlen``). Only numpy plus the reader's own library are imported (peer venvs).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np

from ..measure import io_read_bytes
from .storeio import Plan, load_plan, pad_rows, read_store

Fetch = Callable[[np.ndarray], object]


def _consumer(store: str, plan: Plan, lance_dir: str) -> Fetch:
    from consumer import Consumer

    ds = Consumer.from_packed(store, style="concat", seqlen=plan.seqlen)
    return lambda ids: ds.fetch(ids)["input_array"]


def _megatron(store: str, plan: Plan, lance_dir: str) -> Fetch:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    ix = IndexedDataset(store)
    doc_ptr = np.zeros(len(ix) + 1, dtype=np.int64)
    np.cumsum(ix.sequence_lengths, out=doc_ptr[1:])

    def row(i: int) -> np.ndarray:
        start, end = int(plan.start[i]), int(plan.start[i] + plan.length[i])
        d = int(np.searchsorted(doc_ptr, start, side="right")) - 1
        parts = []
        while start < end:
            n = min(end, int(doc_ptr[d + 1])) - start
            parts.append(ix.get(d, offset=start - int(doc_ptr[d]), length=n))
            start, d = start + n, d + 1
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    return lambda ids: pad_rows([row(int(i)) for i in ids], plan.seqlen, plan.pad)


def _lance(store: str, plan: Plan, lance_dir: str) -> Fetch:
    import lance
    import torch

    ds = lance.dataset(lance_dir)

    def fetch(ids: np.ndarray) -> object:
        col = ds.take(ids.tolist(), columns=["tokens"]).column("tokens").combine_chunks()
        flat = col.values.to_numpy(zero_copy_only=False)
        return torch.from_numpy(flat.reshape(len(ids), plan.seqlen).astype(np.int64))

    return fetch


def _pread(store: str, plan: Plan, lance_dir: str) -> Fetch:
    tokens, _ = read_store(store)
    item = tokens.dtype.itemsize
    dtype = tokens.dtype
    del tokens
    fd = os.open(store + ".bin", os.O_RDONLY)
    out = np.empty((0, plan.seqlen), dtype=np.int64)

    def fetch(ids: np.ndarray) -> np.ndarray:
        nonlocal out
        if out.shape[0] != len(ids):
            out = np.empty((len(ids), plan.seqlen), dtype=np.int64)
        out.fill(plan.pad)
        for r, i in enumerate(ids.tolist()):
            n = int(plan.length[i])
            buf = os.pread(fd, n * item, int(plan.start[i]) * item)
            out[r, :n] = np.frombuffer(buf, dtype=dtype)
        return out

    return fetch


READERS: dict[str, Callable[[str, Plan, str], Fetch]] = {"consumer": _consumer, "megatron": _megatron,
                                                         "lance": _lance, "pread": _pread}


def measure(reader: str, store: str, plan_path: str, ids_path: str, lance_dir: str = "", passes: str = "1") -> dict:
    """Open ``store`` with ``reader`` and fetch every batch of ``ids_path`` (see the module docstring)."""
    plan = load_plan(plan_path)
    batches = np.load(ids_path)
    item = read_store(store)[0].dtype.itemsize
    t0 = time.perf_counter()
    fetch = READERS[reader](store, plan, lance_dir)
    open_s = time.perf_counter() - t0
    first = None
    seconds = []
    before = io_read_bytes()
    for ids in batches:
        t = time.perf_counter()
        out = fetch(ids)
        seconds.append(time.perf_counter() - t)
        if first is None:
            first = np.array(out.numpy() if hasattr(out, "numpy") else out, dtype=np.int64, copy=True)
    read = io_read_bytes() - before
    served = int(sum(int(plan.length[ids].sum()) for ids in batches)) * item
    digest = hashlib.sha256(np.ascontiguousarray(first).tobytes()).hexdigest() if first is not None else ""
    warm = []
    for _ in range(int(passes) - 1):
        for ids in batches:
            t = time.perf_counter()
            fetch(ids)
            warm.append(time.perf_counter() - t)
    return {"open_s": open_s, "seconds": seconds, "read_bytes": read, "served_bytes": served, "digest": digest,
            "shape": list(first.shape) if first is not None else None, "warm_seconds": warm}


def _lance_batches(store: str, plan: Plan, rows_per_batch: int = 1024) -> Iterator[object]:
    import pyarrow as pa

    tokens, _ = read_store(store)
    for lo in range(0, len(plan), rows_per_batch):
        hi = min(lo + rows_per_batch, len(plan))
        block = np.full((hi - lo, plan.seqlen), plan.pad, dtype=np.int32)
        for r in range(lo, hi):
            row = plan.row(tokens, r)
            block[r - lo, :row.size] = row
        values = pa.array(block.reshape(-1), type=pa.int32())
        yield pa.RecordBatch.from_arrays([pa.FixedSizeListArray.from_arrays(values, plan.seqlen)], ["tokens"])


def write_lance(store: str, plan_path: str, lance_dir: str) -> dict:
    """Write the plan's rows (``fixed_size_list<int32>``, padded to ``seqlen``) as a Lance dataset."""
    import lance
    import pyarrow as pa

    plan = load_plan(plan_path)
    schema = pa.schema([("tokens", pa.list_(pa.int32(), plan.seqlen))])
    t0 = time.perf_counter()
    reader = pa.RecordBatchReader.from_batches(schema, _lance_batches(store, plan))
    lance.write_dataset(reader, lance_dir, schema=schema, mode="overwrite")
    return {"seconds": time.perf_counter() - t0, "rows": len(plan), "version": lance.__version__}


def main(argv: list[str]) -> int:
    """Run one command (see the module docstring) and print its JSON line; an ImportError becomes ``error``."""
    try:
        if argv[0] == "write-lance":
            out = write_lance(*argv[1:4])
        else:
            out = measure(*argv[:6])
    except ImportError as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
