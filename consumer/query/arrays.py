"""Arrow arrays built from their buffers: numbers from numpy arrays, strings from short lists, dictionaries.

``pa.array`` imports pandas whenever pandas is installed (pyarrow checks every input against pandas' types): about
0.2 s on a dataset's first SQL statement, more than DuckDB's own start. These builders hand Arrow the numpy buffers
(no copy for a contiguous array of a fixed-width type) and never import pandas. The one home of that rule: the
views' eager columns are made here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["numbers", "strings", "dictionary"]


def numbers(values: Any, dtype: Any = None, mask: np.ndarray | None = None) -> pa.Array:
    """An Arrow array of the integers or floats ``values`` (as ``dtype`` when given), NULL where ``mask`` is
    True; shares the numpy buffer when ``values`` is already contiguous in that type."""
    a = np.ascontiguousarray(values, dtype=dtype)
    if a.dtype.kind not in "iuf" or a.ndim != 1:
        raise ValueError(f"values: expected a 1-d array of integers or floats, got {a.dtype} of shape {a.shape}")
    validity, nulls = None, 0
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != a.shape:
            raise ValueError(f"mask: expected the shape of values {a.shape}, got {mask.shape}")
        nulls = int(np.count_nonzero(mask))
        if nulls:
            validity = pa.py_buffer(np.packbits(~mask, bitorder="little"))
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), a.size, [validity, pa.py_buffer(a)], null_count=nulls)


def strings(values: Sequence[str], large: bool = False) -> pa.Array:
    """An Arrow ``string`` (``large_string`` when ``large``) array of ``values`` (UTF-8; a value that cannot be
    encoded, a lone surrogate, raises UnicodeEncodeError as ``pa.array`` would refuse it)."""
    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    data = pa.py_buffer(b"".join(encoded))
    if large:
        return pa.LargeStringArray.from_buffers(len(encoded), pa.py_buffer(offsets), data)
    if offsets[-1] >= 2**31:
        raise ValueError(f"values: {int(offsets[-1])} bytes of text do not fit a string array; use large=True")
    return pa.StringArray.from_buffers(len(encoded), pa.py_buffer(offsets.astype(np.int32)), data)


def dictionary(codes: Any, names: Sequence[str], mask: np.ndarray | None = None) -> pa.DictionaryArray:
    """A dictionary array: ``names[codes[k]]`` at row ``k`` (int32 codes), NULL where ``mask`` is True."""
    return pa.DictionaryArray.from_arrays(numbers(codes, np.int32, mask), strings(names))
