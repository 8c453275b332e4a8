"""The ``files`` view in and out as Arrow and Parquet: ``ds.to_arrow()``, ``ds.export_catalog(path)``, file lists.

:data:`FILES_SCHEMA` is the schema of the catalog export (documented in ``docs/query.md``): one row per file of
the dataset, ordered by ``file_id``, columns in the view's order with fixed types (strings as ``string``,
integers as ``int64``, statistics as ``double``, the histogram blob as ``binary``), and the schema metadata
``consumer.files_schema = "1"``. :func:`write_parquet` writes a table with pyarrow (the engine itself may not
write files). :func:`file_list` reads a file list back — a ``pyarrow.Table``, a pandas or polars DataFrame
(anything with ``to_arrow``/``__arrow_c_stream__`` or accepted by ``pyarrow.table``), a Parquet file, or a
sequence of paths — as ``(paths, classes or None)``; :func:`file_ids_of` maps one onto a dataset's
``file_id`` values (by its ``file_id`` column when it has one, else by ``path``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InputError, short_repr
from ..util.sets import distinct
from .table import FILES_COLUMNS

__all__ = ["FILES_SCHEMA", "SCHEMA_VERSION", "conform", "file_ids_of", "file_list", "files_statement",
           "read_table", "write_parquet"]

SCHEMA_VERSION = "1"
_TYPES = {"file_id": pa.int64(), "path": pa.string(), "class": pa.string(), "class_id": pa.int64(),
          "size": pa.int64(), "mtime_ns": pa.int64(), "extension": pa.string(), "description": pa.string(),
          "mime": pa.string(), "header": pa.string(), "sha256": pa.string(), "tokens": pa.int64(),
          "samples": pa.int64(), "entropy": pa.float64(), "printable": pa.float64(), "zeros": pa.float64(),
          "histogram": pa.binary()}
FILES_SCHEMA = pa.schema([pa.field(c, _TYPES[c]) for c in FILES_COLUMNS],
                         metadata={"consumer.files_schema": SCHEMA_VERSION})
"""Schema of ``ds.to_arrow()`` and of the Parquet file ``ds.export_catalog`` writes."""


def files_statement(content: bool) -> str:
    """The statement of the export: ``SELECT *`` (content columns as stored), or every column named (so the
    content pass runs first for files lacking them)."""
    columns = ", ".join(f'"{c}"' for c in FILES_COLUMNS) if content else "*"
    return f"SELECT {columns} FROM files ORDER BY file_id"


def conform(table: pa.Table) -> pa.Table:
    """``table`` (the view's columns) cast to :data:`FILES_SCHEMA`."""
    return table.select(list(FILES_COLUMNS)).cast(FILES_SCHEMA)


def write_parquet(table: pa.Table, path: str | os.PathLike[str]) -> str:
    """Write ``table`` to the Parquet file ``path`` (written to a temporary name, then renamed); returns it."""
    out = os.fspath(path)
    if not out or os.path.isdir(out):
        raise InputError(f"path must be a Parquet file name, got {short_repr(out)}")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise InputError(f"path: directory not found: {parent!r}")
    tmp = f"{out}.tmp-{os.getpid()}"
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return str(out)


def read_table(source: Any) -> pa.Table:
    """A file list as an Arrow table: a table itself, a Parquet file (``str`` / ``os.PathLike`` ending in
    ``.parquet``), a dataframe (pandas, polars: via ``to_arrow`` or the Arrow C stream), or a sequence of paths."""
    if isinstance(source, pa.Table):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not str(path).endswith(".parquet") or not os.path.isfile(path):
            raise InputError(f"files: expected a Parquet file (*.parquet), got {short_repr(path)}")
        return pq.read_table(path)
    if hasattr(source, "to_arrow"):
        return source.to_arrow()
    if hasattr(source, "__arrow_c_stream__") or type(source).__module__.startswith("pandas"):
        return pa.table(source)
    if isinstance(source, Sequence) and all(isinstance(p, (str, os.PathLike)) for p in source):
        return pa.table({"path": pa.array([os.fspath(p) for p in source], type=pa.string())})
    raise InputError(f"files must be an Arrow table, a dataframe, a Parquet file or a list of paths, "
                     f"got {short_repr(source)}")


def file_list(source: Any) -> tuple[list[str], list[str] | None]:
    """``(paths, classes)`` of a file list (see :func:`read_table`); ``classes`` is None without a ``class``
    column. The paths must be unique."""
    table = read_table(source)
    if "path" not in table.column_names:
        raise InputError(f"files: a file list needs a 'path' column, got columns {table.column_names}")
    paths = [str(p) for p in table.column("path").to_pylist()]
    if any(p is None for p in paths):
        raise InputError("files: the 'path' column holds NULL")
    classes = [str(c) for c in table.column("class").to_pylist()] if "class" in table.column_names else None
    return paths, classes


def file_list_fps(source: Any) -> dict[str, str] | list[str]:
    """A file list (see :func:`file_list`) as the ``fps`` of a dataset: ``{path: class}`` with a ``class``
    column, else the paths."""
    paths, classes = file_list(source)
    return dict(zip(paths, classes)) if classes is not None else paths


def file_ids_of(source: Any, dataset_paths: Sequence[str]) -> np.ndarray:
    """The sorted ``file_id`` values of a file list within a dataset whose paths are ``dataset_paths``: its
    ``file_id`` column when it has one (checked against its ``path`` column when both exist), else its paths.
    A path that is not a file of the dataset raises :class:`InputError` naming it."""
    table = read_table(source)
    n = len(dataset_paths)
    if "file_id" in table.column_names:
        ids = np.asarray(table.column("file_id").to_numpy(zero_copy_only=False), dtype=np.int64)
        bad = ids[(ids < 0) | (ids >= n)]
        if bad.size:
            raise InputError(f"files: file_id {int(bad[0])} is not a file of this dataset (0..{n - 1})")
        if "path" in table.column_names:
            listed = table.column("path").to_pylist()
            for i, p in zip(ids.tolist(), listed):
                if dataset_paths[i] != p and not _same_display(dataset_paths[i], p):
                    raise InputError(f"files: file_id {i} is {dataset_paths[i]!r} in this dataset, "
                                     f"the list says {p!r} (a list from another dataset?)")
        return distinct(ids)
    paths, _ = file_list(table)
    lookup = {p: i for i, p in enumerate(dataset_paths)}
    found: list[int] = []
    for p in paths:
        i = lookup.get(p)
        if i is None:
            raise InputError(f"files: {p!r} is not a file of this dataset")
        found.append(i)
    return distinct(np.asarray(found, dtype=np.int64))


def _same_display(path: str, shown: object) -> bool:
    return bool(os.fsencode(path).decode("utf-8", "backslashreplace") == shown)
