"""The SQL methods of a dataset: what ``Consumer`` offers from ``query/`` (``sql``, ``to_arrow``,
``export_catalog``, ``duplicates``, ``catalog``, ``files_table``, ``close`` and ``with``), each one call into
the dataset's :class:`~consumer.query.session.SQLSession`. ``Consumer`` inherits them; ``where``
(a new dataset) stays on it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from ..catalog.catalog import Catalog
from ..catalog.duplicates import DuplicateGroup
from .frames import files_table
from .rows import Params, Rows
from .session import SQLSession

if TYPE_CHECKING:
    import pandas

__all__ = ["SQLMethods"]
_D = TypeVar("_D", bound="SQLMethods")


class SQLMethods:
    """The SQL methods of ``Consumer`` (see the module docstring); ``_session`` is set by ``Consumer._attach``."""

    _session: SQLSession

    @property
    def catalog(self) -> Catalog:
        """The file catalog (SQLite under ``cache_dir``, or in memory with ``cache_dir=False``)."""
        return self._session.catalog

    def close(self) -> None:
        """Close the SQL and catalog connections and the source files kept open for reads (also done by
        ``with Consumer(...) as ds:``); what is used again later is opened again."""
        self._session.close()
        self._session.documents.source.close()

    def __enter__(self: _D) -> _D:
        return self

    def __exit__(self, *exc: object) -> None:  # closes the connections: ``with Consumer(...) as ds:``
        self.close()

    def sql(self, statement: str, params: Params = (), *, timeout: float | None = None, max_rows: int | None = None,
            dialect: str = "duckdb") -> Rows:
        """One read-only SQL statement over the view ``files``; limits: ``timeout=`` (s), ``max_rows=``."""
        return self._session.query(statement, params, timeout=timeout, max_rows=max_rows, dialect=dialect)

    def to_arrow(self, statement: str | None = None, params: Params = (), *, content: bool = False,
                 timeout: float | None = None) -> pa.Table:
        """A ``pyarrow.Table``: the ``files`` view (``statement=None``; ``content=True`` computes the content
        columns first) or a statement's result, straight from DuckDB's columnar result."""
        if statement is None:
            return self._session.files_arrow(content=content, timeout=timeout)
        return self._session.query_arrow(statement, params, timeout=timeout)

    def export_catalog(self, path: str | os.PathLike[str], *, content: bool = False) -> str:
        """Write the ``files`` view to a Parquet file (schema in ``docs/query.md``); returns its path."""
        from .export import write_parquet  # noqa: PLC0415
        return write_parquet(self.to_arrow(content=content), path)

    def duplicates(self) -> list[DuplicateGroup]:
        """Groups of files with equal bytes (``.members``: file_id, path, class; ``.cross_class``)."""
        return self._session.duplicates()

    def files_table(self) -> pandas.DataFrame:
        """The ``files`` view (see :meth:`sql`) as a pandas DataFrame (needs pandas)."""
        return files_table(self)
