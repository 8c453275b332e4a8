"""What a catalog row and a catalog schema must be: the per-row check and the exact schema.

Every row of the catalog's ``files`` table carries ``row_check``: a 128-bit BLAKE2b digest over all its
other columns (values and their SQL types). It is computed in Python whenever the engine writes a row
and verified whenever a row is read (:func:`verified`), together with the type of every column and the
``path`` derived from the key. A row changed
outside the engine (a bit flipped inside a value, an edited description, a size or a hash made up, a
derived column that no longer matches its key) fails and is treated as absent: its facts are computed
again and the row rewritten, never used.

The schema must be exactly the one this version writes (:func:`schema_of` against
:data:`EXPECTED_SCHEMA`): the two tables with their exact definitions and their key indexes, nothing
else, so a dropped or renamed column, a changed constraint, an added trigger, view or index make the
catalog "broken" (moved aside and rebuilt by :class:`~consumer.catalog.catalog.Catalog`).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Sequence

__all__ = ["COLUMNS", "EXPECTED_SCHEMA", "SCHEMA", "SCHEMA_VERSION", "display_path", "extension_of", "path_key",
           "row_check", "schema_of", "text_of", "verified", "with_check"]

SCHEMA_VERSION = "4"  # 4: row_check (per-row digest); 3: content columns entropy, printable, zeros, histogram
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files(
    key BLOB PRIMARY KEY, path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    extension TEXT NOT NULL, description TEXT, mime TEXT, sha256 TEXT,
    entropy REAL, printable REAL, zeros REAL, histogram BLOB, row_check TEXT NOT NULL);
"""
COLUMNS = ("key", "path", "size", "mtime_ns", "extension", "description", "mime", "sha256", "entropy", "printable",
           "zeros", "histogram")
_STATS = slice(8, 11)  # entropy, printable, zeros: REAL columns (an int written there reads back as a float)
# the Python type each column must read back as (None allowed from ``description`` on): every allowed signature
_TYPES: tuple[type, ...] = (bytes, str, int, int, str, str, str, str, float, float, float, bytes)
_SIGNATURES = frozenset(_TYPES[:5] + tuple(t if mask >> k & 1 else type(None) for k, t in enumerate(_TYPES[5:]))
                        for mask in range(1 << 7))


def text_of(raw: bytes) -> str:
    """The ``text_factory`` used to re-read rows holding TEXT that is not valid UTF-8 (a damaged page): it reads
    as text with escaped bytes, which then fails the row check, instead of raising inside SQLite's fetch."""
    return raw.decode("utf-8", "surrogateescape")


def path_key(path: str) -> bytes:
    """The catalog key of a path: its exact bytes (file names need not be valid UTF-8)."""
    return os.fsencode(path)


def display_path(path: str) -> str:
    """A path as valid text: undecodable bytes (surrogate-escaped by Python) shown as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def extension_of(path: str) -> str:
    """The ``extension`` column of a path: lower-case, without the dot, '' if none."""
    return display_path(os.path.splitext(path)[1].lstrip(".").lower())


def _canonical(values: Sequence) -> tuple:
    """The row as it reads back from SQLite (REAL columns hold floats)."""
    row = list(values)
    row[_STATS] = [None if v is None else float(v) for v in row[_STATS]]
    return tuple(row)


def _digest(row: tuple) -> str:
    return hashlib.blake2b(repr(row).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def row_check(values: Sequence) -> str:
    """The ``row_check`` of a row given as its :data:`COLUMNS` values (BLAKE2b-128 of their repr)."""
    return _digest(_canonical(values))


def with_check(values: Sequence) -> tuple:
    """The row ready to be written: its canonical values followed by its ``row_check``."""
    row = _canonical(values)
    return (*row, _digest(row))


def verified(row: Sequence) -> tuple | None:
    """The :data:`COLUMNS` values of a row read as ``COLUMNS + (row_check,)``, or None when the row is not
    one the engine wrote: a value of the wrong type, ``path`` not derived from ``key``, or a ``row_check``
    that does not match (it covers every column, ``extension`` included)."""
    values, check = tuple(row[:-1]), row[-1]
    if not isinstance(check, str) or tuple(map(type, values)) not in _SIGNATURES:
        return None  # read back with these types, the values are canonical: the digest needs no conversion
    if values[1] != values[0].decode("utf-8", "backslashreplace") or check != _digest(values):
        return None  # the path is display_path(os.fsdecode(key)); the extension is covered by the digest
    return values


def schema_of(conn: sqlite3.Connection) -> set[tuple]:
    """Every object of a database's schema: ``(type, name, table, sql)``."""
    return set(conn.execute("SELECT type, name, tbl_name, sql FROM main.sqlite_master"))


def _expected() -> set[tuple]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        return schema_of(conn)
    finally:
        conn.close()


EXPECTED_SCHEMA = _expected()
