"""The ``files`` view's columns as Arrow arrays, built from a dataset's numpy arrays without a loop per file.

The columns every dataset knows without reading a file come in two kinds, so that a statement pays only for
the columns it names (at 10^8 documents a column of int64 is 800 MB):

- :func:`dataset_columns`: views of the dataset's own arrays, made in O(1) with no copy (Arrow arrays over the
  numpy buffers, which may be memory maps): ``class`` and ``header`` (dictionary arrays over the class names and
  distinct headers, the codes as stored), ``size``, ``mtime_ns`` and, when the class ids are the class indices,
  ``class_id`` (the class codes again). Integers keep their stored width (int32 lengths stay int32); the engine
  shows them as BIGINT;
- :func:`derived_columns`: loaders of the columns computed from them, run when a statement first names one:
  ``file_id`` (``0 .. n-1``), ``class_id`` under other ids, ``tokens`` and ``samples``.

``path`` (:func:`path_array`: the :class:`~consumer.sources.paths.PathList` blob, NUL separators dropped by one
numpy step, as an Arrow string array; paths that are not valid UTF-8 are shown with ``\\xNN`` escapes) is made
by the session when first named as well.

The expensive columns are *lazy* (:data:`LAZY_GROUPS`): ``description`` and ``mime`` (one libmagic pass gives
both) and the content columns ``sha256, entropy, printable, zeros, histogram`` (one read of every file). Until
a statement needs them the engine shows them as NULL constants of their type (no array); :func:`magic_columns` and
:func:`content_columns` turn the catalog's answers into arrays. ``extension`` is computed by the engine from
``path`` (an SQL expression: only statements naming it pay for it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from ..catalog.content import CONTENT_COLUMNS
from ..catalog.rows import display_path
from ..sources.paths import PathList
from .arrays import numbers, strings

__all__ = ["DERIVED_ALIASES", "FILES_COLUMNS", "LAZY_GROUPS", "LAZY_TYPES", "MAGIC_COLUMNS", "content_columns",
           "dataset_columns", "derived_columns", "magic_columns", "path_array"]

MAGIC_COLUMNS = ("description", "mime")
LAZY_GROUPS: dict[str, tuple[str, ...]] = {"magic": MAGIC_COLUMNS, "content": CONTENT_COLUMNS}
"""Lazy columns by the pass that computes them together."""

LAZY_TYPES: dict[str, pa.DataType] = {"path": pa.large_string(), "description": pa.large_string(),
                                      "mime": pa.large_string(),
                                      "sha256": pa.large_string(), "entropy": pa.float64(),
                                      "printable": pa.float64(), "zeros": pa.float64(),
                                      "histogram": pa.large_binary()}

FILES_COLUMNS = ("file_id", "path", "class", "class_id", "size", "mtime_ns", "extension", "description", "mime",
                 "header", "sha256", "tokens", "samples", "entropy", "printable", "zeros", "histogram")
"""The ``files`` view's columns, in order (the same as before the move to DuckDB)."""


def path_array(paths: Sequence[str]) -> pa.Array:
    """The paths as an Arrow ``string`` array (``large_string`` beyond 2 GiB of path bytes). A :class:`PathList`
    is converted from its byte blob in numpy (no Python string per path); paths whose bytes are not UTF-8 fall
    back to ``display_path`` per path."""
    if isinstance(paths, PathList):
        n = len(paths)
        if n == 0:
            return pa.array([], type=pa.large_string())
        blob = paths.packed()
        offsets = paths.offsets() - np.arange(n + 1, dtype=np.int64)  # every earlier path lost its separator
        data = blob[blob != 0]  # paths never hold NUL: every zero is a separator
        if data.size < 2**31:  # 32-bit offsets when they fit (DuckDB scans those a little faster)
            arr = pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))
        else:
            arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
        if bool((data < 0x80).all()):  # ASCII is valid UTF-8: no need to check further
            return arr
        try:
            arr.validate(full=True)  # the UTF-8 check, vectorised
            return arr
        except pa.ArrowInvalid:
            pass
    return pa.array([display_path(p) for p in paths], type=pa.large_string())


def _native(values: np.ndarray) -> pa.Array:
    """``values`` (integers) as an Arrow array in their own width: no copy when contiguous."""
    a = np.asarray(values)
    return numbers(a, None if a.dtype.kind in "iu" else np.int64)


def _identity(class_ids: np.ndarray) -> bool:
    ids = np.asarray(class_ids)
    return bool(np.array_equal(ids, np.arange(ids.size)))


def dataset_columns(doc_class: np.ndarray, classes: Sequence[str], class_ids: np.ndarray, sizes: np.ndarray,
                    mtimes: np.ndarray, doc_header: np.ndarray, headers: Sequence[str]) -> dict[str, pa.Array]:
    """The columns that are views of the dataset's arrays (see the module docstring): O(1), no copy of a
    contiguous integer array. ``class_ids`` maps a class index to its id; ``doc_header`` indexes ``headers``."""
    codes = _native(doc_class)
    out = {"class": pa.DictionaryArray.from_arrays(codes, strings(classes)), "size": _native(sizes),
           "mtime_ns": _native(mtimes), "header": pa.DictionaryArray.from_arrays(_native(doc_header),
                                                                                strings(headers))}
    if _identity(class_ids):
        out["class_id"] = codes
    return out


DERIVED_ALIASES: dict[str, tuple[str, ...]] = {"file_id": ("doc_id",)}
"""The ``documents`` columns that show a derived column under another name (a statement naming one needs it)."""


def derived_columns(n: int, doc_class: np.ndarray, class_ids: np.ndarray, tokens: Callable[[], np.ndarray],
                    samples: Callable[[], np.ndarray]) -> dict[str, Callable[[], pa.Array]]:
    """Loaders of the computed columns (see the module docstring), each run when a statement first needs it:
    ``tokens()`` and ``samples()`` give the per-document arrays."""
    out: dict[str, Callable[[], pa.Array]] = {
        "file_id": lambda: numbers(np.arange(n, dtype=np.int64)),
        "tokens": lambda: _native(tokens()),
        "samples": lambda: _native(samples()),
    }
    if not _identity(class_ids):
        out["class_id"] = lambda: numbers(np.asarray(class_ids, dtype=np.int64)[np.asarray(doc_class)])
    return out


def magic_columns(descriptions: Sequence[str | None], mimes: Sequence[str | None]) -> dict[str, pa.Array]:
    """``description`` and ``mime`` arrays from libmagic's results (one entry per file; None stays NULL)."""
    return {"description": pa.array(descriptions, type=LAZY_TYPES["description"]),
            "mime": pa.array(mimes, type=LAZY_TYPES["mime"])}


def content_columns(rows: Sequence[tuple[object, ...] | None]) -> dict[str, pa.Array]:
    """The content columns from :meth:`Catalog.content_rows` (a tuple per file, None where unknown)."""
    cols: list[list[object]] = [[] for _ in CONTENT_COLUMNS]
    for row in rows:
        values = row if row is not None else (None,) * len(CONTENT_COLUMNS)
        for col, v in zip(cols, values):
            col.append(v)
    return {c: pa.array(v, type=LAZY_TYPES[c]) for c, v in zip(CONTENT_COLUMNS, cols)}
