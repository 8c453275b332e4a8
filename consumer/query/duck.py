"""The DuckDB engine of ``ds.sql`` and ``ds.where``: columnar, vectorised, parallel, read-only and sealed.

This module is the one home of the ``duckdb`` import. A :class:`DuckSQL` holds one dataset's ``files`` view:

- the dataset's own columns (:func:`consumer.query.table.dataset_columns`) as one Arrow table registered with
  DuckDB (zero-copy: DuckDB scans the Arrow buffers, which wrap the dataset's numpy arrays, memory maps
  included; only the columns a statement reads are scanned, and an integer narrower than the view's BIGINT is
  cast as it is scanned);
- the lazy columns (``description, mime`` from one libmagic pass; ``sha256, entropy, printable, zeros,
  histogram`` from one read of every file; ``path``; the derived ``file_id``, ``tokens``, ``samples``) as NULL
  constants of the view until a statement needs them. Which columns a statement uses is read from DuckDB's own
  parse tree (:mod:`consumer.query.statement`): a statement that names no lazy column (``SELECT count(*) FROM
  files``) runs no libmagic and reads no file. A ``*`` shows the libmagic columns (so it computes them) and the
  content columns as stored (NULL where never computed: a ``SELECT *`` does not read every file; name a content
  column to compute it). A statement
  that needs a group is first bound (``EXPLAIN``), so a broken statement computes nothing; then the group is
  computed once for the dataset (its loader caches it in the catalog) and the table re-registered;
- ``extension`` is an SQL expression over ``path`` (paid only by statements naming it);
- the content histogram functions (:mod:`consumer.query.functions`) and the byte predicates
  (:mod:`consumer.query.bytefuncs`) as DuckDB Python UDFs.

Sealed (:mod:`consumer.query.sealing`): an in-memory connection without external access or ``SET``, exactly one
SELECT reading only ``files`` and its own CTEs. ``memory_limit`` (default :data:`DEFAULT_MEMORY_LIMIT`) caps
DuckDB's memory. The statement runs under a deadline and Ctrl-C (:mod:`consumer.query.watched`); errors are
given SQLite's words and DuckDB's hints (:mod:`consumer.query.duck_errors`); a partial lazy group is computed
only for the files the filter can keep (:mod:`consumer.query.pushdown`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from duckdb.func import ARROW as ARROW_UDF

from ..errors import QueryError, short_repr
from .bounds import bound_generators
from .bytefuncs import BYTE_FUNCTIONS, ByteFunctions
from .documents import Relations, files_mode_views
from .duck_errors import engine_error
from .functions import SIGNATURES as HIST_SIGNATURES
from .functions import FunctionErrors, wrapped
from .pushdown import candidates
from .rows import Params, Rows, check_timeout, plain_params
from .sealing import ALLOWED_TABLE_FUNCTIONS, SEALED_CONFIG, checked_statement
from .sealing import REGISTERED_TABLE as _TABLE
from .statement import JSON, StatementUse, output_names
from .table import DERIVED_ALIASES, FILES_COLUMNS
from .watched import run_watched

__all__ = ["ALLOWED_TABLE_FUNCTIONS", "DEFAULT_MEMORY_LIMIT", "DuckSQL", "LazyGroup", "SEALED_CONFIG",
           "derived_groups"]

DEFAULT_MEMORY_LIMIT = "2GiB"
"""DuckDB's memory cap for one dataset's connection (``memory_limit=`` of :class:`DuckSQL` changes it)."""

_EXTENSION = r"lower(regexp_extract(path, '^(?:.*/)?\.*[^./][^/]*\.([^./]*)$', 1))"  # os.path.splitext's rule
_NULL_TYPES = {"entropy": "DOUBLE", "printable": "DOUBLE", "zeros": "DOUBLE", "histogram": "BLOB",
               "file_id": "BIGINT", "class_id": "BIGINT", "size": "BIGINT", "mtime_ns": "BIGINT", "tokens": "BIGINT",
               "samples": "BIGINT"}  # a column not computed yet is a NULL of its type (VARCHAR when not listed)
_PARSED_KEPT = 256  # checked statements remembered per engine


@dataclass
class LazyGroup:
    """Lazy columns computed together. ``load()`` gives their arrays (one entry per file) for every file;
    with ``partial``, ``load(ids)`` computes them for the files ``ids`` only (sorted file ids not computed
    before) and still returns full-length arrays (NULL where not computed yet). ``star``: whether ``*``
    computes them too."""

    columns: tuple[str, ...]
    load: Callable[..., dict[str, pa.Array]]
    star: bool = False
    partial: bool = False
    loaded: bool = False  # every file computed
    done: np.ndarray | None = None  # partial groups: bool per file, computed yet


def derived_groups(loaders: dict[str, Callable[[], pa.Array]]) -> list[LazyGroup]:
    """One lazy group per derived column (:func:`~consumer.query.table.derived_columns`), made when a statement
    names it, or a name that shows it (``doc_id`` shows ``file_id``), or expands ``*``."""
    return [LazyGroup((name, *DERIVED_ALIASES.get(name, ())), lambda name=name, load=load: {name: load()}, star=True)
            for name, load in loaders.items()]


def _fixed(fn: Callable[..., Any], n: int) -> Callable[..., Any]:
    """``fn(*args)`` with exactly ``n`` named parameters (DuckDB reads a UDF's arity from its signature)."""
    arities: dict[int, Callable[..., Any]] = {1: lambda a: fn(a), 2: lambda a, b: fn(a, b),
                                              3: lambda a, b, c: fn(a, b, c)}
    return arities[n]


class DuckSQL:
    """One dataset's read-only DuckDB connection over its ``files`` view (see the module docstring).

    ``columns``: the eager columns (:func:`~consumer.query.table.dataset_columns`; integers of any width, shown
    as BIGINT); ``lazy``: the lazy groups (the derived columns among them); ``rows``: the table's rows (None: the
    length of the first column); ``byte_functions``: the dataset's byte predicates (None: not available, e.g. a
    packed store); ``memory_limit``: DuckDB's cap (a size string); ``threads``: DuckDB's threads (None: one per core).
    """

    def __init__(self, columns: dict[str, pa.Array], lazy: Sequence[LazyGroup] = (), *,
                 byte_functions: ByteFunctions | None = None, memory_limit: str = DEFAULT_MEMORY_LIMIT,
                 threads: int | None = None, relations: Relations | None = None, rows: int | None = None):
        self._relations = relations  # a records dataset's documents/files relations (query/documents.py), or None
        self._columns = dict(columns)  # columns not (yet) here are NULL constants in the view: no array at all
        self._n = len(next(iter(self._columns.values()))) if rows is None else int(rows)  # rows of the table
        self._lazy = list(lazy)
        self._bytes = byte_functions
        self._memory_limit = memory_limit
        self._threads = threads
        self._hist_errors = FunctionErrors()
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._pid: int | None = None
        self._parsed: dict[str, tuple[JSON, StatementUse]] = {}
        # connections of the parent process, kept unused after a fork
        self._inherited: list[duckdb.DuckDBPyConnection] = []

    # ------------------------------------------------------------------ the connection
    def _table(self) -> pa.Table:
        extra = self._relations.names if self._relations is not None else ()
        return pa.table({c: self._columns[c] for c in (*FILES_COLUMNS, *extra) if c in self._columns})

    def _expression(self, c: str) -> str:
        """Column ``c`` of the view as an SQL expression over the registered table: the column (an integer of
        another width cast to its BIGINT), ``extension`` from ``path``, or a NULL of its type while lazy."""
        if c in self._columns:
            if _NULL_TYPES.get(c) == "BIGINT" and self._columns[c].type != pa.int64():
                return f'"{c}"::BIGINT'  # int32 lengths and class codes are scanned as stored
            return f'"{c}"'
        if c == "extension":
            return _EXTENSION if "path" in self._columns else "NULL::VARCHAR"
        return f"NULL::{_NULL_TYPES.get(c, 'VARCHAR')}"

    def _view(self, conn: duckdb.DuckDBPyConnection) -> None:
        """(Re)define ``files`` over the registered table: its columns, NULL constants of the right type for
        the lazy ones not computed yet, ``extension`` from ``path``."""
        views = files_mode_views if self._relations is None else self._relations.views
        for name, sql in views(self._expression, _TABLE):  # files and documents (query/documents.py)
            conn.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self._conn is not None:  # a forked child (a DataLoader worker): never touch the parent's instance,
            self._inherited.append(self._conn)  # not even to free it (its threads and locks did not fork)
        config = dict(SEALED_CONFIG, memory_limit=self._memory_limit)
        if self._threads is not None:
            config["threads"] = int(self._threads)
        conn = duckdb.connect(":memory:", config=config)
        for name, (args, result) in HIST_SIGNATURES.items():
            conn.create_function(name, _fixed(wrapped(name, self._hist_errors), len(args)),
                                 [conn.sqltype(a) for a in args],
                                 conn.sqltype(result), side_effects=False)
        if self._bytes is not None:
            for name, fn in self._bytes.functions().items():
                args, result = BYTE_FUNCTIONS[name]
                conn.create_function(name, _fixed(fn, len(args)), [conn.sqltype(a) for a in args],
                                     conn.sqltype(result),
                                     type=ARROW_UDF, side_effects=False)
        bound_generators(conn)  # one call builds at most MAX_GENERATED_BYTES: the timeout holds (bounds.py)
        self._publish(conn)
        conn.execute("SET lock_configuration = true")
        self._conn, self._pid = conn, os.getpid()
        return conn

    # ------------------------------------------------------------------ checks
    def _parse(self, conn: duckdb.DuckDBPyConnection, statement: str) -> tuple[JSON, StatementUse]:
        """The statement's parse tree and use, checked (remembered per statement text: a statement run again
        skips the parser round trip)."""
        known = self._parsed.get(statement)
        if known is None:
            known = self._parse_new(conn, statement)
            if len(self._parsed) >= _PARSED_KEPT:
                self._parsed.pop(next(iter(self._parsed)))
            self._parsed[statement] = known
        return known

    def _parse_new(self, conn: duckdb.DuckDBPyConnection, statement: str) -> tuple[JSON, StatementUse]:
        return checked_statement(conn, statement, lambda e: self._error(conn, statement, e))

    def _complete(self, conn: duckdb.DuckDBPyConnection, statement: str, params: Params | None, use: StatementUse,
                  tree: JSON) -> None:
        """Compute the lazy groups the statement uses, after binding it (a broken statement computes nothing).
        A partial group is computed only for the files the statement's filter can keep (:meth:`_candidates`)."""
        pending = [g for g in self._lazy if not g.loaded and use.needs(set(g.columns), star_includes=g.star)]
        if not pending:
            return
        if any(g.partial for g in pending):  # the files a filter keeps are found by their file_id
            pending += [g for g in self._lazy if not g.loaded and "file_id" in g.columns and g not in pending]
        try:
            conn.execute(f"EXPLAIN {statement}", params).fetchall() if params else \
                conn.execute(f"EXPLAIN {statement}").fetchall()
        except duckdb.Error as e:
            raise self._error(conn, statement, e) from None
        for group in [g for g in pending if not g.partial]:  # whole groups first: a filter may use them
            self._columns.update(group.load())
            group.loaded = True
        self._publish(conn)
        partial = [g for g in pending if g.partial]
        if not partial:
            return
        ids = self._candidates(conn, tree)
        for group in partial:
            n = self._rows()
            if group.done is None:
                group.done = np.zeros(n, dtype=bool)
            todo = np.flatnonzero(~group.done) if ids is None else ids[~group.done[ids]]
            if todo.size:
                self._columns.update(group.load(todo))
                group.done[todo] = True
            group.loaded = bool(group.done.all())
        self._publish(conn)

    def _publish(self, conn: duckdb.DuckDBPyConnection) -> None:
        for name, table in (self._relations.tables if self._relations is not None else {}).items():
            conn.register(name, table)
        conn.register(_TABLE, self._table())
        self._view(conn)

    def _rows(self) -> int:
        return self._n

    def _candidates(self, conn: duckdb.DuckDBPyConnection, tree: JSON) -> np.ndarray | None:
        """The file ids the statement's filter can keep (:func:`~consumer.query.pushdown.candidates`)."""
        if self._relations is not None:  # records: files are containers, the lazy columns are per document
            return None
        return candidates(conn, tree, {c for g in self._lazy if not g.loaded for c in g.columns})

    # ------------------------------------------------------------------ running
    def query(self, statement: str, params: Params = (), *, timeout: float | None = None,
              max_rows: int | None = None) -> Rows:
        """Run one read-only statement; returns :class:`~consumer.query.rows.Rows`.

        ``params``: ``?`` parameters (a sequence) or ``$name`` ones (a dict). ``timeout``: seconds it may run
        (None: no limit); past it, :class:`QueryError` naming the statement and the timeout. ``max_rows``: most
        rows the result may hold (one more is a QueryError). Ctrl-C stops it with ``KeyboardInterrupt``.
        A byte predicate meeting a file changed since indexing raises :class:`FileChangedError`.
        """
        seconds = check_timeout(timeout)
        if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 0):
            raise QueryError(f"max_rows must be an int >= 0 or None, got {short_repr(max_rows)}")
        bound = plain_params(params) if params else None
        conn, tree, use = self._prepare(statement, bound)
        rows, names = self._run(conn, statement, bound, seconds, max_rows)
        return Rows(rows, output_names(tree, statement, names))

    def query_arrow(self, statement: str, params: Params = (), *, timeout: float | None = None) -> pa.Table:
        """Run one read-only statement like :meth:`query`; the result as a ``pyarrow.Table`` (DuckDB's columnar
        result, no Python object per value), its columns named as :meth:`query` names them."""
        seconds = check_timeout(timeout)
        bound = plain_params(params) if params else None
        conn, tree, use = self._prepare(statement, bound)
        table, names = self._run(conn, statement, bound, seconds, None, arrow=True)
        return table.rename_columns(output_names(tree, statement, names))

    def _prepare(self, statement: str, params: Params | None
                 ) -> tuple[duckdb.DuckDBPyConnection, JSON, StatementUse]:
        if not isinstance(statement, str) or not statement.strip():
            raise QueryError(f"statement must be a non-empty SQL string, got {short_repr(statement)}")
        try:
            statement.encode("utf-8")
        except UnicodeEncodeError as e:
            raise QueryError(f"SQL error in {short_repr(statement, 200)}: {e}") from None
        if params is not None and not isinstance(params, (list, tuple, dict)):
            raise QueryError(f"params must be a sequence or a dict, got {short_repr(params)}")
        conn = self._connection()
        tree, use = self._parse(conn, statement)
        self._complete(conn, statement, params, use, tree)
        return conn, tree, use

    def _run(self, conn: duckdb.DuckDBPyConnection, statement: str, params: Params | None, seconds: float | None,
             max_rows: int | None, arrow: bool = False) -> tuple[Any, list[str]]:
        if self._bytes is not None:
            self._bytes.error = None
        self._hist_errors.last = None
        return run_watched(conn, statement, params, seconds, max_rows, lambda e: self._error(conn, statement, e),
                           arrow=arrow)

    # ------------------------------------------------------------------ errors
    def _error(self, conn: duckdb.DuckDBPyConnection, statement: str, e: BaseException) -> BaseException:
        """The documented error for what DuckDB (or a UDF) raised (:func:`~consumer.query.duck_errors.engine_error`)."""
        return engine_error(conn, statement, e, byte_functions=self._bytes, hist_errors=self._hist_errors,
                            columns=FILES_COLUMNS)

    def close(self) -> None:
        """Close the connection and the byte functions' threads (reopened when queried again)."""
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None
        if self._bytes is not None:
            self._bytes.close()
