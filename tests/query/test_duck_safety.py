"""The DuckDB engine is read-only and sealed: every escape attempt is a QueryError naming the statement."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from consumer import Consumer
from consumer.errors import QueryError


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    root = tmp_path_factory.mktemp("safety")
    data = root / "data"
    for cls in ("a", "b"):
        (data / cls).mkdir(parents=True)
        for i in range(3):
            (data / cls / f"{i}.txt").write_bytes(b"x" * (i + 1))
    out = Consumer(str(data), cache_dir=False, metadata=None, style="concat", seqlen=16)
    yield out
    out.close()


OUTSIDE = "/etc/passwd"

ESCAPES = [
    # writing out or reading in files
    f"COPY (SELECT * FROM files) TO '{os.devnull}'",
    "COPY files TO 'out.csv'",
    f"SELECT * FROM read_csv('{OUTSIDE}')",
    f"SELECT * FROM read_csv_auto('{OUTSIDE}')",
    f"SELECT * FROM read_blob('{OUTSIDE}')",
    f"SELECT * FROM read_text('{OUTSIDE}')",
    "SELECT * FROM read_parquet('/tmp/*.parquet')",
    "SELECT * FROM read_json('/tmp/x.json')",
    "SELECT * FROM glob('/etc/*')",
    f"SELECT * FROM '{OUTSIDE}'",
    f"SELECT count(*) FROM files, read_blob('{OUTSIDE}')",
    f"SELECT (SELECT count(*) FROM read_csv('{OUTSIDE}')) FROM files",
    f"WITH x AS (SELECT * FROM read_text('{OUTSIDE}')) SELECT * FROM x",
    "SELECT * FROM query('SELECT 42')",
    "SELECT * FROM query_table('files')",
    # other databases, extensions, settings
    "ATTACH ':memory:' AS other",
    "ATTACH '/tmp/other.duckdb' AS other",
    "DETACH memory",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SELECT * FROM read_csv('https://example.invalid/x.csv')",
    "SET enable_external_access = true",
    "SET memory_limit = '100GB'",
    "RESET memory_limit",
    "PRAGMA version",
    "PRAGMA database_list",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM pragma_database_list()",
    "CALL pragma_version()",
    # writes and schema changes
    "CREATE TABLE t AS SELECT * FROM files",
    "CREATE MACRO m(x) AS x + 1",
    "CREATE VIEW v AS SELECT 1",
    "INSERT INTO files VALUES (1)",
    "UPDATE files SET size = 0",
    "DELETE FROM files",
    "DROP VIEW files",
    "ALTER VIEW files RENAME TO f",
    "EXPORT DATABASE '/tmp/x'",
    "IMPORT DATABASE '/tmp/x'",
    "CHECKPOINT",
    "VACUUM",
    "BEGIN TRANSACTION",
    "EXPLAIN SELECT 1",
    "SELECT * FROM consumer_files",
    "SELECT * FROM information_schema.tables",
    # more than one statement
    "SELECT 1; DROP VIEW files",
    "SELECT 1; SELECT 2",
    "SELECT count(*) FROM files; COPY files TO 'x.csv'",
]


@pytest.mark.parametrize("statement", ESCAPES)
def test_escape_attempts_are_refused(ds, statement):
    with pytest.raises(QueryError) as info:
        ds.sql(statement)
    assert statement[:20] in str(info.value), str(info.value)
    assert ds.sql("SELECT count(*) FROM files")[0][0] == 6  # the view is untouched, the connection usable


def test_nothing_was_written(ds, tmp_path):
    for statement in ("COPY files TO 'out.csv'", f"COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'"):
        with pytest.raises(QueryError):
            ds.sql(statement)
    assert not (tmp_path / "x.csv").exists() and not Path("out.csv").exists()


def test_byte_functions_read_only_dataset_files(ds):
    with pytest.raises(QueryError, match="is not a file of this dataset"):
        ds.sql(f"SELECT head('{OUTSIDE}', 10)")
    assert ds.sql("SELECT count(*) FROM files WHERE head(path, 1) = x'78'")[0][0] == 6


@pytest.mark.parametrize("statement, position", [("SELECT 1 +", 9), ("SELECT size FROM files WHERE", 23),
                                                 ("SELECT\n  size FROM files WHER size > 1", 30)])
def test_syntax_error_names_the_position(ds, statement, position):
    with pytest.raises(QueryError, match=rf"syntax error at or near .* at position {position} "):
        ds.sql(statement)


def test_the_memory_limit_is_set(ds):
    assert ds.sql("SELECT current_setting('memory_limit')")[0][0].replace(" ", "") in ("2.0GiB", "2GiB", "1.8GiB",
                                                                                        "2048.0MiB")
