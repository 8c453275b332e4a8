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
          histogram BLOB)                            --   computed; reset to NULL when the file changes

It caches the expensive libmagic results: :meth:`Catalog.sync` runs libmagic only on files that
are new, whose size or change stamp changed, or that lack the column asked for (description or MIME
type), and commits every chunk of files in its own transaction. A build killed part-way keeps what it
committed; the next one continues from there and ends with the same rows as an uninterrupted build.
Several processes may sync the same catalog at once (SQLite's locking, a busy timeout, idempotent upserts).

The content columns (sha256, entropy, printable, zeros, histogram; see :mod:`consumer.content`) are
filled by :meth:`Catalog.ensure_content`, only for files that lack them or whose size or mtime changed;
any refresh of a changed file clears the columns it does not recompute, so no column ever describes
an older version of the file than its size and mtime.

A catalog that SQLite cannot read (corrupt, truncated, not a database) is moved aside and rebuilt.
"""

from __future__ import annotations

import os
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from .content import READ_CHUNK, compute_content
from .errors import ConsumerWarning, FileChangedError, InputError
from .fileio import sha256_file
from .filemeta import describe_files

__all__ = ["Catalog", "CATALOG_NAME", "SCHEMA_VERSION"]

CATALOG_NAME = "catalog.sqlite"
SCHEMA_VERSION = "3"  # 3: content columns entropy, printable, zeros, histogram
_CHUNK = 512  # files per libmagic chunk and per committed transaction
_MAGIC_COLUMNS = ("description", "mime")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files(
    key BLOB PRIMARY KEY, path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    extension TEXT NOT NULL, description TEXT, mime TEXT, sha256 TEXT,
    entropy REAL, printable REAL, zeros REAL, histogram BLOB);
"""
_LOCK_WAIT = 60.0  # seconds a catalog locked by another process is waited for
# SQLite's primary result codes (sqlite3 exposes them only from Python 3.11 on, and typeshed not at all)
_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _FULL, _CANTOPEN, _AUTH = 3, 5, 6, 8, 10, 13, 14, 23
_COLUMNS = {"key", "path", "size", "mtime_ns", "extension", "description", "mime", "sha256", "entropy", "printable",
            "zeros", "histogram"}


def _memory() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.executescript(_SCHEMA)
    conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
    conn.commit()
    return conn


# an upsert keeps a stored column only while the row describes the same version of the file
_SAME_VERSION = "files.size = excluded.size AND files.mtime_ns = excluded.mtime_ns"
_STATS_COLUMNS = ("entropy", "printable", "zeros", "histogram")
_KEEP_STATS_IF_SAME = ", ".join(f"{c}=CASE WHEN {_SAME_VERSION} THEN files.{c} END" for c in _STATS_COLUMNS)


def _extension(path: str) -> str:
    return display_path(os.path.splitext(path)[1].lstrip(".").lower())


def path_key(path: str) -> bytes:
    """The catalog key of a path: its exact bytes (file names need not be valid UTF-8)."""
    return os.fsencode(path)


def display_path(path: str) -> str:
    """A path as valid text: undecodable bytes (surrogate-escaped by Python) shown as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


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
                code = getattr(e, "sqlite_errorcode", 0) & 0xFF
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
            try:
                if src.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == SCHEMA_VERSION:
                    src.backup(conn)
            finally:
                src.close()
        except (sqlite3.Error, TypeError):  # absent, unreadable or of another schema: start empty
            pass
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
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
            conn.commit()
            if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
            if version != SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"schema version {version}, expected {SCHEMA_VERSION}")
            columns = {row[1] for row in conn.execute("PRAGMA table_info(files)")}
            if columns != _COLUMNS:  # a catalog claiming a schema it lacks
                raise sqlite3.DatabaseError(f"files table has columns {sorted(columns)}, expected {sorted(_COLUMNS)}")
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

    def rows(self, paths: Sequence[str]) -> dict[str, tuple]:
        """``{path: (size, mtime_ns, description, mime, sha256)}`` for the given paths that are known."""
        by_key: dict[bytes, tuple] = {}
        keys = [path_key(p) for p in paths]
        cur = self._conn.cursor()
        for i in range(0, len(keys), 900):  # SQLite's bound-parameter limit
            part = keys[i:i + 900]
            marks = ",".join("?" * len(part))
            for row in cur.execute(
                    f"SELECT key, size, mtime_ns, description, mime, sha256 FROM main.files WHERE key IN ({marks})",
                    part):
                by_key[row[0]] = row[1:]
        return {p: by_key[k] for p, k in zip(paths, keys) if k in by_key}

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
            self._refresh(paths, sizes_l, mtimes_l, files, known, want=needed, hashes=hashes, verbose=verbose,
                          describe=describe or describe_files)
        if stale:
            known = self.rows(paths)
        desc = [known[p][2] for p in paths]
        mime = [known[p][3] for p in paths]
        return desc, mime

    def _refresh(self, paths, sizes, mtimes, stale, known, *, want, hashes, verbose, describe) -> None:
        todo = [paths[i] for i in stale]
        results = describe(todo, kinds=want, verbose=verbose, chunk=_CHUNK) if want else None
        cur = self._conn.cursor()
        for start in range(0, len(stale), _CHUNK):
            part = stale[start:start + _CHUNK]
            described = [next(results) for _ in part] if results is not None else [(None, None)] * len(part)
            self.magic_calls += len(want) * len(part)
            rows = []
            for j, i in enumerate(part):
                p = paths[i]
                old = known.get(p)
                same = old is not None and old[0] == sizes[i] and old[1] == mtimes[i]
                d, m = described[j]
                if same:  # keep what is still valid and was not recomputed
                    d = d if "description" in want else old[2]
                    m = m if "mime" in want else old[3]
                h = sha256_file(p) if hashes else (old[4] if same else None)
                rows.append((path_key(p), display_path(p), sizes[i], mtimes[i], _extension(p), d, m, h))
            cur.executemany(
                "INSERT INTO main.files(key, path, size, mtime_ns, extension, description, mime, sha256) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET size=excluded.size, "
                "mtime_ns=excluded.mtime_ns, extension=excluded.extension, description=excluded.description, "
                "mime=excluded.mime, sha256=excluded.sha256, " + _KEEP_STATS_IF_SAME, rows)
            self._conn.commit()

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
        cur = self._conn.cursor()
        for start in range(0, len(stale), _CHUNK):
            rows = []
            for i in stale[start:start + _CHUNK]:
                st = next(results)
                if (st.size, st.mtime_ns) != (sizes_l[i], mtimes_l[i]):
                    results.close()
                    raise FileChangedError(
                        f"paths: {paths[i]!r} changed since it was listed (size {sizes_l[i]} -> {st.size}, "
                        f"mtime_ns {mtimes_l[i]} -> {st.mtime_ns}); rebuild the dataset")
                rows.append((path_key(paths[i]), display_path(paths[i]), st.size, st.mtime_ns, _extension(paths[i]),
                             st.sha256, st.entropy, st.printable, st.zeros, st.histogram_blob()))
            cur.executemany(
                "INSERT INTO main.files(key, path, size, mtime_ns, extension, sha256, entropy, printable, zeros, "
                "histogram) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                f"description=CASE WHEN {_SAME_VERSION} THEN files.description END, "
                f"mime=CASE WHEN {_SAME_VERSION} THEN files.mime END, "
                "size=excluded.size, mtime_ns=excluded.mtime_ns, extension=excluded.extension, "
                "sha256=excluded.sha256, entropy=excluded.entropy, printable=excluded.printable, "
                "zeros=excluded.zeros, histogram=excluded.histogram", rows)
            self._conn.commit()
        return len(stale)

    def _by_key(self, columns: str, paths: Sequence[str]) -> list[tuple | None]:
        """Per path the ``columns`` (an SQL select list) of its row, or None when it has none."""
        keys = [path_key(p) for p in paths]
        by_key: dict[bytes, tuple] = {}
        cur = self._conn.cursor()
        for i in range(0, len(keys), 900):  # SQLite's bound-parameter limit
            part = keys[i:i + 900]
            marks = ",".join("?" * len(part))
            for row in cur.execute(f"SELECT key, {columns} FROM main.files WHERE key IN ({marks})", part):
                by_key[row[0]] = row[1:]
        return [by_key.get(k) for k in keys]

    def _content_state(self, paths: Sequence[str]) -> dict[str, tuple[int, int, int]]:
        """``{path: (size, mtime_ns, 1 if every content column is set else 0)}`` for the known paths."""
        rows = self._by_key("size, mtime_ns, (sha256 IS NOT NULL AND entropy IS NOT NULL AND printable IS NOT NULL "
                            "AND zeros IS NOT NULL AND histogram IS NOT NULL)", paths)
        return {p: r for p, r in zip(paths, rows) if r is not None}

    def content_rows(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray) -> list[tuple | None]:
        """Per path ``(sha256, entropy, printable, zeros, histogram_blob)``, or None where the catalog
        has no content for that version (size and mtime) of the file: never a stale value."""
        rows = self._by_key("size, mtime_ns, sha256, entropy, printable, zeros, histogram", paths)
        out: list[tuple | None] = []
        for row, s, t in zip(rows, np.asarray(sizes).tolist(), np.asarray(mtimes).tolist()):
            if row is not None and row[0] == s and row[1] == t and all(v is not None for v in row[2:]):
                out.append(tuple(row[2:]))
            else:
                out.append(None)
        return out

    def insert(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray,
               descriptions: Sequence[str | None] | None, mimes: Sequence[str | None] | None) -> None:
        """Store rows whose facts are already known (a packed store's file table), without libmagic."""
        n = len(paths)
        descriptions = descriptions or [None] * n
        mimes = mimes or [None] * n
        rows = [(path_key(p), display_path(p), int(s), int(t), _extension(p), d, m, None)
                for p, s, t, d, m in zip(paths, sizes.tolist(), mtimes.tolist(), descriptions, mimes)]
        self._conn.executemany("INSERT OR REPLACE INTO main.files(key, path, size, mtime_ns, extension, description, "
                               "mime, sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        self._conn.commit()

    def merge_from(self, others: Sequence[str]) -> int:
        """Copy the rows of other catalog files into this one (the shards of ``consumer index --shard``);
        returns the rows copied. Each input is checked like any catalog (schema); a path in two inputs
        keeps the last one's row."""
        copied = 0
        for other in others:
            src = Catalog(other)
            try:
                rows = src.connection.execute("SELECT * FROM main.files").fetchall()
            finally:
                src.close()
            if rows:
                marks = ",".join("?" * len(rows[0]))
                self._conn.executemany(f"INSERT OR REPLACE INTO main.files VALUES ({marks})", rows)
                self._conn.commit()
            copied += len(rows)
        return copied

    def count(self) -> int:
        """Number of rows."""
        return int(self._conn.execute("SELECT count(*) FROM main.files").fetchone()[0])

    def dump(self) -> list[tuple]:
        """Every row, sorted by path (for tests and diagnostics)."""
        return self._conn.execute(
            "SELECT path, size, mtime_ns, extension, description, mime, sha256 FROM main.files ORDER BY key").fetchall()
