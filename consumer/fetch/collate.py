"""Collate: numpy columns -> torch tensors. The only module that imports torch (lazily).

Arrays are handed over with ``torch.from_numpy`` (zero copy, int64, CPU); no Python lists, no
``torch.tensor(list)``. Importing ``consumer`` does not import torch; the first batch does.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import MissingDependencyError

__all__ = ["to_tensors", "torch_from_numpy"]

_INT64, _INT32 = np.dtype(np.int64), np.dtype(np.int32)
_KEPT = (np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.bool_))  # handed over as they are


@functools.cache
def _torch() -> ModuleType:
    try:
        import torch  # noqa: PLC0415  (the one home of this dependency)
    except ImportError as e:
        raise MissingDependencyError(f"batches are torch tensors: install torch>=2.1 ({e})") from e
    return torch


def torch_from_numpy() -> Any:
    """``torch.from_numpy`` (importing torch on the first call)."""
    return _torch().from_numpy


def to_tensors(columns: dict[str, np.ndarray]) -> dict[str, Any]:
    """Each numpy column as a CPU torch tensor sharing its memory (made contiguous if needed): int64, or int32
    for columns fetched with ``out_dtype=numpy.int32`` or made int32 (``document_ids``, ``cu_seqlens``;
    ``nn.Embedding`` takes both), float32 (``loss_mask``) and bool (Megatron's ``attention_mask``) as they are;
    any other integer dtype becomes int64."""
    from_numpy = _torch().from_numpy
    out = {}
    for name, arr in columns.items():
        if type(arr) is not np.ndarray or not (arr.dtype is _INT64 or arr.dtype is _INT32) or \
                not arr.flags.c_contiguous:  # what the fetch path makes is all three already: no call for it
            dtype = arr.dtype if arr.dtype in _KEPT else np.int64
            # ascontiguousarray makes a 0-d array (max_seqlen) 1-d: a scalar is copied as one
            arr = np.ascontiguousarray(arr, dtype=dtype) if np.ndim(arr) else np.array(arr, dtype=dtype)
        out[name] = from_numpy(arr)
    return out
