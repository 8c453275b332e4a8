"""Fuzzing the catalog: a valid ``catalog.sqlite`` written by a real build, damaged, then the dataset reopened.

The damage is done to the file (bytes flipped, cut, extended, whole pages overwritten) and through SQL
(rows altered in any column, derived ones and stored descriptions included, rows deleted or added,
tables dropped, the schema changed, objects added). The outcome must be the dataset a fresh build
without cache gives (same tokens for every sample, same answers to SQL over every column, same files
after ``dedupe="content"``), or a documented error naming the catalog: never another exception,
never a wrong token or answer, never a hang. Example counts: ``CATALOG_FUZZ_EXAMPLES`` (listed in
``docs/reliability.md``).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.catalog.catalog import CATALOG_NAME
from consumer.errors import ConsumerError

CATALOG_FUZZ_EXAMPLES = {"bytes": 200, "pages": 100, "rows": 200, "schema": 100}
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture,
                                                        HealthCheck.too_slow]}
MODES = [{"metadata": "file"}, {"metadata": "mime"}, {"metadata": "file", "dedupe": "content"}]
SQL = ("SELECT file_id, path, class, size, mtime_ns, extension, description, mime, header, sha256, tokens, samples, "
       "entropy, printable, zeros, hex(histogram) FROM files ORDER BY file_id")
COLUMNS = ["key", "path", "size", "mtime_ns", "extension", "description", "mime", "sha256", "entropy", "printable",
           "zeros", "histogram", "row_check"]

FILES = {
    "text/a.txt": b"hello world\n" * 20,
    "text/b.py": b"#!/usr/bin/env python3\nimport os\nprint(os.getcwd())\n",
    "text/copy.txt": b"hello world\n" * 20,  # equal content: dropped by dedupe="content"
    "bin/img.png": b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(40)),
    "bin/empty": b"",
    "bin/z.gz": b"\x1f\x8b\x08\x00" + bytes(60),
    "bin/elf": b"\x7fELF\x02\x01\x01" + bytes(57),
}


def _snapshot(ds: Consumer) -> dict:
    """Everything a user is served: every column of every sample, and SQL over every column of the view."""
    out = {f"fetch:{k}": v for k, v in ds.fetch_numpy(np.arange(len(ds))).items()}
    out["files"] = list(ds.files)
    out["sql"] = list(ds.sql(SQL))
    return out


def _differences(a: dict, b: dict) -> list[str]:
    """The keys where two snapshots differ (an SQL difference shows the first differing row)."""
    out = sorted(set(a) ^ set(b))
    for k in sorted(set(a) & set(b)):
        if isinstance(a[k], np.ndarray) and not np.array_equal(a[k], b[k]):
            out.append(k)
        elif not isinstance(a[k], np.ndarray) and a[k] != b[k]:
            rows = [(x, y) for x, y in zip(a[k], b[k]) if x != y] if len(a[k]) == len(b[k]) else []
            out.append(f"{k}: {rows[0] if rows else (len(a[k]), len(b[k]))}")
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The corpus, per mode the fresh (uncached) snapshot, and a valid catalog holding every column."""
    root = tmp_path_factory.mktemp("catalog-fuzz")
    for rel, data in FILES.items():
        p = root / "data" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    data = str(root / "data")
    fresh = []
    for mode in MODES:
        ds = Consumer(data, cache_dir=False, seqlen=48, **mode)
        fresh.append(_snapshot(ds))
        ds.close()
    cache = root / "golden"
    ds = Consumer(data, cache_dir=cache, seqlen=48, **MODES[2])
    assert not _differences(_snapshot(ds), fresh[2])  # fills description, mime and the content columns
    ds.close()
    conn = sqlite3.connect(cache / CATALOG_NAME)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    golden = (cache / CATALOG_NAME).read_bytes()
    return {"root": root, "data": data, "fresh": fresh, "golden": golden}


OUTCOMES: Counter = Counter()  # (test, outcome) -> examples; printed with CONSUMER_FUZZ_REPORT=1


@pytest.fixture(scope="module", autouse=True)
def report_outcomes():
    """At the end of the module: every kind of damage was seen to bite, and the counts on request."""
    yield
    if os.environ.get("CONSUMER_FUZZ_REPORT"):
        for (test, outcome), n in sorted(OUTCOMES.items()):
            print(f"{test}: {outcome}: {n}")


def _outcome(cache: Path, ds: Consumer) -> str:
    """How a reopen that served the right dataset got there."""
    if any(".corrupt-" in n for n in os.listdir(cache)):
        return "catalog moved aside and rebuilt"
    if ds.build_info["libmagic_calls"]:
        return "rows failing their check recomputed"
    return "catalog used as it was (damage outside the rows used)"


def _reopen(world, catalog: bytes | None, mode_index: int, prepare=None) -> str:
    """Put ``catalog`` (or the golden one changed by ``prepare(connection)``) in a fresh cache directory,
    reopen the dataset, check the outcome and return it (see ``_outcome``)."""
    cache = world["root"] / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir()
    path = cache / CATALOG_NAME
    path.write_bytes(world["golden"] if catalog is None else catalog)
    if prepare is not None:
        conn = sqlite3.connect(path)
        try:
            prepare(conn)
            conn.commit()
        finally:
            conn.close()
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").split("::")[-1].split(" ")[0]
    try:
        ds = Consumer(world["data"], cache_dir=cache, seqlen=48, **MODES[mode_index])
        try:
            got = _snapshot(ds)
            outcome = _outcome(cache, ds)
            OUTCOMES[test, outcome] += 1
        finally:
            ds.close()
    except ConsumerError as e:  # documented, and it must name the catalog
        assert str(path) in str(e) or str(cache) in str(e), e
        OUTCOMES[test, f"documented error: {type(e).__name__}"] += 1
        return f"documented error: {e}"
    wrong = _differences(got, world["fresh"][mode_index])
    assert not wrong, f"wrong tokens or answers served from a damaged catalog: {wrong}"
    return outcome


# ------------------------------------------------------------------------------------------ file damage

byte_damage = st.fixed_dictionaries({
    "flips": st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 7)), max_size=8),
    "sets": st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 255)), max_size=4),
    "cut": st.none() | st.integers(0, 2**20),
    "extra": st.binary(max_size=64),
})


@settings(max_examples=CATALOG_FUZZ_EXAMPLES["bytes"], **SETTINGS)
@given(d=byte_damage, mode=st.integers(0, len(MODES) - 1))
def test_bytes_flipped_cut_or_extended(world, d, mode: int) -> None:
    b = bytearray(world["golden"])
    for pos, bit in d["flips"]:
        b[pos % len(b)] ^= 1 << bit
    for pos, value in d["sets"]:
        b[pos % len(b)] = value
    if d["cut"] is not None:
        b = b[: d["cut"] % (len(b) + 1)]
    _reopen(world, bytes(b + d["extra"]), mode)


@settings(max_examples=CATALOG_FUZZ_EXAMPLES["pages"], **SETTINGS)
@given(page=st.integers(0, 64), fill=st.sampled_from(["zeros", "random", "other-page"]), seed=st.integers(0, 2**32 - 1),
       mode=st.integers(0, len(MODES) - 1))
def test_whole_pages_overwritten(world, page: int, fill: str, seed: int, mode: int) -> None:
    b = bytearray(world["golden"])
    size = struct.unpack(">H", b[16:18])[0] or 65536
    pages = len(b) // size
    k = page % pages
    rng = np.random.default_rng(seed)
    if fill == "zeros":
        new = bytes(size)
    elif fill == "random":
        new = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    else:
        j = int(rng.integers(0, pages))
        new = bytes(b[j * size:(j + 1) * size])
    b[k * size:(k + 1) * size] = new
    _reopen(world, bytes(b), mode)


# ------------------------------------------------------------------------------------------ row damage

values = (st.none() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=True) | st.text(max_size=30)
          | st.binary(max_size=30) | st.sampled_from(["", "PNG image data", "text/plain", "0" * 64, "f" * 64]))


@settings(max_examples=CATALOG_FUZZ_EXAMPLES["rows"], **SETTINGS)
@given(edits=st.lists(st.tuples(st.integers(0, 20), st.sampled_from(COLUMNS), values), min_size=1, max_size=4),
       delete=st.lists(st.integers(0, 20), max_size=2), mode=st.integers(0, len(MODES) - 1))
def test_rows_altered(world, edits, delete, mode: int) -> None:
    """Any column of any row set to any value (derived columns, descriptions, stats, keys), rows deleted."""

    def prepare(conn: sqlite3.Connection) -> None:
        rowids = [r[0] for r in conn.execute("SELECT rowid FROM files ORDER BY rowid")]
        for i, column, value in edits:
            try:
                conn.execute(f"UPDATE files SET {column} = ? WHERE rowid = ?", (value, rowids[i % len(rowids)]))
            except sqlite3.IntegrityError:  # NOT NULL, a duplicate key: SQLite itself refuses
                pass
        for i in delete:
            conn.execute("DELETE FROM files WHERE rowid = ?", (rowids[i % len(rowids)],))

    _reopen(world, None, mode, prepare)


SCHEMA_DAMAGE = [
    "DROP TABLE files", "DROP TABLE meta", "DELETE FROM meta", "UPDATE meta SET value = '2'",
    "UPDATE meta SET value = NULL", "DELETE FROM files",
    "ALTER TABLE files RENAME TO old_files", "ALTER TABLE files RENAME COLUMN description TO descr",
    "ALTER TABLE files DROP COLUMN zeros", "ALTER TABLE files ADD COLUMN extra TEXT",
    "CREATE VIEW v AS SELECT 1", "CREATE INDEX i_size ON files(size)",
    "CREATE TRIGGER t AFTER INSERT ON files BEGIN UPDATE files SET description = 'forged' WHERE key = new.key; END",
    "CREATE TRIGGER u AFTER UPDATE ON files BEGIN UPDATE files SET mime = 'forged/x' WHERE key = new.key; END",
    "INSERT INTO files(key, path, size, mtime_ns, extension, row_check) VALUES (x'00', 'ghost', 1, 1, '', 'x')",
    "UPDATE files SET row_check = 'forged'",
    "UPDATE files SET size = size + 1", "UPDATE files SET mtime_ns = 0", "UPDATE files SET key = key || x'00'",
    "UPDATE files SET description = 'forged', mime = 'forged/x'", "UPDATE files SET histogram = x'00'",
    "UPDATE files SET entropy = 9.5, printable = -1, zeros = 2", "UPDATE files SET sha256 = upper(sha256)",
    "UPDATE files SET extension = 'exe'", "UPDATE files SET path = 'elsewhere'",
    "UPDATE files SET description = CAST(x'c5ff41' AS TEXT)", "UPDATE files SET row_check = CAST(x'ff' AS TEXT)",
    "UPDATE files SET size = 'big', sha256 = 5", "UPDATE files SET histogram = 'text'",
    "PRAGMA user_version = 7", "PRAGMA journal_mode = DELETE",
]


@settings(max_examples=CATALOG_FUZZ_EXAMPLES["schema"], **SETTINGS)
@given(statements=st.lists(st.sampled_from(SCHEMA_DAMAGE), min_size=1, max_size=3), mode=st.integers(0, len(MODES) - 1))
def test_schema_and_tables_damaged(world, statements: list[str], mode: int) -> None:
    def prepare(conn: sqlite3.Connection) -> None:
        for s in statements:
            try:
                conn.execute(s)
            except (sqlite3.OperationalError, sqlite3.IntegrityError):  # e.g. the table was dropped before
                pass

    _reopen(world, None, mode, prepare)


def test_every_schema_damage_alone(world) -> None:
    """Each statement of the list on its own, in every mode (the hypothesis test combines them)."""
    failures = []
    for s in SCHEMA_DAMAGE:
        for mode in range(len(MODES)):
            try:
                test_schema_and_tables_damaged.hypothesis.inner_test(world, [s], mode)
            except Exception as e:  # noqa: BLE001  (collected: every failing case is reported at once)
                failures.append(f"{s!r} mode {mode}: {type(e).__name__}: {str(e)[:300]}")
    assert not failures, "\n".join(failures)


def test_undecodable_schema_text_is_a_broken_catalog(world) -> None:
    """Found by the fuzzer: a flipped byte inside the schema's SQL text made sqlite3 raise a bare
    UnicodeDecodeError while building its own error message; it is now a corrupt catalog, moved aside."""
    b = bytearray(world["golden"])
    at = b.index(b"CREATE TABLE files") + len("CREATE TABLE files(") + 10
    b[at] = 0xC5  # starts a two-byte sequence the next byte does not continue
    assert _reopen(world, bytes(b), 0) == "catalog moved aside and rebuilt"


def test_undecodable_row_text_is_recomputed(world) -> None:
    """Found by the fuzzer: TEXT that is not UTF-8 raised "Could not decode to UTF-8" from inside the fetch;
    it now reads as escaped text, fails the row check, and the row is recomputed."""

    def prepare(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE files SET description = CAST(x'c5ff41' AS TEXT)")

    assert _reopen(world, None, 0, prepare) == "rows failing their check recomputed"


def test_a_key_index_that_disagrees_with_its_table_is_a_broken_catalog(world) -> None:
    """Found by the fuzzer: one byte changed inside a key of the primary-key index passes ``quick_check``;
    lookups then missed the row and the rewrite added a second row with the same key (SQL answered 8 rows
    for 7 files). ``integrity_check`` finds it: the catalog is moved aside and rebuilt."""
    probe = world["root"] / "probe.sqlite"
    probe.write_bytes(world["golden"])
    conn = sqlite3.connect(probe)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_files_1'").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    outcomes = set()
    for back in range(1, 400, 13):  # index cells fill the page from its end
        b = bytearray(world["golden"])
        b[root * size - back] ^= 0x5A
        outcomes.add(_reopen(world, bytes(b), 0))
    assert "catalog moved aside and rebuilt" in outcomes
