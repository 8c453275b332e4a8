"""Hugging Face ``datasets``: the samples as a token column (``list<int32>``) of a memory-mapped Arrow dataset.

Convert: the plan's rows (unpadded) become one Arrow ``ListArray`` built from offsets (no per-row Python
objects: the fastest way into ``datasets``), saved with ``save_to_disk`` and reopened with
``load_from_disk`` (memory-mapped), all timed. Fetch: map-style batched access ``ds[ids]`` in ``numpy`` or
``torch`` format, rows padded into ``[B, seqlen]`` int64 (the collate every user writes). Loader: torch's
``DataLoader`` over the torch-format dataset (which implements ``__getitems__``), same collate.
"""

from __future__ import annotations

import os
import shutil

import numpy as np

from .storeio import load_plan, pad_rows, read_store

__all__ = ["Adapter", "version"]


def version() -> dict:
    """Versions of datasets and pyarrow."""
    import datasets
    import pyarrow

    return {"version": datasets.__version__, "pyarrow": pyarrow.__version__}


class Adapter:
    """HF datasets over the plan's samples of the store at ``store``."""

    variants = ("numpy", "torch")

    def __init__(self, store: str, plan: str, workdir: str):
        self.store, self.plan_path, self.dir = store, plan, os.path.join(workdir, "hf")
        self.plan = load_plan(plan)
        self.ds = {}

    def convert(self) -> dict:
        """Write the Arrow dataset and reopen it memory-mapped."""
        import datasets
        import pyarrow as pa

        tokens, _ = read_store(self.store)
        p = self.plan
        offsets = np.zeros(len(p) + 1, dtype=np.int64)
        np.cumsum(p.length, out=offsets[1:])
        values = np.concatenate([tokens[s:s + n] for s, n in zip(p.start.tolist(), p.length.tolist(), strict=True)])
        column = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values.astype(np.int32)))
        table = pa.Table.from_arrays([column], names=["input_ids"])
        shutil.rmtree(self.dir, ignore_errors=True)
        datasets.Dataset(table).save_to_disk(self.dir)
        self.open()
        return {"bytes": sum(os.path.getsize(os.path.join(self.dir, f)) for f in os.listdir(self.dir))}

    def open(self) -> None:
        """Open the converted dataset (memory-mapped) in both formats."""
        import datasets

        base = datasets.load_from_disk(self.dir)
        self.ds = {"numpy": base.with_format("numpy"), "torch": base.with_format("torch")}

    def fetch(self, ids: np.ndarray, variant: str) -> np.ndarray:
        """``ds[ids]["input_ids"]`` in the variant's format, padded to ``[B, seqlen]``."""
        rows = self.ds[variant][ids.tolist()]["input_ids"]
        return pad_rows(list(rows), self.plan.seqlen, self.plan.pad)

    def loader(self, variant: str, batch_size: int, workers: int, seed: int):
        """torch DataLoader over the torch-format dataset, shuffled with a seeded generator."""
        import torch
        from torch.utils.data import DataLoader

        seqlen, pad = self.plan.seqlen, self.plan.pad

        def collate(items):
            return torch.from_numpy(pad_rows([it["input_ids"] for it in items], seqlen, pad))

        return DataLoader(self.ds["torch"], batch_size=batch_size, shuffle=True, num_workers=workers,
                          generator=torch.Generator().manual_seed(seed), collate_fn=collate)
