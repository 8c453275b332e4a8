"""Comparing the batches two loaders delivered (lists of dicts of tensors), column by column, dtype included."""

from __future__ import annotations

import torch


def same_batches(a: list[dict], b: list[dict]) -> None:
    """Assert ``a`` and ``b`` hold the same batches: the same columns, dtypes and values, in the same order."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for k in x:
            assert x[k].dtype == y[k].dtype and torch.equal(x[k], y[k]), k
