"""Opening the catalog file and reading and writing its rows, verified (see :mod:`consumer.catalog.catalog`).

:class:`CatalogFile` is the connection half of :class:`~consumer.catalog.catalog.Catalog`: it opens the SQLite
file (WAL mode; waiting for a lock held by another process), checks it (``integrity_check``, this version's
exact schema: :mod:`consumer.catalog.rows`), uses a catalog it cannot write from an in-memory copy
with a warning, moves a broken one aside (``catalog.sqlite.corrupt-<time>``, kept for inspection) and
starts a new one, and turns SQLite errors met while the catalog is used into documented errors naming
it. Rows are read through :meth:`CatalogFile._fetch`, which leaves out every row failing its check, and
written through :meth:`CatalogFile._put`, which adds the check.
"""

from __future__ import annotations

import errno
import functools
import os
import sqlite3
import time
import warnings
from collections.abc import Sequence
from contextlib import contextmanager
from typing import TypeVar

from ..errors import ConsumerWarning, FormatError, InputError
from ..util.fileio import file_size_limit, free_bytes, space_error
from .rows import COLUMNS, EXPECTED_SCHEMA, SCHEMA, SCHEMA_VERSION, schema_of, text_of, verified, with_check

__all__ = ["CatalogFile", "recovering"]

_C = TypeVar("_C", bound="CatalogFile")
_LOCK_WAIT = 60.0  # seconds a catalog locked by another process is waited for
# SQLite's primary result codes (sqlite3 exposes them only from Python 3.11 on, and typeshed not at all)
_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _AUTH = 3, 5, 6, 8, 10, 11, 13, 14, 23
_NOTADB = 26
_OPEN_BYTES = 64 << 10  # what opening a catalog may write (WAL header and index, a few pages), about
_SELECT = f"SELECT {', '.join(COLUMNS)}, row_check FROM main.files"
_INSERT = f"INSERT OR REPLACE INTO main.files({', '.join(COLUMNS)}, row_check) VALUES ({', '.join('?' * 13)})"


def _code(e: Exception) -> int:
    """SQLite's primary result code of an error (from its message on Pythons that do not expose it)."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF
    text = str(e)
    return _CORRUPT if "malformed" in text else _NOTADB if "not a database" in text else 0


def _out_of_room(e: Exception, path: str, need: int) -> int | None:
    """The errno of an SQLite error that means the catalog ``path`` could not grow by about ``need`` bytes:
    ``SQLITE_FULL`` is ENOSPC. SQLite reports other failed writes as I/O errors whatever their cause (EFBIG
    from a file-size limit, ENOSPC while sizing its ``-shm`` file, ...): an I/O error with less than ``need``
    bytes free there is ENOSPC, and one under a file-size limit (``RLIMIT_FSIZE``) is EFBIG. None otherwise."""
    if _code(e) == _FULL:
        return errno.ENOSPC
    if _code(e) == _IOERR or "disk I/O error" in str(e):
        free = free_bytes(os.path.dirname(path) or ".")
        if free is not None and free < need:
            return errno.ENOSPC
        if file_size_limit() is not None:
            return errno.EFBIG
    return None


def _check_schema(conn: sqlite3.Connection) -> None:
    """DatabaseError unless the catalog is exactly this version's: schema objects and schema version."""
    if schema_of(conn) != EXPECTED_SCHEMA:
        raise sqlite3.DatabaseError("the schema is not this version's (a table, column, trigger, view or index "
                                    "was changed, added or removed)")
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None or row[0] != SCHEMA_VERSION:
        raise sqlite3.DatabaseError(f"schema version {row and row[0]!r}, expected {SCHEMA_VERSION}")


def _memory() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.executescript(SCHEMA)
    conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
    conn.commit()
    return conn


def recovering(method):
    """Run a catalog operation; if SQLite finds the file corrupt meanwhile, move it aside, start a new
    catalog and run the operation once more (it is idempotent). Other SQLite errors become documented
    errors naming the catalog (:meth:`CatalogFile._use_error`). A ``UnicodeDecodeError`` (sqlite3 decodes
    the text of its error messages strictly, and a damaged schema puts bytes there) counts as corrupt."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            corrupt = isinstance(e, UnicodeDecodeError) or _code(e) in (_CORRUPT, _NOTADB)
            if self.path is None or not corrupt:
                raise self._use_error(e) from e
            self._restart()
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise self._use_error(e) from e
    return run


class CatalogFile:
    """The connection to one catalog (``path=None``: in memory) and its verified rows; see the module."""

    def __init__(self, path: str | None):
        self.path = path
        self._need = 0  # bytes the last write needed, about (see _put)
        self._connection = self._open()
        self._pid = os.getpid()

    @property
    def _conn(self) -> sqlite3.Connection:
        """The connection of this process: a forked child (a DataLoader worker) opens its own."""
        if self._pid != os.getpid() and self.path is not None:
            self._connection = self._connect_file()
            self._pid = os.getpid()
        return self._connection

    def _open(self) -> sqlite3.Connection:
        if self.path is None:
            return _memory()
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
        except OSError as e:
            return self._read_only(e)
        deadline = time.monotonic() + _LOCK_WAIT
        for attempt in range(1_000_000):
            try:
                return self._connect_file()
            except sqlite3.DatabaseError as e:
                code = _code(e)
                if code not in (_BUSY, _LOCKED):
                    return self._not_connected(e, code)
                # another process holds it (e.g. two builds switching a new catalog to WAL at once):
                # not corruption; SQLite's busy handler does not cover that switch, so wait here
                if time.monotonic() > deadline:
                    raise InputError(f"cache_dir: the catalog {self.path!r} stayed locked by another process "
                                     f"for {_LOCK_WAIT:.0f} s: {e}") from e
                time.sleep(min(0.01 * 2 ** attempt, 0.5))
        raise InputError(f"cache_dir: the catalog {self.path!r} could not be opened")

    def _not_connected(self, e: sqlite3.DatabaseError, code: int) -> sqlite3.Connection:
        """A catalog that would not open for a reason other than a lock: full disk, read-only, or corrupt."""
        path = self._file()
        full = _out_of_room(e, path, _OPEN_BYTES)
        if full is not None:
            raise space_error(path, _OPEN_BYTES, "cache_dir (the catalog; or pass cache_dir=False)", full) from e
        if code in (_READONLY, _CANTOPEN, _PERM, _AUTH, _IOERR):
            return self._read_only(e)
        return self._replace_broken()  # corrupt, not a database, another schema: really broken

    def _read_only(self, error: Exception) -> sqlite3.Connection:
        """A catalog we cannot write (read-only or immutable directory or file, no permission) is used from
        an in-memory copy: nothing is moved aside, new results are not saved, and a warning says so."""
        location, self.path = self.path, None  # from now on an in-memory catalog
        conn = _memory()
        try:
            src = sqlite3.connect(f"file:{location}?mode=ro&immutable=1", uri=True)
            try:
                _check_schema(src)
                src.backup(conn)
                _check_schema(conn)
            finally:
                src.close()
        except sqlite3.Error:  # absent, unreadable, corrupt or of another schema: start empty
            conn.close()
            conn = _memory()
        warnings.warn(f"cache_dir: the catalog {location!r} cannot be written ({error}): using it read-only from "
                      "memory; libmagic results of new files are not saved", ConsumerWarning, stacklevel=5)
        return conn

    def _replace_broken(self) -> sqlite3.Connection:
        """Move a catalog SQLite cannot use (corrupt, not a database, old schema) aside and start again.
        It is our own artefact, so moving it is allowed; it is kept for inspection, not deleted."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = self._file()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.replace(path + suffix, f"{path}.corrupt-{stamp}{suffix}")
        return self._connect_file()

    def _file(self) -> str:
        if self.path is None:
            raise InputError("catalog: an in-memory catalog has no file")
        return self.path

    def _connect_file(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._file(), timeout=60.0, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
            conn.commit()
            # integrity_check, not quick_check: only it finds a key index that disagrees with the table
            # (lookups then miss rows and writes add duplicate keys); about 1 s per million rows
            if conn.execute("PRAGMA integrity_check(1)").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("integrity_check failed")
            _check_schema(conn)  # another version, a table lacking a column, an added trigger: broken
        except sqlite3.DatabaseError:
            conn.close()
            raise
        except UnicodeDecodeError as e:  # sqlite3 decodes its messages strictly: a damaged schema's text
            conn.close()
            raise sqlite3.DatabaseError(f"database disk image is malformed (undecodable text: {e})") from None
        return conn

    def retain(self: _C) -> _C:
        """One more dataset uses this catalog (a subset shares its parent's); see :meth:`release`."""
        self._users = getattr(self, "_users", 0) + 1
        return self

    def release(self) -> None:
        """A dataset is done with the catalog: the connection closes when the last user releases it."""
        self._users = getattr(self, "_users", 1) - 1
        if self._users <= 0:
            self.close()

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The underlying connection (used by :mod:`consumer.query.sqlite` for in-memory catalogs)."""
        return self._conn

    def _restart(self) -> None:
        """The catalog file turned out corrupt while in use: move it aside and continue on a new one."""
        try:
            self._connection.close()
        except sqlite3.Error:
            pass
        self._connection = self._replace_broken()
        self._pid = os.getpid()

    def _use_error(self, e: sqlite3.DatabaseError | UnicodeDecodeError) -> Exception:
        """A documented error naming the catalog for an SQLite error met while using it."""
        where = self.path or "(in memory)"
        code = _code(e)
        need = max(self._need, _OPEN_BYTES)
        full = _out_of_room(e, where, need) if self.path is not None else None
        if full is not None:  # the transaction was rolled back: the catalog holds what it held before
            return space_error(where, need, "cache_dir (the catalog; or pass cache_dir=False)", full)
        if code in (_BUSY, _LOCKED):
            return InputError(f"cache_dir: the catalog {where!r} stayed locked by another process: {e}")
        return FormatError(f"catalog {where!r}: SQLite error while using it: {e}")

    @contextmanager
    def _reading(self):
        """One read transaction: every read inside sees the same state of the catalog (one WAL snapshot)."""
        conn = self._conn
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN")
        try:
            yield
        finally:
            try:
                conn.rollback()
            except sqlite3.Error:  # closed meanwhile: the catalog was found corrupt and replaced (recovering)
                pass

    @contextmanager
    def _writing(self):
        """One ``BEGIN IMMEDIATE`` transaction: the rows read inside it are the ones the writes replace."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def _fetch(self, keys: Sequence[bytes] | None) -> dict[bytes, tuple]:
        """Verified rows (their :data:`~consumer.catalog.rows.COLUMNS` values) by key, of ``keys`` or of all
        rows (None); a row failing its check is left out, so it is recomputed and rewritten like a new one."""
        out: dict[bytes, tuple] = {}
        conn = self._conn
        cur = conn.cursor()
        queries = [(_SELECT, ())] if keys is None else [
            (f"{_SELECT} WHERE key IN ({','.join('?' * len(keys[i:i + 900]))})", keys[i:i + 900])
            for i in range(0, len(keys), 900)]  # SQLite's bound-parameter limit
        for sql, params in queries:
            try:
                rows = cur.execute(sql, params).fetchall()
            except sqlite3.OperationalError as e:  # TEXT that is not UTF-8: read it escaped (slower), then
                if "decode" not in str(e):         # the row fails its check
                    raise
                conn.text_factory = text_of
                try:
                    rows = cur.execute(sql, params).fetchall()
                finally:
                    conn.text_factory = str
            for row in rows:
                values = verified(row)
                if values is not None:
                    out[values[0]] = values
        return out

    def _checks(self, keys: Sequence[bytes]) -> dict[bytes, str]:
        """The ``row_check`` of each row of ``keys`` that exists (not verified: a cheap read). Comparing two such
        reads tells which rows were written in between (by another process, under a work claim)."""
        out: dict[bytes, str] = {}
        cur = self._conn.cursor()
        for i in range(0, len(keys), 900):
            part = keys[i:i + 900]
            out.update(cur.execute(f"SELECT key, row_check FROM main.files WHERE key IN ({','.join('?' * len(part))})",
                                   part).fetchall())
        return out

    def _put(self, conn: sqlite3.Connection, rows: list[tuple]) -> None:
        checked = [with_check(r) for r in rows]
        # about what the write needs on disk (values, key index, WAL frame headers): for a full-disk error
        self._need = 2 * sum(len(v) if isinstance(v, (str, bytes)) else 8 for r in checked for v in r) + 4096
        conn.executemany(_INSERT, checked)
