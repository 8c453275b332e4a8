"""The ``files`` view's columns as Arrow arrays, built from a dataset's numpy arrays without a loop per file.

:func:`dataset_columns` gives the columns every dataset knows without reading a file: ``file_id``, ``path``
(the :class:`~consumer.sources.paths.PathList` blob, NUL separators dropped by one numpy step, as an Arrow
string array; paths that are not valid UTF-8 are shown with ``\\xNN`` escapes), ``class`` and ``header``
(Arrow dictionary arrays over the dataset's class names and distinct headers: no string per file),
``class_id``, ``size``, ``mtime_ns``, ``tokens``, ``samples`` (numpy arrays handed over as they are).

The expensive columns are *lazy* (:data:`LAZY_GROUPS`): ``description`` and ``mime`` (one libmagic pass gives
both) and the content columns ``sha256, entropy, printable, zeros, histogram`` (one read of every file). Until
a statement needs them the engine shows them as NULL constants of their type (no array); :func:`magic_columns` and
:func:`content_columns` turn the catalog's answers into arrays. ``extension`` is computed by the engine from
``path`` (an SQL expression: only statements naming it pay for it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..catalog.content import CONTENT_COLUMNS
from ..catalog.rows import display_path
from ..sources.paths import PathList
from .arrays import dictionary, numbers

__all__ = ["FILES_COLUMNS", "LAZY_GROUPS", "LAZY_TYPES", "MAGIC_COLUMNS", "content_columns", "dataset_columns",
           "magic_columns", "path_array"]

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


def dataset_columns(paths: Sequence[str], doc_class: np.ndarray, classes: Sequence[str], class_ids: np.ndarray,
                    sizes: np.ndarray, mtimes: np.ndarray, doc_header: np.ndarray, headers: Sequence[str],
                    tokens: np.ndarray, samples: np.ndarray, *, with_path: bool = True) -> dict[str, pa.Array]:
    """The eager columns of the view (see the module docstring). ``class_ids`` maps a class index to its id;
    ``doc_header`` indexes ``headers``. ``with_path=False`` leaves ``path`` out (a session makes it lazy: at 10^7
    files its conversion is the one cost of the first statement, and most statements never name it)."""
    n = len(paths)
    out = {
        "file_id": numbers(np.arange(n, dtype=np.int64)),
        "class": dictionary(doc_class, classes),
        "class_id": numbers(np.asarray(class_ids, dtype=np.int64)[np.asarray(doc_class, dtype=np.int64)]),
        "size": numbers(sizes, np.int64),
        "mtime_ns": numbers(mtimes, np.int64),
        "header": dictionary(doc_header, headers),
        "tokens": numbers(tokens, np.int64),
        "samples": numbers(samples, np.int64),
    }
    if with_path:
        out["path"] = path_array(paths)
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
