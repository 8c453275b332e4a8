"""Read-only SQL over the catalog, joined with one dataset's own per-file facts (SQLite: ``dialect="sqlite"``).

Since #18 ``ds.sql`` runs on DuckDB (:mod:`consumer.query.duck`); this SQLite engine of 0.2 answers
``ds.sql(..., dialect="sqlite")``. Both engines return :class:`~consumer.query.rows.Rows` and check their
arguments with :mod:`consumer.query.rows`.

A dataset's connection sees one view, ``files``, with one row per file of the dataset::

    file_id      index in ds.files          class, class_id   the file's class and its id
    path, size, mtime_ns, extension         from the catalog (what "changed" is judged by)
    description, mime                       raw libmagic output
    header                                  the normalised header the tokens carry
    sha256                                  content hash (see below)
    tokens, samples                         document tokens, samples holding them (this dataset's settings)
    entropy, printable, zeros, histogram    byte statistics of the content (see :mod:`consumer.catalog.content`)

The content columns (sha256, entropy, printable, zeros, histogram) are computed on demand: a statement
that names one of them (:func:`consumer.catalog.content.named_content_columns`) first runs the dataset's
``ensure_content`` callback once, which fills the catalog for the files that lack them. With the
dataset's own ``identity`` (size and mtime per file) the view shows a content column only when the
catalog row describes that same version of the file, NULL otherwise: never a stale value. The SQL
functions of :mod:`consumer.query.functions` (``hist_entropy``, ``hist_distance``, ...) are registered.

The catalog is opened read-only (``mode=ro``); the per-dataset rows live in a TEMP table. Every user
statement runs under an authorizer that allows only reading (SELECT, reads, recursive CTEs) and only
the SQL functions of :data:`ALLOWED_FUNCTIONS` (SQLite's core, aggregate, window, date/time, math and
JSON functions): writes, ATTACH, PRAGMA, schema changes and every other function (``load_extension``,
``fts3_tokenizer``, ``readfile``, ...) are refused with :class:`QueryError`, and so is more than one
statement. SQL errors come back as :class:`QueryError` naming the statement.

Nothing hangs: SQLite calls a progress handler every :data:`PROGRESS_STEPS` virtual-machine
instructions, which stops the statement once ``timeout`` seconds have passed (:class:`QueryError`
naming the statement and the timeout) and lets Ctrl-C (``KeyboardInterrupt``) through even in a
statement that never returns a row. While a statement runs, a value (string or blob) is limited to
:data:`MAX_VALUE_BYTES`, so ``zeroblob(1e9)`` or ``printf('%.*c', 1e9, 'x')`` cannot take gigabytes.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..catalog.content import named_content_columns
from ..errors import ConsumerError, QueryError, short_repr
from .functions import FUNCTIONS as SQL_FUNCTIONS
from .functions import FunctionErrors, register_functions
from .rows import Params, Row, Rows, check_timeout, plain_params

__all__ = ["ALLOWED_FUNCTIONS", "MAX_VALUE_BYTES", "PROGRESS_STEPS", "DatasetSQL"]

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
_SCHEMA_TABLES = {"sqlite_master", "sqlite_temp_master", "sqlite_schema", "sqlite_temp_schema"}

_FUNCTION_NAMES = """
abs char coalesce concat concat_ws format glob hex ifnull iif if instr length like likelihood likely lower ltrim
max min nullif octet_length printf quote random randomblob replace round rtrim sign soundex sqlite_version substr
substring trim typeof unhex unicode unlikely upper zeroblob
avg count group_concat string_agg sum total
row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
date time datetime julianday unixepoch strftime timediff current_date current_time current_timestamp
acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10 log2 mod pi pow power
radians sin sinh sqrt tan tanh trunc
json jsonb json_array json_array_length json_error_position json_extract json_insert json_object json_patch
json_pretty json_quote json_remove json_replace json_set json_type json_valid json_group_array json_group_object
-> ->>
"""  # lines: core scalar; aggregate; window; date and time; math (2); JSON (2; -> and ->> are functions too)
ALLOWED_FUNCTIONS = frozenset(_FUNCTION_NAMES.split()) | frozenset(SQL_FUNCTIONS)
"""SQL functions a statement may call (case-insensitive): SQLite's read-only built-ins and the content
histogram functions of :mod:`consumer.query.functions`; any other function is refused."""

PROGRESS_STEPS = 10_000
"""SQLite virtual-machine instructions between two checks of the timeout and of Ctrl-C."""

MAX_VALUE_BYTES = 64 * 2**20
"""Largest string or blob a user statement may build (SQLite's length limit while it runs; Python >= 3.11)."""
_LIMIT_LENGTH = getattr(sqlite3, "SQLITE_LIMIT_LENGTH", None) if hasattr(sqlite3.Connection, "setlimit") else None


class _Authorizer:
    """SQLite authorizer of user statements: reading and the allowed functions only; remembers the first refusal."""

    __slots__ = ("refused",)

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
        if action == sqlite3.SQLITE_FUNCTION:  # arg2 is the function's name
            if isinstance(arg2, str) and arg2.lower() in ALLOWED_FUNCTIONS:
                return sqlite3.SQLITE_OK
            self.refused = self.refused or f"function {arg2}() is not in the allowed list"
            return sqlite3.SQLITE_DENY
        if action in _ALLOWED:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_UPDATE and arg1 in _SCHEMA_TABLES:
            # table-valued functions (json_each) declare their columns through the schema; SQLite itself
            # refuses a user's UPDATE of the schema table
            return sqlite3.SQLITE_OK
        self.refused = self.refused or "only read-only SELECT statements are allowed"
        return sqlite3.SQLITE_DENY


class _Watchdog:
    """SQLite progress handler: stops the statement after the deadline; records why it stopped."""

    __slots__ = ("deadline", "timed_out")

    def __init__(self, timeout: float | None) -> None:
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.timed_out = False

    def __call__(self) -> int:
        # A pending Ctrl-C raises KeyboardInterrupt here (Python runs signal handlers between bytecodes);
        # sqlite3 then aborts the statement ("interrupted") and the caller re-raises it.
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.timed_out = True
            return 1
        return 0


def _fetch_at_most(cur: sqlite3.Cursor, max_rows: int, statement: str) -> list[Row]:
    rows: list[Row] = []
    while True:
        chunk = cur.fetchmany(min(max_rows + 1 - len(rows), 10_000) or 1)
        rows.extend(chunk)
        if len(rows) > max_rows:
            raise QueryError(f"statement returned more than max_rows={max_rows} rows (add a LIMIT or raise "
                             f"max_rows): {short_repr(statement, 200)}")
        if not chunk:
            return rows


class DatasetSQL:
    """One dataset's read-only SQL connection (made lazily, remade after a fork).

    ``identity``: the dataset's ``(sizes, mtimes)`` per file_id; content columns are shown only for
    catalog rows of that version. ``ensure_content``: called once, before the first statement that
    names a content column (None: content columns are shown as stored, NULL where never computed).
    """

    def __init__(self, catalog_path: str | None, shared_conn: sqlite3.Connection | None,
                 rows_factory: Callable[[], Iterable[tuple[object, ...]]], *,
                 identity: tuple[np.ndarray, np.ndarray] | None = None,
                 ensure_content: Callable[[], object] | None = None):
        self._catalog_path = catalog_path
        self._shared = shared_conn
        self._rows_factory = rows_factory  # () -> iterable of per-file tuples for the TEMP table
        self._identity = identity
        self._ensure_content = ensure_content
        self._content_ready = False
        self._errors = FunctionErrors()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None

    def _temp_rows(self) -> Iterator[tuple[object, ...]]:
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
        elif self._shared is not None:
            conn = self._shared
        else:
            raise QueryError("statement: this dataset has no catalog to query")
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

    def query(self, statement: str, params: Params = (), *, timeout: float | None = None,
              max_rows: int | None = None) -> Rows:
        """Run one read-only statement; returns :class:`Rows`.

        ``timeout``: seconds the statement may run (None: no limit); past it, :class:`QueryError` naming
        the statement and the timeout. ``max_rows``: most rows the result may hold (None: no limit); one
        more is a :class:`QueryError` (rows are fetched in chunks, so a statement yielding rows forever
        stops there instead of filling memory). Ctrl-C stops a running statement with ``KeyboardInterrupt``.
        """
        if not isinstance(statement, str) or not statement.strip():
            raise QueryError(f"statement must be a non-empty SQL string, got {short_repr(statement)}")
        seconds = check_timeout(timeout)
        if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 0):
            raise QueryError(f"max_rows must be an int >= 0 or None, got {short_repr(max_rows)}")
        conn = self._connection()
        self._errors.last = None
        ensure = self._ensure_content if not self._content_ready and named_content_columns(statement) else None
        watchdog = _Watchdog(seconds)
        old_length = conn.setlimit(_LIMIT_LENGTH, MAX_VALUE_BYTES) if _LIMIT_LENGTH is not None else None
        authorizer = _Authorizer()
        conn.set_authorizer(authorizer)
        conn.set_progress_handler(watchdog, PROGRESS_STEPS)
        try:
            if ensure is not None:  # compile first (EXPLAIN runs nothing): a refused or broken statement reads no file
                conn.execute(f"EXPLAIN {statement}", plain_params(params)).fetchall()
                conn.set_authorizer(None)
                ensure()
                self._content_ready = True
                conn.set_authorizer(authorizer)
            cur = conn.execute(statement, plain_params(params))
            rows = cur.fetchall() if max_rows is None else _fetch_at_most(cur, max_rows, statement)
            columns = [c[0] for c in cur.description or []]
        except ConsumerError:  # max_rows; the content pass's own errors (a file changed, a full disk) as they are
            raise
        except sqlite3.DatabaseError as e:
            if watchdog.timed_out:
                raise QueryError(f"statement stopped after the timeout of {seconds:g} s: "
                                 f"{short_repr(statement, 200)}") from None
            if "interrupted" in str(e):  # the progress handler raised: a Ctrl-C arrived while SQLite ran
                raise KeyboardInterrupt(f"SQL statement interrupted: {short_repr(statement, 200)}") from None
            if "not authorized" in str(e):
                raise QueryError(f"statement refused ({authorizer.refused or 'not authorized'}): "
                                 f"{short_repr(statement, 200)}") from None
            detail = self._errors.last if self._errors.last and "user-defined function" in str(e) else e
            raise QueryError(f"SQL error in {short_repr(statement, 200)}: {detail}") from None
        except (sqlite3.Error, sqlite3.Warning, OverflowError, ValueError) as e:  # binding errors, bad text
            raise QueryError(f"SQL error in {short_repr(statement, 200)}: {e}") from None
        finally:
            conn.set_progress_handler(None, 0)
            conn.set_authorizer(None)
            if old_length is not None and _LIMIT_LENGTH is not None:
                conn.setlimit(_LIMIT_LENGTH, old_length)
        return Rows(rows, columns)

    def close(self) -> None:
        """Close a private connection (the in-memory catalog's shared one stays open)."""
        if self._conn is not None and self._catalog_path is not None:
            self._conn.close()
        self._conn = None
