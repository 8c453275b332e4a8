"""The file catalog: an embedded SQLite database (WAL mode) with one row per file ever seen.

Layout (``<cache_dir>/catalog.sqlite``, or ``:memory:`` when caching is off)::

    meta(key TEXT PRIMARY KEY, value TEXT)           -- schema version
    files(path TEXT PRIMARY KEY,                     -- absolute, normalised
          size INTEGER, mtime_ns INTEGER,            -- what "changed" is judged by
          extension TEXT,                            -- lower-case, without the dot ('' if none)
          description TEXT, mime TEXT,               -- raw libmagic output, NULL until computed
          sha256 TEXT)                               -- content hash, NULL unless asked for

It caches the expensive libmagic results: :meth:`Catalog.sync` runs libmagic only on files that are
new, whose size or mtime changed, or that never had it computed, and commits every chunk of files
in its own transaction. A build killed part-way keeps what it committed; the next one continues
from there and ends with the same rows as an uninterrupted build. Several processes may sync the
same catalog at once (SQLite's locking, a busy timeout, idempotent upserts).

A catalog that SQLite cannot read (corrupt, truncated, not a database) is moved aside and rebuilt.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Sequence

import numpy as np

from .fileio import sha256_file
from .filemeta import describe_files

__all__ = ["Catalog", "CATALOG_NAME", "SCHEMA_VERSION"]

CATALOG_NAME = "catalog.sqlite"
SCHEMA_VERSION = "1"
_CHUNK = 512  # files per libmagic chunk and per committed transaction
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files(
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, extension TEXT NOT NULL,
    description TEXT, mime TEXT, sha256 TEXT);
"""


def _extension(path: str) -> str:
    return os.path.splitext(path)[1].lstrip(".").lower()


class Catalog:
    """One SQLite catalog. ``path=None`` keeps it in memory (``cache_dir=False``)."""

    def __init__(self, path: str | None):
        self.path = path
        self.magic_calls = 0  # libmagic calls made by this object (two per file: description and MIME)
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        if self.path is None:
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            conn.executescript(_SCHEMA)
            return conn
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            return self._connect_file()
        except sqlite3.DatabaseError:
            # not a database / malformed: our own artefact, so move it aside and start again
            stamp = time.strftime("%Y%m%d-%H%M%S")
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(self.path + suffix):
                    os.replace(self.path + suffix, f"{self.path}.corrupt-{stamp}{suffix}")
            return self._connect_file()

    def _connect_file(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
            conn.commit()
            if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The underlying connection (used by :mod:`consumer.sql` for in-memory catalogs)."""
        return self._conn

    def rows(self, paths: Sequence[str]) -> dict[str, tuple]:
        """``{path: (size, mtime_ns, description, mime, sha256)}`` for the given paths that are known."""
        out: dict[str, tuple] = {}
        cur = self._conn.cursor()
        for i in range(0, len(paths), 900):  # SQLite's bound-parameter limit
            part = paths[i:i + 900]
            marks = ",".join("?" * len(part))
            for row in cur.execute(
                    f"SELECT path, size, mtime_ns, description, mime, sha256 FROM files WHERE path IN ({marks})", part):
                out[row[0]] = row[1:]
        return out

    def sync(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray, *, magic: bool,
             hashes: bool = False, verbose: bool = False) -> tuple[list[str | None], list[str | None]]:
        """Bring the rows of ``paths`` up to date and return their (descriptions, mimes).

        A row is refreshed when it is missing or its size/mtime differ; libmagic runs (when
        ``magic``) only for files without a current description; ``hashes`` adds content hashes.
        Every chunk of files is committed on its own. Without ``magic``, descriptions may be None.
        """
        known = self.rows(paths)
        sizes_l, mtimes_l = sizes.tolist(), mtimes.tolist()
        stale: list[int] = []
        for i, p in enumerate(paths):
            row = known.get(p)
            fresh = row is not None and row[0] == sizes_l[i] and row[1] == mtimes_l[i]
            if not fresh or (magic and row[2] is None) or (hashes and row[4] is None):
                stale.append(i)
        if stale:
            self._refresh(paths, sizes_l, mtimes_l, stale, known, magic=magic, hashes=hashes, verbose=verbose)
            known = self.rows(paths)
        desc = [known[p][2] for p in paths]
        mime = [known[p][3] for p in paths]
        return desc, mime

    def _refresh(self, paths, sizes, mtimes, stale, known, *, magic, hashes, verbose) -> None:
        todo = [paths[i] for i in stale]
        results = describe_files(todo, verbose=verbose, chunk=_CHUNK) if magic else None
        cur = self._conn.cursor()
        for start in range(0, len(stale), _CHUNK):
            part = stale[start:start + _CHUNK]
            if results is not None:
                described = [next(results) for _ in part]
                self.magic_calls += 2 * len(part)
            rows = []
            for j, i in enumerate(part):
                p = paths[i]
                old = known.get(p)
                same = old is not None and old[0] == sizes[i] and old[1] == mtimes[i]
                d, m = described[j] if results is not None else ((old[2], old[3]) if same else (None, None))
                h = sha256_file(p) if hashes else (old[4] if same else None)
                rows.append((p, sizes[i], mtimes[i], _extension(p), d, m, h))
            cur.executemany(
                "INSERT INTO files(path, size, mtime_ns, extension, description, mime, sha256) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET size=excluded.size, "
                "mtime_ns=excluded.mtime_ns, extension=excluded.extension, description=excluded.description, "
                "mime=excluded.mime, sha256=excluded.sha256", rows)
            self._conn.commit()

    def count(self) -> int:
        """Number of rows."""
        return int(self._conn.execute("SELECT count(*) FROM files").fetchone()[0])

    def dump(self) -> list[tuple]:
        """Every row, sorted by path (for tests and diagnostics)."""
        return self._conn.execute(
            "SELECT path, size, mtime_ns, extension, description, mime, sha256 FROM files ORDER BY path").fetchall()
