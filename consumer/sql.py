"""Read-only SQL over the catalog, joined with one dataset's own per-file facts.

A dataset's connection sees one view, ``files``, with one row per file of the dataset::

    file_id      index in ds.files          class, class_id   the file's class and its id
    path, size, mtime_ns, extension         from the catalog (what "changed" is judged by)
    description, mime                       raw libmagic output
    header                                  the normalised header the tokens carry
    sha256                                  content hash (see below)
    tokens, samples                         document tokens, samples holding them (this dataset's settings)
    entropy, printable, zeros, histogram    byte statistics of the content (see :mod:`consumer.content`)

The content columns (sha256, entropy, printable, zeros, histogram) are computed on demand: a statement
that names one of them (:func:`consumer.content.named_content_columns`) first runs the dataset's
``ensure_content`` callback once, which fills the catalog for the files that lack them. With the
dataset's own ``identity`` (size and mtime per file) the view shows a content column only when the
catalog row describes that same version of the file, NULL otherwise: never a stale value. The SQL
functions of :mod:`consumer.sqlfuncs` (``hist_entropy``, ``hist_distance``, ...) are registered.

The catalog is opened read-only (``mode=ro``); the per-dataset rows live in a TEMP table. Every user
statement runs under an authorizer that allows only reading (SELECT, reads, functions, recursive
CTEs): writes, ATTACH, PRAGMA and schema changes are refused with :class:`QueryError`, and so is
more than one statement. SQL errors come back as :class:`QueryError` naming the statement.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence

import numpy as np

from .content import named_content_columns
from .errors import QueryError, short_repr
from .sqlfuncs import FunctionErrors, register_functions

__all__ = ["DatasetSQL", "Rows", "content_completer"]

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


class Rows(list):
    """Result rows (tuples) with the column names in ``columns``."""

    def __init__(self, rows, columns: list[str]):
        super().__init__(rows)
        self.columns = columns

    def as_dicts(self) -> list[dict]:
        """The rows as ``{column: value}`` dicts."""
        return [dict(zip(self.columns, r)) for r in self]

    def to_pandas(self):
        """The rows as a ``pandas.DataFrame`` (needs pandas: ``pip install "consumer[dataframes]"``)."""
        from .frames import rows_to_pandas  # noqa: PLC0415  (optional libraries load only when asked)

        return rows_to_pandas(self, self.columns)

    def to_arrow(self):
        """The rows as a ``pyarrow.Table`` (needs pyarrow: ``pip install "consumer[dataframes]"``)."""
        from .frames import rows_to_arrow  # noqa: PLC0415

        return rows_to_arrow(self, self.columns)

    def to_polars(self):
        """The rows as a ``polars.DataFrame`` (needs polars: ``pip install "consumer[dataframes]"``)."""
        from .frames import rows_to_polars  # noqa: PLC0415

        return rows_to_polars(self, self.columns)


def _authorize(action, arg1, arg2, db, trigger):  # noqa: ANN001 (sqlite3 callback signature)
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def content_completer(catalog, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray, *,
                      verbose: bool = False) -> Callable[[], int]:
    """The ``ensure_content`` callback of a dataset: fills the catalog's content columns of its files
    (``catalog.ensure_content``), holding no reference to the dataset object itself."""
    return lambda: catalog.ensure_content(paths, sizes, mtimes, verbose=verbose)


class DatasetSQL:
    """One dataset's read-only SQL connection (made lazily, remade after a fork).

    ``identity``: the dataset's ``(sizes, mtimes)`` per file_id; content columns are shown only for
    catalog rows of that version. ``ensure_content``: called once, before the first statement that
    names a content column (None: content columns are shown as stored, NULL where never computed).
    """

    def __init__(self, catalog_path: str | None, shared_conn: sqlite3.Connection | None, rows_factory, *,
                 identity: tuple[np.ndarray, np.ndarray] | None = None,
                 ensure_content: Callable[[], object] | None = None):
        self._catalog_path = catalog_path
        self._shared = shared_conn
        self._rows_factory = rows_factory  # () -> iterable of per-file tuples for the TEMP table
        self._identity = identity
        self._ensure_content = ensure_content
        self._content_ready = False
        self._errors = FunctionErrors()
        self._conn = None
        self._pid = None

    def _temp_rows(self):
        if self._identity is None:
            for row in self._rows_factory():
                yield (*row, None, None)
            return
        sizes, mtimes = (np.asarray(a).tolist() for a in self._identity)
        for row, s, t in zip(self._rows_factory(), sizes, mtimes, strict=True):
            yield (*row, s, t)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self._catalog_path is not None:
            conn = sqlite3.connect(f"file:{self._catalog_path}?mode=ro", uri=True, timeout=60.0,
                                   check_same_thread=False)
        else:
            conn = self._shared
        conn.set_authorizer(None)
        conn.execute("DROP VIEW IF EXISTS temp.files")
        conn.execute("DROP TABLE IF EXISTS temp.dataset_files")
        conn.execute("CREATE TEMP TABLE dataset_files(file_id INTEGER PRIMARY KEY, key BLOB, path TEXT, "
                     "class TEXT, class_id INTEGER, header TEXT, tokens INTEGER, samples INTEGER, "
                     "size INTEGER, mtime_ns INTEGER)")
        conn.executemany("INSERT INTO temp.dataset_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self._temp_rows())
        same = "(d.size IS NULL OR (c.size = d.size AND c.mtime_ns = d.mtime_ns))"  # this dataset's version
        content = ", ".join(f"CASE WHEN {same} THEN c.{col} END AS {col}"
                            for col in ("entropy", "printable", "zeros", "histogram"))
        conn.execute(
            "CREATE TEMP VIEW files AS SELECT d.file_id, d.path, d.class, d.class_id, c.size, c.mtime_ns, "
            f"c.extension, c.description, c.mime, d.header, CASE WHEN {same} THEN c.sha256 END AS sha256, "
            f"d.tokens, d.samples, {content} "
            "FROM temp.dataset_files AS d JOIN main.files AS c ON c.key = d.key")
        conn.commit()
        self._errors = register_functions(conn)
        self._conn, self._pid = conn, os.getpid()
        return conn

    def query(self, statement: str, params=()) -> Rows:
        """Run one read-only statement; returns :class:`Rows`."""
        if not isinstance(statement, str) or not statement.strip():
            raise QueryError(f"statement must be a non-empty SQL string, got {short_repr(statement)}")
        conn = self._connection()
        self._errors.last = None
        ensure = self._ensure_content if not self._content_ready and named_content_columns(statement) else None
        conn.set_authorizer(_authorize)
        try:
            if ensure is not None:  # compile first (EXPLAIN runs nothing): a refused or broken statement reads no file
                conn.execute(f"EXPLAIN {statement}", params).fetchall()
                conn.set_authorizer(None)
                ensure()
                self._content_ready = True
                conn.set_authorizer(_authorize)
            cur = conn.execute(statement, params)
            rows = cur.fetchall()
            columns = [c[0] for c in cur.description or []]
        except sqlite3.DatabaseError as e:
            if "not authorized" in str(e):
                raise QueryError(f"statement refused (only read-only SELECT statements are allowed): "
                                 f"{short_repr(statement, 200)}") from None
            detail = self._errors.last if self._errors.last and "user-defined function" in str(e) else e
            raise QueryError(f"SQL error in {short_repr(statement, 200)}: {detail}") from None
        except (sqlite3.ProgrammingError, sqlite3.Warning) as e:
            raise QueryError(f"SQL error in {short_repr(statement, 200)}: {e}") from None
        finally:
            conn.set_authorizer(None)
        return Rows(rows, columns)

    def close(self) -> None:
        """Close a private connection (the in-memory catalog's shared one stays open)."""
        if self._conn is not None and self._catalog_path is not None:
            self._conn.close()
        self._conn = None
