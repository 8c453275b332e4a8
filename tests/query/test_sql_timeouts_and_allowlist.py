"""SQL never hangs and calls only allowed functions: statement timeout, Ctrl-C, function allow-list."""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import numpy as np
import pytest

from consumer.catalog.catalog import Catalog, display_path, path_key
from consumer.errors import QueryError
from consumer.query import sqlite as consumer_sql
from consumer.query.rows import check_timeout
from consumer.query.sqlite import ALLOWED_FUNCTIONS, DatasetSQL

from ..conftest import interrupted_child

RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def _dataset_sql(tmp_path: Path, on_disk: bool) -> DatasetSQL:
    paths = []
    for i in range(3):
        p = tmp_path / f"f{i}.txt"
        p.write_bytes(b"x" * (i + 1))
        paths.append(str(p))
    catalog = Catalog(str(tmp_path / "catalog.sqlite") if on_disk else None)
    catalog.insert(paths, np.array([1, 2, 3]), np.zeros(3, dtype=np.int64), ["ASCII text"] * 3, ["text/plain"] * 3)

    def rows():
        for i, p in enumerate(paths):
            yield (i, path_key(p), display_path(p), "null", 0, "ASCII text", i + 2, 1)

    if on_disk:
        catalog.close()
        return DatasetSQL(str(tmp_path / "catalog.sqlite"), None, rows)
    return DatasetSQL(None, catalog.connection, rows)


@pytest.fixture(params=[True, False], ids=["file", "memory"])
def sql(tmp_path: Path, request) -> DatasetSQL:
    out = _dataset_sql(tmp_path, request.param)
    yield out
    out.close()


def test_runaway_statement_stops_at_the_timeout(sql: DatasetSQL) -> None:
    with pytest.raises(QueryError, match=r"timeout of 0\.2 s") as info:
        sql.query(RUNAWAY, timeout=0.2)
    assert "WITH RECURSIVE c(x)" in str(info.value)
    # the connection stays usable, with and without a timeout
    assert sql.query("SELECT count(*) FROM files", timeout=5) == [(3,)]
    assert sql.query("SELECT sum(size) FROM files") == [(6,)]


def test_a_quick_statement_is_not_affected_by_a_timeout(sql: DatasetSQL) -> None:
    rows = sql.query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000) "
                     "SELECT count(*), sum(x) FROM c", timeout=30)
    assert rows == [(100000, 100000 * 100001 // 2)]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "5", [1]])
def test_bad_timeout_is_refused(bad: object) -> None:
    with pytest.raises(QueryError, match="timeout must be a number of seconds > 0 or None"):
        check_timeout(bad)


def test_check_timeout_accepts_numbers() -> None:
    assert check_timeout(None) is None
    assert check_timeout(2) == 2.0
    assert check_timeout(0.25) == 0.25


_SIGINT_CHILD = textwrap.dedent(
    """
    import inspect, signal, sys, threading, time
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with SIGINT ignored
    sys.path.insert(0, sys.argv[1])
    from tests.query.test_sql_timeouts_and_allowlist import RUNAWAY, _dataset_sql
    from consumer.query.sqlite import DatasetSQL
    from pathlib import Path
    sql = _dataset_sql(Path(sys.argv[2]), sys.argv[3] == "file")
    lines, first = inspect.getsourcelines(DatasetSQL.query)
    in_sqlite = {first + i for i, line in enumerate(lines) if "conn.execute(" in line or "fetchall()" in line}
    main = threading.main_thread().ident

    def announce():  # "running" once the main thread waits inside SQLite (the sqlite3 module releases the GIL)
        while True:
            frame = sys._current_frames().get(main)
            if frame is not None and frame.f_code.co_name == "query" and frame.f_lineno in in_sqlite:
                print("running", flush=True)
                return
            time.sleep(0.005)

    threading.Thread(target=announce, daemon=True).start()
    try:
        sql.query(RUNAWAY)
    except KeyboardInterrupt as e:
        print("KeyboardInterrupt:", e, flush=True)
    """
)


@pytest.mark.parametrize("where", ["file", "memory"])
def test_ctrl_c_interrupts_a_runaway_statement(tmp_path: Path, where: str) -> None:
    """A real process runs a statement that never ends (no timeout); SIGINT stops it with KeyboardInterrupt."""
    out = interrupted_child(_SIGINT_CHILD, str(tmp_path), where)
    assert out.startswith("KeyboardInterrupt: SQL statement interrupted: 'WITH RECURSIVE"), out


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT fts3_tokenizer('simple')",
        "SELECT load_extension('/tmp/x.so')",
        "SELECT sqlite_compileoption_get(0)",
        "SELECT sqlite_compileoption_used('THREADSAFE')",
        "SELECT count(*) FROM files WHERE fts3_tokenizer(path) IS NULL",
    ],
)
def test_functions_outside_the_allow_list_are_refused(sql: DatasetSQL, statement: str) -> None:
    name = statement.split("(")[1 if statement.startswith("SELECT count") else 0].split()[-1]
    with pytest.raises(QueryError, match="statement refused") as info:
        sql.query(statement)
    assert f"function {name}() is not in the allowed list" in str(info.value)


def test_a_function_registered_on_the_connection_is_refused(tmp_path: Path) -> None:
    """Functions some builds or extensions add (readfile, writefile, edit) are refused by name, not by luck."""
    catalog = Catalog(None)
    calls: list[str] = []
    for name in ("readfile", "writefile", "edit"):
        catalog.connection.create_function(name, -1, lambda *a, _n=name: calls.append(_n))
    sql = DatasetSQL(None, catalog.connection, lambda: iter(()))
    for statement in ("SELECT readfile('/etc/passwd')", "SELECT writefile('/tmp/x', 'y')", "SELECT edit('x')"):
        name = statement.split()[1].split("(")[0]
        with pytest.raises(QueryError, match=rf"function {name}\(\) is not in the allowed list"):
            sql.query(statement)
    assert calls == []
    catalog.connection.create_function("upper", 1, lambda s: calls.append(s))  # a user override of an allowed name
    assert list(sql.query("SELECT upper('a')")) == [(None,)]
    assert calls == ["a"]


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("SELECT abs(-3), upper('a'), length('abc'), coalesce(NULL, 2), iif(1, 'y', 'n')", [(3, "A", 3, 2, "y")]),
        ("SELECT count(*), sum(size), max(size), group_concat(file_id) FROM files", [(3, 6, 3, "0,1,2")]),
        ("SELECT file_id, row_number() OVER (ORDER BY size DESC) FROM files ORDER BY file_id",
         [(0, 3), (1, 2), (2, 1)]),
        ("SELECT date('2024-01-31', '+1 day'), strftime('%Y', '2024-05-01')", [("2024-02-01", "2024")]),
        ("SELECT json_extract('{\"a\": 5}', '$.a'), '{\"b\": [1, 2]}' ->> '$.b[1]'", [(5, 2)]),
        ("SELECT count(*) FROM json_each('[1, 2, 3]')", [(3,)]),
        ("SELECT typeof(1.5), round(2.567, 1), LOWER(mime) FROM files LIMIT 1", [("real", 2.6, "text/plain")]),
    ],
)
def test_allowed_functions_work(sql: DatasetSQL, statement: str, expected: list) -> None:
    assert list(sql.query(statement)) == expected


def test_allow_list_has_no_dangerous_names() -> None:
    for name in ("load_extension", "fts3_tokenizer", "readfile", "writefile", "edit", "sqlite_compileoption_get",
                 "sqlite_dbpage", "zipfile"):
        assert name not in ALLOWED_FUNCTIONS


@pytest.mark.skipif(consumer_sql._LIMIT_LENGTH is None, reason="Connection.setlimit needs Python >= 3.11")
@pytest.mark.parametrize("statement", ["SELECT length(zeroblob(1000000000))",
                                       "SELECT length(randomblob(200000000))",
                                       "SELECT length(replace(hex(zeroblob(40000000)), '0', 'xx'))"])
def test_huge_values_are_refused_not_allocated(sql: DatasetSQL, statement: str) -> None:
    with pytest.raises(QueryError, match="too big"):
        sql.query(statement)
    assert sql.query("SELECT length(zeroblob(1000))") == [(1000,)]


def test_huge_printf_gives_null_not_gigabytes(sql: DatasetSQL) -> None:
    assert sql.query("SELECT length(printf('%.*c', 500000000, 'x'))") == [(None,)]
    assert sql.query("SELECT length(printf('%.*c', 5000, 'x'))") == [(5000,)]


def test_writes_and_pragmas_still_refused(sql: DatasetSQL) -> None:
    for statement in ("DELETE FROM files", "PRAGMA database_list", "SELECT * FROM pragma_database_list",
                      "ATTACH DATABASE ':memory:' AS x", "UPDATE sqlite_master SET sql = 'x'",
                      "UPDATE sqlite_temp_master SET name = 'x'"):
        with pytest.raises(QueryError, match="statement refused|SQL error"):
            sql.query(statement)


def test_environment_is_untouched() -> None:
    """The module holds no global state: importing it changes no signal handler."""
    before = signal.getsignal(signal.SIGINT)
    import consumer.query.sqlite  # noqa: F401

    assert signal.getsignal(signal.SIGINT) is before
    assert os.getpid() > 0


def test_max_rows_stops_an_endless_result(sql: DatasetSQL) -> None:
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
    with pytest.raises(QueryError, match="returned more than max_rows=25000 rows"):
        sql.query(endless, max_rows=25_000, timeout=60)
    assert len(sql.query("SELECT * FROM files", max_rows=3)) == 3
    assert len(sql.query(endless + " LIMIT 10", max_rows=10)) == 10
    assert sql.query("SELECT * FROM files WHERE 0", max_rows=0) == []
    with pytest.raises(QueryError, match="max_rows=2 rows"):
        sql.query("SELECT * FROM files", max_rows=2)
    with pytest.raises(QueryError, match="max_rows must be an int >= 0 or None, got -1"):
        sql.query("SELECT 1", max_rows=-1)


def test_numpy_parameters_bind_as_numbers(sql: DatasetSQL) -> None:
    """sqlite3 alone binds numpy.int64(2) as an 8-byte blob (size > blob is always false): values are converted."""
    assert sql.query("SELECT count(*) FROM files WHERE size > ?", (np.int64(1),)) == [(2,)]
    assert sql.query("SELECT count(*) FROM files WHERE size > :s", {"s": np.uint8(2)}) == [(1,)]
    assert sql.query("SELECT ?", [np.float32(0.5)]) == [(0.5,)]


@pytest.mark.parametrize(("params", "needle"), [((2**70,), "too large"), (([1],), "Error binding parameter 1"),
                                                ((1, 2), "Incorrect number of bindings")])
def test_bad_parameters_are_query_errors(sql: DatasetSQL, params: object, needle: str) -> None:
    with pytest.raises(QueryError, match="SQL error in 'SELECT ") as info:
        sql.query("SELECT ?", params)
    assert needle in str(info.value)


def test_lone_surrogate_in_a_statement_is_a_query_error(sql: DatasetSQL) -> None:
    with pytest.raises(QueryError, match="surrogates not allowed"):
        sql.query("SELECT '\ud800'")
