"""Dataframe conversions of SQL results: pandas, pyarrow and polars, each optional and imported lazily.

``ds.sql(...)`` returns :class:`~consumer.query.rows.Rows` (tuples plus ``columns``); its ``to_pandas()``,
``to_arrow()`` and ``to_polars()`` call the functions here. None of the three libraries is a
dependency of ``consumer``: each is imported only when its conversion is asked for, and a missing one
raises :class:`~consumer.errors.MissingDependencyError` naming the package to install (all three come
with the ``dataframes`` extra). :func:`files_table` gives the dataset's ``files`` view as a pandas
DataFrame.

Column types come from the values SQLite returned: INTEGER columns become int64 (or float64 / nullable
where NULLs occur, as each library decides), TEXT becomes strings, BLOBs become bytes / binary. SQLite
lets one column mix types (``SELECT 1 UNION ALL SELECT 'a'``): pandas keeps such a column as objects,
polars as strings, and pyarrow refuses it with a :class:`~consumer.errors.QueryError` asking for a CAST.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import MissingDependencyError, QueryError

if TYPE_CHECKING:
    import pandas
    import polars
    import pyarrow

Row = tuple[Any, ...]  # one result row (consumer.query.rows.Row; not imported: rows.py imports this module)

__all__ = ["rows_to_pandas", "rows_to_arrow", "rows_to_polars", "files_table", "FILES_QUERY"]

FILES_QUERY = "SELECT * FROM files ORDER BY file_id"


def _require(module: str, package: str, what: str) -> Any:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the pip package and the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(
            f"{what} needs the optional package {package!r}, which is not installed: "
            f'pip install {package}  (or pip install "consumer[dataframes]" for pandas, pyarrow and polars)') from e


def _columns(rows: Sequence[Row], columns: Sequence[str]) -> list[list[Any]]:
    """Column-major copy of ``rows``."""
    return [list(col) for col in zip(*rows)] if rows else [[] for _ in columns]


def rows_to_pandas(rows: Sequence[Row], columns: Sequence[str]) -> pandas.DataFrame:
    """``rows`` (tuples) with ``columns`` as a ``pandas.DataFrame``; duplicate column names are kept."""
    pd = _require("pandas", "pandas", "to_pandas()")
    return pd.DataFrame.from_records(list(rows), columns=list(columns))


def rows_to_arrow(rows: Sequence[Row], columns: Sequence[str]) -> pyarrow.Table:
    """``rows`` with ``columns`` as a ``pyarrow.Table`` (types inferred per column; all-NULL columns are null)."""
    pa = _require("pyarrow", "pyarrow", "to_arrow()")
    arrays = []
    for name, values in zip(columns, _columns(rows, columns)):
        try:
            arrays.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:  # SQLite lets one column hold several types
            raise QueryError(f"to_arrow(): column {name!r} mixes value types ({e}); give it one type in SQL, "
                             f"e.g. CAST({name} AS TEXT)") from None
    return pa.Table.from_arrays(arrays, names=list(columns))


def rows_to_polars(rows: Sequence[Row], columns: Sequence[str]) -> polars.DataFrame:
    """``rows`` with ``columns`` as a ``polars.DataFrame``. Polars needs unique column names: duplicates
    (``SELECT 1, 1``) raise :class:`QueryError` asking for ``AS`` aliases."""
    pl = _require("polars", "polars", "to_polars()")
    dup = sorted(name for name, k in Counter(columns).items() if k > 1)
    if dup:
        raise QueryError(f"to_polars(): column names must be unique, got duplicate(s) {dup}; name them with AS")
    data = dict(zip(columns, _columns(rows, columns)))
    frame: polars.DataFrame = pl.DataFrame(data, strict=False) if rows else pl.DataFrame({c: [] for c in columns})
    return frame


class _Result(Protocol):
    def to_pandas(self) -> pandas.DataFrame: ...


class _Queryable(Protocol):
    def sql(self, statement: str) -> _Result: ...


def files_table(ds: _Queryable) -> pandas.DataFrame:
    """The dataset's ``files`` view (one row per file, ordered by ``file_id``) as a ``pandas.DataFrame``.

    Columns: ``file_id, path, class, class_id, size, mtime_ns, extension, description, mime, header,
    sha256, tokens, samples`` (see ``Consumer.sql``). Like the first ``ds.sql`` call, it runs libmagic
    once on files whose description or MIME type was never computed.
    """
    _require("pandas", "pandas", "files_table()")  # fail before any libmagic work
    return ds.sql(FILES_QUERY).to_pandas()
