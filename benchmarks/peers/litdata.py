"""Lightning litdata: ``optimize`` the plan's rows into chunks, then ``StreamingDataset`` / ``StreamingDataLoader``.

Convert: ``litdata.optimize`` with one worker writes every sample's unpadded tokens (an int32 numpy array)
into 64 MB chunks (timed, as is reopening). Fetch: random access ``ds[i]`` per sample, padded into
``[B, seqlen]``. Loader: ``StreamingDataLoader`` (shuffled, seeded) with the same collate.
"""

from __future__ import annotations

import functools
import os
import shutil

import numpy as np

from .storeio import load_plan, pad_rows, read_store

__all__ = ["Adapter", "version"]


def version() -> dict:
    """litdata's version."""
    import litdata

    return {"version": litdata.__version__}


@functools.lru_cache(maxsize=2)
def _inputs(store: str, plan: str):
    return read_store(store)[0], load_plan(plan)


def _row(i: int, store: str, plan: str) -> np.ndarray:
    tokens, p = _inputs(store, plan)
    return np.array(p.row(tokens, i), dtype=np.int32)


class _Collate:
    def __init__(self, seqlen: int, pad: int):
        self.seqlen, self.pad = seqlen, pad

    def __call__(self, rows):
        import torch

        return torch.from_numpy(pad_rows(rows, self.seqlen, self.pad))


class Adapter:
    """litdata over the plan's samples of the store at ``store``."""

    variants = ("default",)

    def __init__(self, store: str, plan: str, workdir: str):
        self.store, self.plan_path = store, plan
        self.plan = load_plan(plan)
        self.dir = os.path.join(workdir, "litdata")
        self.ds = None

    def convert(self) -> dict:
        """``litdata.optimize`` every row (one worker), then open the dataset."""
        import litdata

        shutil.rmtree(self.dir, ignore_errors=True)
        litdata.optimize(fn=functools.partial(_row, store=self.store, plan=self.plan_path),
                         inputs=list(range(len(self.plan))), output_dir=self.dir, chunk_bytes="64MB",
                         num_workers=1, verbose=False)
        self.open()
        return {"bytes": sum(os.path.getsize(os.path.join(self.dir, f)) for f in os.listdir(self.dir))}

    def open(self) -> None:
        """Open the optimised dataset for random access."""
        import litdata

        self.ds = litdata.StreamingDataset(self.dir)

    def fetch(self, ids: np.ndarray, variant: str) -> np.ndarray:
        """``ds[i]`` for every id, padded to ``[B, seqlen]``."""
        return pad_rows([self.ds[int(i)] for i in ids], self.plan.seqlen, self.plan.pad)

    def loader(self, variant: str, batch_size: int, workers: int, seed: int):
        """``StreamingDataLoader`` over a shuffled (seeded) StreamingDataset."""
        import litdata

        ds = litdata.StreamingDataset(self.dir, shuffle=True, seed=seed)
        return litdata.StreamingDataLoader(ds, batch_size=batch_size, num_workers=workers,
                                           collate_fn=_Collate(self.plan.seqlen, self.plan.pad))
