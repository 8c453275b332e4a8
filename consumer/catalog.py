"""The file catalog: an embedded SQLite database (WAL mode) with one row per file ever seen.

Layout (``<cache_dir>/catalog.sqlite``, or ``:memory:`` when caching is off)::

    meta(key TEXT PRIMARY KEY, value TEXT)           -- schema version
    files(key BLOB PRIMARY KEY,                      -- the absolute path's bytes (os.fsencode): exact
          path TEXT,                                 -- the same path as text (undecodable bytes escaped)
          size INTEGER, mtime_ns INTEGER,            -- what "changed" is judged by
          extension TEXT,                            -- lower-case, without the dot ('' if none)
          description TEXT, mime TEXT,               -- raw libmagic output, NULL until computed
          sha256 TEXT,                               -- content hash, NULL unless asked for
          entropy REAL, printable REAL, zeros REAL,  -- content statistics (consumer.content), NULL until
          histogram BLOB,                            --   computed; reset to NULL when the file changes
          row_check TEXT)                            -- digest of the row (consumer.catalog_rows)

It caches the expensive libmagic results: :meth:`Catalog.sync` runs libmagic only on files that
are new, whose size or change stamp changed, or that lack the column asked for (description or MIME
type), and commits every chunk of files in its own transaction. A build killed part-way keeps what it
committed; the next one continues from there and ends with the same rows as an uninterrupted build.
Several processes may sync the same catalog at once (SQLite's locking, a busy timeout, one
``BEGIN IMMEDIATE`` transaction per chunk that reads the rows it merges with and writes them).

The content columns (sha256, entropy, printable, zeros, histogram; see :mod:`consumer.content`) are
filled by :meth:`Catalog.ensure_content`, only for files that lack them or whose size or mtime changed;
any refresh of a changed file clears the columns it does not recompute, so no column ever describes
an older version of the file than its size and mtime.

Verified when read (see :mod:`consumer.catalog_rows`): every row carries a digest of all its columns
(``row_check``) and a row that fails it, or whose ``path`` / ``extension`` are not derived from its key,
is treated as absent (recomputed and rewritten); the schema must be exactly this version's. A catalog
that SQLite cannot read (corrupt, truncated, not a database), of another schema version or schema, or
that SQLite finds corrupt while it is used, is moved aside (``catalog.sqlite.corrupt-<time>``, kept for
inspection) and rebuilt; an operation interrupted by such corruption runs once more on the new catalog.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from .catalog_rows import (
    COLUMNS,
    EXPECTED_SCHEMA,
    SCHEMA,
    SCHEMA_VERSION,
    display_path,
    extension_of,
    path_key,
    schema_of,
    text_of,
    verified,
    with_check,
)
from .content import READ_CHUNK, compute_content
from .errors import ConsumerWarning, FileChangedError, FormatError, InputError
from .fileio import sha256_file
from .filemeta import describe_files

__all__ = ["Catalog", "CATALOG_NAME", "SCHEMA_VERSION", "display_path", "path_key"]

CATALOG_NAME = "catalog.sqlite"
_CHUNK = 512  # files per libmagic chunk and per committed transaction
_MAGIC_COLUMNS = ("description", "mime")
_LOCK_WAIT = 60.0  # seconds a catalog locked by another process is waited for
# SQLite's primary result codes (sqlite3 exposes them only from Python 3.11 on, and typeshed not at all)
_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _AUTH = 3, 5, 6, 8, 10, 11, 13, 14, 23
_NOTADB = 26
_NO_ROW = (None,) * len(COLUMNS)  # an absent row: equal to no size or mtime
_SELECT = f"SELECT {', '.join(COLUMNS)}, row_check FROM main.files"
_INSERT = f"INSERT OR REPLACE INTO main.files({', '.join(COLUMNS)}, row_check) VALUES ({', '.join('?' * 13)})"


def _code(e: sqlite3.Error) -> int:
    """SQLite's primary result code of an error (from its message on Pythons that do not expose it)."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF
    text = str(e)
    return _CORRUPT if "malformed" in text else _NOTADB if "not a database" in text else 0


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
    conn.text_factory = text_of
    conn.executescript(SCHEMA)
    conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
    conn.commit()
    return conn


def _recovering(method):
    """Run a catalog operation; if SQLite finds the file corrupt meanwhile, move it aside, start a new
    catalog and run the operation once more (it is idempotent). Other SQLite errors become documented
    errors naming the catalog (:meth:`Catalog._use_error`)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as e:
            if self.path is None or _code(e) not in (_CORRUPT, _NOTADB):
                raise self._use_error(e) from e
            self._restart()
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as e:
            raise self._use_error(e) from e
    return run


class Catalog:
    """One SQLite catalog. ``path=None`` keeps it in memory (``cache_dir=False``)."""

    def __init__(self, path: str | None):
        self.path = path
        self.magic_calls = 0  # libmagic calls made by this object (one per file and column computed)
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
        if code == _FULL:
            raise InputError(f"cache_dir {os.path.dirname(path)!r}: no space left for the catalog {path!r}; "
                             "free space, pass another cache_dir= or cache_dir=False") from e
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
            src.text_factory = text_of
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
                      "memory; libmagic results of new files are not saved", ConsumerWarning, stacklevel=4)
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
        conn.text_factory = text_of
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
            conn.commit()
            if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            _check_schema(conn)  # another version, a table lacking a column, an added trigger: broken
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def retain(self) -> Catalog:
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
        """The underlying connection (used by :mod:`consumer.sql` for in-memory catalogs)."""
        return self._conn

    def _restart(self) -> None:
        """The catalog file turned out corrupt while in use: move it aside and continue on a new one."""
        try:
            self._connection.close()
        except sqlite3.Error:
            pass
        self._connection = self._replace_broken()
        self._pid = os.getpid()

    def _use_error(self, e: sqlite3.DatabaseError) -> Exception:
        """A documented error naming the catalog for an SQLite error met while using it."""
        where = self.path or "(in memory)"
        code = _code(e)
        if code == _FULL:
            return InputError(f"cache_dir {os.path.dirname(where)!r}: no space left for the catalog {where!r}; free "
                              "space, pass another cache_dir= or cache_dir=False")
        if code in (_BUSY, _LOCKED):
            return InputError(f"cache_dir: the catalog {where!r} stayed locked by another process: {e}")
        return FormatError(f"catalog {where!r}: SQLite error while using it: {e}")

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
        """Verified rows (their :data:`~consumer.catalog_rows.COLUMNS` values) by key, of ``keys`` or of all
        rows (None); a row failing its check is left out, so it is recomputed and rewritten like a new one."""
        out: dict[bytes, tuple] = {}
        cur = self._conn.cursor()
        parts = [cur.execute(_SELECT)] if keys is None else (
            cur.execute(f"{_SELECT} WHERE key IN ({','.join('?' * len(keys[i:i + 900]))})", keys[i:i + 900])
            for i in range(0, len(keys), 900))  # SQLite's bound-parameter limit
        for part in parts:
            for row in part.fetchall():
                values = verified(row)
                if values is not None:
                    out[values[0]] = values
        return out

    def _put(self, conn: sqlite3.Connection, rows: list[tuple]) -> None:
        conn.executemany(_INSERT, [with_check(r) for r in rows])

    @_recovering
    def rows(self, paths: Sequence[str]) -> dict[str, tuple]:
        """``{path: (size, mtime_ns, description, mime, sha256)}`` for the given paths with a verified row."""
        keys = [path_key(p) for p in paths]
        found = self._fetch(keys)
        return {p: found[k][2:4] + found[k][5:8] for p, k in zip(paths, keys) if k in found}

    @_recovering
    def sync(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray, *, want: Sequence[str] = (),
             hashes: bool = False, verbose: bool = False,
             describe: Callable[..., Iterator[tuple[str | None, str | None]]] | None = None
             ) -> tuple[list[str | None], list[str | None]]:
        """Bring the rows of ``paths`` up to date and return their (descriptions, mimes).

        A row is refreshed when it is missing, its size or mtime differ, or it lacks a column of
        ``want`` (``"description"``, ``"mime"``: libmagic runs only for those) or, with ``hashes``, its
        content hash. Every chunk of files is committed on its own. Columns not wanted may be None.
        ``describe(paths, kinds=, verbose=, chunk=)`` replaces local libmagic (remote objects are described
        from byte ranges; see :mod:`consumer.remote_meta`).
        """
        want = tuple(want)
        unknown = [w for w in want if w not in _MAGIC_COLUMNS]
        if unknown:
            raise InputError(f"want: unknown column(s) {unknown}; libmagic gives {list(_MAGIC_COLUMNS)}")
        known = self.rows(paths)
        sizes_l, mtimes_l = sizes.tolist(), mtimes.tolist()
        cols = {w: 2 + _MAGIC_COLUMNS.index(w) for w in want}
        stale: dict[tuple[str, ...], list[int]] = {}  # what each stale file needs computed -> files
        for i, p in enumerate(paths):
            row = known.get(p)
            fresh = row is not None and row[0] == sizes_l[i] and row[1] == mtimes_l[i]
            needed = tuple(w for w in want if row is None or not fresh or row[cols[w]] is None)
            if needed or row is None or not fresh or (hashes and row[4] is None):
                stale.setdefault(needed, []).append(i)
        for needed, files in stale.items():
            self._refresh(paths, sizes_l, mtimes_l, files, want=needed, hashes=hashes, verbose=verbose,
                          describe=describe or describe_files)
        if stale:
            known = self.rows(paths)
        lost = [p for p in paths if p not in known]
        if lost:
            raise FormatError(f"catalog {self.path or '(in memory)'!r}: {len(lost)} row(s) written do not read back "
                              f"verified, e.g. {lost[0]!r} (changed by another program meanwhile?)")
        desc = [known[p][2] for p in paths]
        mime = [known[p][3] for p in paths]
        return desc, mime

    def _refresh(self, paths, sizes, mtimes, stale, *, want, hashes, verbose, describe) -> None:
        todo = [paths[i] for i in stale]
        results = describe(todo, kinds=want, verbose=verbose, chunk=_CHUNK) if want else None
        for start in range(0, len(stale), _CHUNK):
            part = stale[start:start + _CHUNK]
            described = [next(results) for _ in part] if results is not None else [(None, None)] * len(part)
            self.magic_calls += len(want) * len(part)
            hashed = [sha256_file(paths[i]) for i in part] if hashes else [None] * len(part)
            with self._writing() as conn:
                old = self._fetch([path_key(paths[i]) for i in part])
                rows = []
                for j, i in enumerate(part):
                    p = paths[i]
                    o = old.get(path_key(p), _NO_ROW)
                    same = o[2] == sizes[i] and o[3] == mtimes[i]
                    d, m = described[j]
                    if same:  # keep what is still valid and was not recomputed
                        d = d if "description" in want else o[5]
                        m = m if "mime" in want else o[6]
                    h = hashed[j] if hashes else (o[7] if same else None)
                    stats = o[8:] if same else (None,) * 4
                    rows.append((path_key(p), display_path(p), sizes[i], mtimes[i], extension_of(p), d, m, h, *stats))
                self._put(conn, rows)

    @_recovering
    def ensure_content(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray, *, verbose: bool = False,
                       workers: int | None = None, chunk: int = READ_CHUNK) -> int:
        """Compute the content columns (sha256, entropy, printable, zeros, histogram) of the files that
        lack one of them or whose stored size or mtime differ from ``sizes`` / ``mtimes`` (the caller's
        view of the files); returns how many files were read.

        Reads in ``workers`` threads, ``chunk`` bytes at a time (:func:`consumer.content.compute_content`),
        with a progress bar when ``verbose``, and commits every chunk of files on its own. A file that
        no longer has the given size and mtime raises :class:`FileChangedError` (chunks already read
        stay committed); libmagic columns of a changed file are cleared, not kept.
        """
        n = len(paths)
        if len(sizes) != n or len(mtimes) != n:
            raise InputError(f"sizes/mtimes must have one entry per path ({n}), got {len(sizes)} and {len(mtimes)}")
        sizes_l, mtimes_l = np.asarray(sizes).tolist(), np.asarray(mtimes).tolist()
        state = self._content_state(paths)
        stale = [i for i, p in enumerate(paths) if state.get(p) != (sizes_l[i], mtimes_l[i], 1)]
        if not stale:
            return 0
        results = compute_content([paths[i] for i in stale], verbose=verbose, workers=workers, chunk=chunk)
        for start in range(0, len(stale), _CHUNK):
            part = stale[start:start + _CHUNK]
            computed = []
            for i in part:
                st = next(results)
                if (st.size, st.mtime_ns) != (sizes_l[i], mtimes_l[i]):
                    results.close()
                    raise FileChangedError(
                        f"paths: {paths[i]!r} changed since it was listed (size {sizes_l[i]} -> {st.size}, "
                        f"mtime_ns {mtimes_l[i]} -> {st.mtime_ns}); rebuild the dataset")
                computed.append(st)
            with self._writing() as conn:
                old = self._fetch([path_key(paths[i]) for i in part])
                rows = []
                for i, st in zip(part, computed):
                    p = paths[i]
                    o = old.get(path_key(p), _NO_ROW)
                    same = o[2] == st.size and o[3] == st.mtime_ns  # libmagic columns still valid
                    rows.append((path_key(p), display_path(p), st.size, st.mtime_ns, extension_of(p),
                                 o[5] if same else None, o[6] if same else None, st.sha256, st.entropy, st.printable,
                                 st.zeros, st.histogram_blob()))
                self._put(conn, rows)
        return len(stale)

    def _content_state(self, paths: Sequence[str]) -> dict[str, tuple[int, int, int]]:
        """``{path: (size, mtime_ns, 1 if every content column is set else 0)}`` for the verified rows."""
        found = self._fetch([path_key(p) for p in paths])
        rows = {p: found.get(path_key(p)) for p in paths}
        return {p: (r[2], r[3], int(all(v is not None for v in r[7:]))) for p, r in rows.items() if r is not None}

    @_recovering
    def content_rows(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray) -> list[tuple | None]:
        """Per path ``(sha256, entropy, printable, zeros, histogram_blob)``, or None where the catalog
        has no verified content for that version (size and mtime) of the file: never a stale value."""
        found = self._fetch([path_key(p) for p in paths])
        out: list[tuple | None] = []
        for p, s, t in zip(paths, np.asarray(sizes).tolist(), np.asarray(mtimes).tolist()):
            row = found.get(path_key(p), _NO_ROW)
            ok = row[2] == s and row[3] == t and all(v is not None for v in row[7:])
            out.append(tuple(row[7:]) if ok else None)
        return out

    @_recovering
    def insert(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray,
               descriptions: Sequence[str | None] | None, mimes: Sequence[str | None] | None) -> None:
        """Store rows whose facts are already known (a packed store's file table), without libmagic."""
        n = len(paths)
        descriptions = descriptions or [None] * n
        mimes = mimes or [None] * n
        with self._writing() as conn:
            self._put(conn, [(path_key(p), display_path(p), int(s), int(t), extension_of(p), d, m, None, None, None,
                              None, None)
                             for p, s, t, d, m in zip(paths, sizes.tolist(), mtimes.tolist(), descriptions, mimes)])

    @_recovering
    def merge_from(self, others: Sequence[str]) -> int:
        """Copy the rows of other catalog files into this one (the shards of ``consumer index --shard``);
        returns the rows copied. Each input is checked like any catalog (schema, and rows failing their
        check are left out); a path in two inputs keeps the last one's row."""
        copied = 0
        for other in others:
            src = Catalog(other)
            try:
                rows = list(src.verified_rows())
            finally:
                src.close()
            with self._writing() as conn:
                self._put(conn, rows)
            copied += len(rows)
        return copied

    @_recovering
    def verified_rows(self) -> list[tuple]:
        """Every row that passes its check, as its :data:`~consumer.catalog_rows.COLUMNS` values."""
        return list(self._fetch(None).values())

    @_recovering
    def count(self) -> int:
        """Number of rows."""
        return int(self._conn.execute("SELECT count(*) FROM main.files").fetchone()[0])

    def dump(self) -> list[tuple]:
        """Every verified row, sorted by path (for tests and diagnostics): path, size, mtime_ns, extension,
        description, mime, sha256."""
        return [r[1:8] for r in sorted(self.verified_rows())]
