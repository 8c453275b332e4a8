"""The DuckDB engine of ``ds.sql`` and ``ds.where``: columnar, vectorised, parallel, read-only and sealed.

This module is the one home of the ``duckdb`` import. A :class:`DuckSQL` holds one dataset's ``files`` view:

- the dataset's own columns (:func:`consumer.query.table.dataset_columns`) as one Arrow table registered with
  DuckDB (zero-copy: DuckDB scans the Arrow buffers, which wrap the dataset's numpy arrays);
- the lazy columns (``description, mime`` from one libmagic pass; ``sha256, entropy, printable, zeros,
  histogram`` from one read of every file; ``path``) as NULL constants of the view until a statement needs
  them. Which columns a statement uses is read from DuckDB's own parse tree (:mod:`consumer.query.statement`):
  a statement that names no lazy column (``SELECT count(*) FROM files``) runs no libmagic and reads no file.
  A ``*`` shows the libmagic columns (so it computes them) and the content columns as stored (NULL where
  never computed: a ``SELECT *`` does not read every file; name a content column to compute it). A statement
  that needs a group is first bound (``EXPLAIN``), so a broken statement computes nothing; then the group is
  computed once for the dataset (its loader caches it in the catalog) and the table re-registered;
- ``extension`` is an SQL expression over ``path`` (paid only by statements naming it);
- the content histogram functions (:mod:`consumer.query.functions`) and the byte predicates
  (:mod:`consumer.query.bytefuncs`) as DuckDB Python UDFs.

Sealed (each refusal is a :class:`QueryError` naming the statement): the connection is in-memory with
``enable_external_access=false`` (no file, URL, ``COPY``, ``ATTACH``, ``INSTALL``/``LOAD``), no Python
replacement scans, no extension auto-install or auto-load, and ``lock_configuration=true`` (no ``SET``);
exactly one statement of type SELECT is run; the only tables it may read are ``files`` and its own CTEs; the
only table functions are :data:`ALLOWED_TABLE_FUNCTIONS`. ``memory_limit`` (default
:data:`DEFAULT_MEMORY_LIMIT`) caps DuckDB's memory.

The statement runs in a worker thread while the calling thread waits: past ``timeout`` seconds, or on Ctrl-C
(``KeyboardInterrupt`` in the caller), ``connection.interrupt()`` stops it. A syntax error names the
position (character offset) DuckDB's parser reports. DuckDB's messages for a missing column, table or
function are given SQLite's words too (``no such column: x``), followed by DuckDB's own.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from duckdb.func import ARROW as ARROW_UDF

from ..errors import FileChangedError, QueryError, short_repr
from .bytefuncs import BYTE_FUNCTIONS, ByteFunctions
from .documents import files_mode_views
from .engine import Rows, _plain_params, check_timeout
from .functions import SIGNATURES as HIST_SIGNATURES
from .functions import FunctionErrors, wrapped
from .statement import StatementUse, analyse, output_names
from .table import FILES_COLUMNS

__all__ = ["ALLOWED_TABLE_FUNCTIONS", "DEFAULT_MEMORY_LIMIT", "DuckSQL", "LazyGroup", "SEALED_CONFIG"]

DEFAULT_MEMORY_LIMIT = "2GiB"
"""DuckDB's memory cap for one dataset's connection (``memory_limit=`` of :class:`DuckSQL` changes it)."""

ALLOWED_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "json_each", "json_tree"})
"""Table functions a statement may call in ``FROM`` (none of them reads anything outside the statement)."""

SEALED_CONFIG: dict[str, Any] = {
    "enable_external_access": False,     # no files, URLs, COPY, ATTACH, INSTALL, LOAD of external extensions
    "python_enable_replacements": False,  # FROM some_name never scans a Python variable of the caller
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
}
"""Connection settings of every engine connection (then ``lock_configuration=true``: no ``SET`` changes them)."""

_TABLE = "consumer_files"  # the registered Arrow table; statements may not name it
_EXTENSION = r"lower(regexp_extract(path, '^(?:.*/)?\.*[^./][^/]*\.([^./]*)$', 1))"  # os.path.splitext's rule
_POLL = 0.05  # seconds between two looks at the deadline while a statement runs
_FETCH = 10_000
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
    done: Any = None  # partial groups: bool per file, computed yet


def _fixed(fn: Callable, n: int) -> Callable:
    """``fn(*args)`` with exactly ``n`` named parameters (DuckDB reads a UDF's arity from its signature)."""
    arities: dict[int, Callable] = {1: lambda a: fn(a), 2: lambda a, b: fn(a, b), 3: lambda a, b, c: fn(a, b, c)}
    return arities[n]


def _conjuncts(node: Any) -> list[dict]:
    """The AND-ed parts of a WHERE clause (the clause itself when it is not an AND)."""
    if not isinstance(node, dict):
        return []
    if node.get("class") == "CONJUNCTION" and node.get("type") == "CONJUNCTION_AND":
        return [part for child in node.get("children") or [] for part in _conjuncts(child)]
    return [node]


def _has_parameter(node: dict) -> bool:
    stack: list[Any] = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if x.get("class") == "PARAMETER":
                return True
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return False


def _refused(reason: str, statement: str) -> QueryError:
    return QueryError(f"statement refused ({reason}): {short_repr(statement, 200)}")


_MISSING = ((re.compile(r'Referenced column "?([^"\s]+)"? not found'), "no such column"),
            (re.compile(r"Table with name \"?([^\"\s!]+)\"? does not exist"), "no such table"),
            (re.compile(r"Function with name \"?([^\"\s!]+)\"? does not exist"), "no such function"))


class DuckSQL:
    """One dataset's read-only DuckDB connection over its ``files`` view (see the module docstring).

    ``columns``: the eager columns (:func:`~consumer.query.table.dataset_columns`); ``lazy``: the lazy groups;
    ``byte_functions``: the dataset's byte predicates (None: not available, e.g. a packed store);
    ``memory_limit``: DuckDB's cap (a size string); ``threads``: DuckDB's threads (None: one per core).
    """

    def __init__(self, columns: dict[str, pa.Array], lazy: Sequence[LazyGroup] = (), *,
                 byte_functions: ByteFunctions | None = None, memory_limit: str = DEFAULT_MEMORY_LIMIT,
                 threads: int | None = None, relations: Any = None):
        self._relations = relations  # a records dataset's documents/files relations (query/documents.py), or None
        self._columns = dict(columns)  # columns not (yet) here are NULL constants in the view: no array at all
        self._lazy = list(lazy)
        self._bytes = byte_functions
        self._memory_limit = memory_limit
        self._threads = threads
        self._hist_errors = FunctionErrors()
        self._conn: Any = None
        self._pid: int | None = None
        self._parsed: dict[str, tuple[dict, StatementUse]] = {}
        self._inherited: list[Any] = []  # connections of the parent process, kept unused after a fork

    # ------------------------------------------------------------------ the connection
    def _table(self) -> pa.Table:
        extra = self._relations.names if self._relations is not None else ()
        return pa.table({c: self._columns[c] for c in (*FILES_COLUMNS, *extra) if c in self._columns})

    def _view(self, conn: Any) -> None:
        """(Re)define ``files`` over the registered table: its columns, NULL constants of the right type for
        the lazy ones not computed yet, ``extension`` from ``path``."""
        def column(c: str) -> str:
            if c in self._columns:
                return f'"{c}"'
            if c == "extension":
                return f"{_EXTENSION} AS extension" if "path" in self._columns else "NULL::VARCHAR AS extension"
            return f"NULL::{_NULL_TYPES.get(c, 'VARCHAR')} AS \"{c}\""

        views = files_mode_views if self._relations is None else self._relations.views
        for name, sql in views(column, _TABLE):  # files and documents (query/documents.py)
            conn.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")

    def _connection(self) -> Any:
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
                                 [duckdb.sqltype(a) for a in args],
                                 duckdb.sqltype(result), side_effects=False)
        if self._bytes is not None:
            for name, fn in self._bytes.functions().items():
                args, result = BYTE_FUNCTIONS[name]
                conn.create_function(name, _fixed(fn, len(args)), [duckdb.sqltype(a) for a in args],
                                     duckdb.sqltype(result),
                                     type=ARROW_UDF, side_effects=False)
        self._publish(conn)
        conn.execute("SET lock_configuration = true")
        self._conn, self._pid = conn, os.getpid()
        return conn

    # ------------------------------------------------------------------ checks
    def _parse(self, conn: Any, statement: str) -> tuple[dict, StatementUse]:
        """The statement's parse tree and use, checked (remembered per statement text: a statement run again
        skips the parser round trip)."""
        known = self._parsed.get(statement)
        if known is None:
            known = self._parse_new(conn, statement)
            if len(self._parsed) >= _PARSED_KEPT:
                self._parsed.pop(next(iter(self._parsed)))
            self._parsed[statement] = known
        return known

    def _parse_new(self, conn: Any, statement: str) -> tuple[dict, StatementUse]:
        try:
            statements = conn.extract_statements(statement)
        except duckdb.Error as e:
            raise self._error(conn, statement, e) from None
        if len(statements) != 1:
            raise _refused("only one statement at a time", statement)
        if statements[0].type != duckdb.StatementType.SELECT:
            raise _refused(f"only read-only SELECT statements are allowed, got {statements[0].type.name}",
                           statement)
        tree = json.loads(conn.execute("SELECT json_serialize_sql(?)", [statement]).fetchall()[0][0])
        if tree.get("error") or len(tree.get("statements") or []) != 1:
            raise QueryError(f"SQL error in {short_repr(statement, 200)}: {tree.get('error_message', tree)}")
        node = tree["statements"][0]
        use = analyse(node)
        for table in use.tables:
            if table not in ("files", "documents") and table not in use.ctes:
                if "/" in table or "." in table or table == _TABLE or table.startswith("consumer_"):
                    raise _refused(f"table {table!r} is not allowed; statements read the view files", statement)
                raise QueryError(f"SQL error in {short_repr(statement, 200)}: no such table: {table}")
        bad = sorted(use.table_functions - ALLOWED_TABLE_FUNCTIONS)
        if bad:
            raise _refused(f"table function {bad[0]}() is not allowed; allowed: "
                           f"{', '.join(sorted(ALLOWED_TABLE_FUNCTIONS))}", statement)
        return node, use

    def _complete(self, conn: Any, statement: str, params: Any, use: StatementUse, tree: dict) -> None:
        """Compute the lazy groups the statement uses, after binding it (a broken statement computes nothing).
        A partial group is computed only for the files the statement's filter can keep (:meth:`_candidates`)."""
        pending = [g for g in self._lazy if not g.loaded and use.needs(set(g.columns), star_includes=g.star)]
        if not pending:
            return
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

    def _publish(self, conn: Any) -> None:
        for name, table in (self._relations.tables if self._relations is not None else {}).items():
            conn.register(name, table)
        conn.register(_TABLE, self._table())
        self._view(conn)

    def _rows(self) -> int:
        return len(self._columns["file_id"])

    def _candidates(self, conn: Any, tree: dict) -> np.ndarray | None:
        """The file ids a statement's filter can keep, judged from the conjuncts of its ``WHERE`` that use no
        column still to compute (a row one of them rejects is rejected by the whole filter); None (every file)
        when that cannot be told: no such conjunct, a join, a CTE, set operations, parameters in them."""
        node = tree.get("node") or {}
        source = node.get("from_table") or {}
        if node.get("type") != "SELECT_NODE" or (node.get("cte_map") or {}).get("map") or \
                source.get("type") != "BASE_TABLE" or str(source.get("table_name", "")).lower() != "files" or \
                self._relations is not None:  # records: files are containers, the lazy columns are per document
            return None
        unknown = {c for g in self._lazy if not g.loaded for c in g.columns}
        keep = [c for c in _conjuncts(node.get("where_clause"))
                if not (analyse(c).columns & unknown) and not _has_parameter(c)]
        if not keep:
            return None
        where = keep[0] if len(keep) == 1 else {"class": "CONJUNCTION", "type": "CONJUNCTION_AND", "alias": "",
                                                 "children": keep}
        reduced = {"node": {"type": "SELECT_NODE", "modifiers": [], "cte_map": {"map": []},
                            "select_list": [{"class": "COLUMN_REF", "type": "COLUMN_REF", "alias": "",
                                             "column_names": ["file_id"]}],
                            "from_table": source, "where_clause": where, "group_expressions": [], "group_sets": [],
                            "aggregate_handling": "STANDARD_HANDLING", "having": None, "sample": None,
                            "qualify": None},
                   "named_param_map": []}
        try:
            sql = conn.execute("SELECT json_deserialize_sql(?)",
                               [json.dumps({"error": False, "statements": [reduced]})]).fetchall()[0][0]
            found = conn.sql(sql).fetchnumpy()["file_id"]
        except Exception:  # noqa: BLE001  (a shape this reduction does not cover: compute every file)
            return None
        return np.unique(np.asarray(found, dtype=np.int64))

    # ------------------------------------------------------------------ running
    def query(self, statement: str, params: Any = (), *, timeout: float | None = None,
              max_rows: int | None = None) -> Rows:
        """Run one read-only statement; returns :class:`~consumer.query.engine.Rows`.

        ``params``: ``?`` parameters (a sequence) or ``$name`` ones (a dict). ``timeout``: seconds it may run
        (None: no limit); past it, :class:`QueryError` naming the statement and the timeout. ``max_rows``: most
        rows the result may hold (one more is a QueryError). Ctrl-C stops it with ``KeyboardInterrupt``.
        A byte predicate meeting a file changed since indexing raises :class:`FileChangedError`.
        """
        seconds = check_timeout(timeout)
        if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 0):
            raise QueryError(f"max_rows must be an int >= 0 or None, got {short_repr(max_rows)}")
        params = _plain_params(params) if params else None
        conn, tree, use = self._prepare(statement, params)
        rows, names = self._run(conn, statement, params, seconds, max_rows)
        return Rows(rows, output_names(tree, statement, names))

    def query_arrow(self, statement: str, params: Any = (), *, timeout: float | None = None) -> pa.Table:
        """Run one read-only statement like :meth:`query`; the result as a ``pyarrow.Table`` (DuckDB's columnar
        result, no Python object per value), its columns named as :meth:`query` names them."""
        seconds = check_timeout(timeout)
        params = _plain_params(params) if params else None
        conn, tree, use = self._prepare(statement, params)
        table, names = self._run(conn, statement, params, seconds, None, arrow=True)
        return table.rename_columns(output_names(tree, statement, names))

    def _prepare(self, statement: str, params: Any) -> tuple[Any, dict, StatementUse]:
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

    def _run(self, conn: Any, statement: str, params: Any, seconds: float | None,
             max_rows: int | None, arrow: bool = False) -> tuple[Any, list[str]]:
        box: dict[str, Any] = {}
        done = threading.Event()
        if self._bytes is not None:
            self._bytes.error = None
        self._hist_errors.last = None

        def work() -> None:
            try:
                if arrow:
                    table = conn.sql(statement, params=params).to_arrow_table()
                    box["out"] = (table, list(table.column_names))
                    return
                cur = conn.execute(statement, params) if params is not None else conn.execute(statement)
                names = [d[0] for d in cur.description or []]
                if max_rows is None:
                    rows = cur.fetchall()
                else:
                    rows = []
                    while True:
                        chunk = cur.fetchmany(min(max_rows + 1 - len(rows), _FETCH) or 1)
                        rows.extend(chunk)
                        if len(rows) > max_rows or not chunk:
                            break
                    if chunk:
                        conn.abort()  # the rest of the result is not wanted: the connection is free again
                box["out"] = (rows, names)
            except BaseException as e:  # noqa: BLE001  (handed to the waiting thread)
                box["error"] = e
                try:
                    conn.abort()  # whatever result was left half-read, the connection is free again
                except duckdb.Error:
                    pass
            finally:
                done.set()

        worker = threading.Thread(target=work, name="consumer-sql", daemon=True)
        deadline = None if seconds is None else time.monotonic() + seconds
        timed_out = False
        worker.start()
        try:
            while not done.wait(_POLL):
                if deadline is not None and time.monotonic() > deadline:
                    timed_out = True
                    conn.interrupt()
                    done.wait()
        except KeyboardInterrupt:
            conn.interrupt()
            done.wait()
            raise KeyboardInterrupt(f"SQL statement interrupted: {short_repr(statement, 200)}") from None
        worker.join()
        if "error" in box:
            e = box["error"]
            if timed_out:
                raise QueryError(f"statement stopped after the timeout of {seconds:g} s: "
                                 f"{short_repr(statement, 200)}") from None
            raise self._error(conn, statement, e) from None
        rows, names = box["out"]
        if max_rows is not None and len(rows) > max_rows:
            raise QueryError(f"statement returned more than max_rows={max_rows} rows (add a LIMIT or raise "
                             f"max_rows): {short_repr(statement, 200)}")
        return rows, names

    # ------------------------------------------------------------------ errors
    def _error(self, conn: Any, statement: str, e: BaseException) -> BaseException:
        """The documented error for what DuckDB (or a UDF) raised while running ``statement``."""
        cause = self._bytes.error if self._bytes is not None else None
        if cause is not None:
            self._bytes.error = None  # type: ignore[union-attr]
            if isinstance(cause, FileChangedError):
                return FileChangedError(f"{cause} (in {short_repr(statement, 200)})")
            return QueryError(f"SQL error in {short_repr(statement, 200)}: {cause}")
        if not isinstance(e, duckdb.Error):
            if isinstance(e, (QueryError, KeyboardInterrupt)):
                return e
            return QueryError(f"SQL error in {short_repr(statement, 200)}: {e}")
        if isinstance(e, duckdb.InterruptException):  # a Ctrl-C DuckDB saw itself (outside the worker's wait)
            return KeyboardInterrupt(f"SQL statement interrupted: {short_repr(statement, 200)}")
        message = str(e).strip()
        first = message.split("\n", 1)[0]
        if self._hist_errors.last and "UDF" in message:
            return QueryError(f"SQL error in {short_repr(statement, 200)}: {self._hist_errors.last}")
        if isinstance(e, duckdb.PermissionException):
            return _refused(first, statement)
        if isinstance(e, duckdb.ParserException):
            where = self._syntax_position(conn, statement)
            return QueryError(f"SQL error in {short_repr(statement, 200)}: {first}{where}")
        for pattern, words in _MISSING:
            m = pattern.search(first)
            if m:
                return QueryError(f"SQL error in {short_repr(statement, 200)}: {words}: {m.group(1)} ({first})")
        return QueryError(f"SQL error in {short_repr(statement, 200)}: {first}")

    @staticmethod
    def _syntax_position(conn: Any, statement: str) -> str:
        try:
            info = json.loads(conn.execute("SELECT json_serialize_sql(?)", [statement]).fetchall()[0][0])
            at = int(info["position"])
        except Exception:  # noqa: BLE001  (no position known: the message alone)
            return ""
        raw = statement.encode("utf-8")
        char = len(raw[:at].decode("utf-8", "ignore"))  # DuckDB counts bytes
        line = statement.count("\n", 0, char) + 1
        column = char - (statement.rfind("\n", 0, char) + 1) + 1
        return f" at position {char} (line {line}, column {column})"

    def close(self) -> None:
        """Close the connection and the byte functions' threads (reopened when queried again)."""
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None
        if self._bytes is not None:
            self._bytes.close()
