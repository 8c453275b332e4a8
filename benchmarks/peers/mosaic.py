"""MosaicML streaming: ``MDSWriter`` shards of the plan's rows, then ``StreamingDataset`` and torch's ``DataLoader``.

``streaming/__init__.py`` imports its vision datasets, hence torchvision (whose only index build is a CUDA
one that fails to load beside CPU torch); the engine (``streaming.base``) needs none of it, so this adapter
registers a bare ``streaming`` package module and imports ``streaming.base`` from it. mosaic pins
numpy < 2.2 and transformers < 5: it runs in its own virtual environment. Each loader configuration runs
in a fresh process (iterating one dataset with 0 then 2 workers in one process can hang).

Convert: ``MDSWriter`` (no compression, 64 MB shards) writes every sample's unpadded int32 tokens (timed,
as is opening). Fetch: ``ds.get_item(i)`` per sample, padded. Loader: ``DataLoader`` over a shuffled
(seeded) ``StreamingDataset`` with the same collate.
"""

from __future__ import annotations

import os
import shutil

import numpy as np

from .storeio import import_skipping_init, load_plan, pad_rows, read_store

__all__ = ["Adapter", "version", "FRESH_LOADER"]

FRESH_LOADER = True


def _base():
    return import_skipping_init("streaming", "base", "mosaicml-streaming is not installed")


def version() -> dict:
    """mosaicml-streaming's version (after importing ``streaming.base``)."""
    from importlib.metadata import version as dist_version

    _base()
    return {"version": dist_version("mosaicml-streaming"), "numpy": np.__version__}


class _Collate:
    def __init__(self, seqlen: int, pad: int):
        self.seqlen, self.pad = seqlen, pad

    def __call__(self, items):
        import torch

        return torch.from_numpy(pad_rows([it["input_ids"] for it in items], self.seqlen, self.pad))


class Adapter:
    """mosaic streaming over the plan's samples of the store at ``store``."""

    variants = ("default",)

    def __init__(self, store: str, plan: str, workdir: str):
        self.store, self.plan = store, load_plan(plan)
        self.dir = os.path.join(workdir, "mosaic")
        self.ds = None

    def convert(self) -> dict:
        """Write MDS shards of every row, then open the dataset."""
        base = _base()
        tokens, _ = read_store(self.store)
        shutil.rmtree(self.dir, ignore_errors=True)
        with base.MDSWriter(out=self.dir, columns={"input_ids": "ndarray:int32"}, compression=None,
                            size_limit=1 << 26, progress_bar=False) as out:
            for i in range(len(self.plan)):
                out.write({"input_ids": np.array(self.plan.row(tokens, i), dtype=np.int32)})
        self.open()
        return {"bytes": sum(os.path.getsize(os.path.join(self.dir, f)) for f in os.listdir(self.dir))}

    def open(self) -> None:
        """Open the shards for random access (no shuffle)."""
        base = _base()
        base.util.clean_stale_shared_memory()
        self.ds = base.StreamingDataset(local=self.dir, shuffle=False, batch_size=1)

    def fetch(self, ids: np.ndarray, variant: str) -> np.ndarray:
        """``ds.get_item(i)`` for every id, padded to ``[B, seqlen]``."""
        return pad_rows([self.ds.get_item(int(i))["input_ids"] for i in ids], self.plan.seqlen, self.plan.pad)

    def loader(self, variant: str, batch_size: int, workers: int, seed: int):
        """torch DataLoader over a shuffled (seeded) StreamingDataset."""
        from torch.utils.data import DataLoader

        base = _base()
        ds = base.StreamingDataset(local=self.dir, shuffle=True, shuffle_seed=seed, batch_size=batch_size)
        return DataLoader(ds, batch_size=batch_size, num_workers=workers,
                          collate_fn=_Collate(self.plan.seqlen, self.plan.pad))
