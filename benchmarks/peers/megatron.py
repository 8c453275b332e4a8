"""Megatron-core over the same ``.bin/.idx`` store: ``IndexedDataset`` and ``GPTDataset``.

- variant ``indexed``: the plan's samples read with ``IndexedDataset.get(doc, offset, length)``, one call
  per document piece of a sample (what a user of the low-level dataset writes), padded to ``[B, seqlen]``;
- variant ``gpt``: ``GPTDataset`` (one epoch, seed and ``sequence_length`` from set-up, no attention mask):
  item ``k`` is ``tokens`` plus the last label, ``sequence_length + 1`` tokens, the same rows as
  ``consumer``'s ``sampling="megatron"``. Its index build (document/sample/shuffle indices, written to
  a cache folder) is the timed convert step.
Loader: torch's ``DataLoader`` over ``GPTDataset`` (map-style, default collate stacks its tensors).
"""

from __future__ import annotations

import os
import shutil
import types

import numpy as np

from .storeio import load_plan, pad_rows

__all__ = ["Adapter", "version"]


def version() -> dict:
    """megatron-core's version."""
    from importlib.metadata import version as dist_version

    from megatron.core.datasets.indexed_dataset import IndexedDataset  # noqa: F401

    return {"version": dist_version("megatron-core")}


class Adapter:
    """Megatron-core datasets over the store ``store`` (prefix of ``.bin/.idx``)."""

    variants = ("indexed", "gpt")

    def __init__(self, store: str, plan: str, workdir: str, gpt_seq_length: int, seed: int, eod: int, pad: int):
        self.store, self.plan = store, load_plan(plan)
        self.cache = os.path.join(workdir, "megatron-cache")
        self.gpt_seq_length, self.seed, self.eod, self.pad = gpt_seq_length, seed, eod, pad
        self.ix = None
        self.gpt = None

    def convert(self) -> dict:
        """Open the IndexedDataset and build GPTDataset's indices (cached under the work folder)."""
        shutil.rmtree(self.cache, ignore_errors=True)
        os.makedirs(self.cache)
        self.open()
        return {"gpt_samples": len(self.gpt)}

    def open(self) -> None:
        """Open the IndexedDataset and the GPTDataset (indices from the cache when present)."""
        import logging

        from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
        from megatron.core.datasets.indexed_dataset import IndexedDataset
        from megatron.core.datasets.utils import Split

        logging.getLogger("megatron").setLevel(logging.WARNING)
        self.ix = IndexedDataset(self.store)
        self.doc_ptr = np.zeros(len(self.ix) + 1, dtype=np.int64)
        np.cumsum(self.ix.sequence_lengths, out=self.doc_ptr[1:])
        tokenizer = types.SimpleNamespace(eod=self.eod, pad=self.pad, vocab_size=None,
                                          unique_identifiers={"class": "bytes", "eod": self.eod, "pad": self.pad})
        config = GPTDatasetConfig(random_seed=self.seed, sequence_length=self.gpt_seq_length, split="1,0,0",
                                  tokenizer=tokenizer, path_to_cache=self.cache, create_attention_mask=False,
                                  reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False)
        self.gpt = GPTDataset(self.ix, self.store, np.arange(len(self.ix), dtype=np.int32), None, Split.train,
                              config)

    def _indexed_row(self, i: int) -> np.ndarray:
        p = self.plan
        start, end = int(p.start[i]), int(p.start[i] + p.length[i])
        d = int(np.searchsorted(self.doc_ptr, start, side="right")) - 1
        parts = []
        while start < end:
            n = min(end, int(self.doc_ptr[d + 1])) - start
            parts.append(self.ix.get(d, offset=start - int(self.doc_ptr[d]), length=n))
            start += n
            d += 1
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def fetch(self, ids: np.ndarray, variant: str) -> np.ndarray:
        """The rows of ``ids``: plan rows via ``IndexedDataset.get`` or GPTDataset items (tokens + last label)."""
        if variant == "indexed":
            return pad_rows([self._indexed_row(int(i)) for i in ids], self.plan.seqlen, self.plan.pad)
        import torch

        items = [self.gpt[int(i)] for i in ids]
        return torch.stack([torch.cat([it["tokens"], it["labels"][-1:]]) for it in items]).numpy()

    def loader(self, variant: str, batch_size: int, workers: int, seed: int):
        """torch DataLoader over GPTDataset (shuffled, seeded); batches are dicts of stacked tensors."""
        import torch
        from torch.utils.data import DataLoader

        return DataLoader(self.gpt, batch_size=batch_size, shuffle=True, num_workers=workers,
                          generator=torch.Generator().manual_seed(seed))
