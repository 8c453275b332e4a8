"""One function call of a DuckDB statement builds at most MAX_GENERATED_BYTES, so a timeout holds within the
documented margin (docs/query.md), and the guarded functions still answer as DuckDB's own within the cap."""

from __future__ import annotations

import time

import pytest

from consumer import Consumer, QueryError
from consumer.query.bounds import GUARDED_FUNCTIONS, MAX_GENERATED_BYTES, TIMEOUT_MARGIN_SECONDS

CAP = MAX_GENERATED_BYTES
ROWS = "FROM range(1000000000) t(i)"


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Consumer:
    root = tmp_path_factory.mktemp("corpus")
    for cls in ("a", "b"):
        (root / cls).mkdir()
        (root / cls / "f.txt").write_text(cls * 100)
    return Consumer(str(root), cache_dir=False)


@pytest.mark.parametrize("statement, timeout", [
    ("SELECT length(repeat('x', 3000000000))", 5),                     # the statement of issue #25
    (f"SELECT sum(length(repeat('x', {CAP} - (i % 2)))) {ROWS}", 1),  # the largest value allowed, every row
    (f"SELECT sum(length(lpad('x', ({CAP // 4} - (i % 2))::INTEGER, 'y'))) {ROWS}", 1),
    (f"SELECT sum(len(list_resize([i], {CAP // 8} - (i % 2)))) {ROWS}", 1),
    ("SELECT length(format('{:>2000000000}', 'x'))", 1),
])
def test_a_statement_ends_within_its_timeout_plus_the_margin(ds: Consumer, statement: str, timeout: float) -> None:
    t0 = time.perf_counter()
    with pytest.raises(QueryError, match=r"stopped after the timeout|more than the cap of"):
        ds.sql(statement, timeout=timeout)
    # generous (3x the documented margin): this asserts the bound holds, not how fast the machine is
    assert time.perf_counter() - t0 < timeout + 3 * TIMEOUT_MARGIN_SECONDS


@pytest.mark.parametrize("call, expected", [
    ("repeat('ab', 3)", "ababab"), ("repeat('\\xAA'::BLOB, 2)", b"\xaa\xaa"), ("repeat([1, 2], 2)", [1, 2, 1, 2]),
    ("lpad('x', 3, '-')", "--x"), ("rpad('x', 3, '-')", "x--"), ("list_resize([1], 2)", [1, None]),
    ("list_resize([1], 2, 0)", [1, 0]), ("array_resize([1], 2)", [1, None]), ("range(3)", [0, 1, 2]),
    ("generate_series(2)", [0, 1, 2]), ("format('{}:{:>3}', 1, 'a')", "1:  a"), ("printf('%3d|%s', 7, 'x')", "  7|x"),
    (f"length(repeat('x', {CAP}))", CAP),
])
def test_the_guarded_functions_answer_as_before_within_the_cap(ds: Consumer, call: str, expected: object) -> None:
    assert ds.sql(f"SELECT {call}")[0][0] == expected


@pytest.mark.parametrize("name, call", [
    ("repeat", f"repeat('x', {CAP + 1})"), ("repeat", f"repeat([1], {CAP})"), ("lpad", f"lpad('x', {CAP}, '-')"),
    ("rpad", f"rpad('x', {CAP}, '-')"), ("list_resize", f"list_resize([1], {CAP})"),
    ("array_resize", f"array_resize([1], {CAP}, 0)"), ("range", f"range({CAP})"),
    ("generate_series", f"generate_series({CAP})"), ("format", f"format('{{:>{CAP + 1}}}', 'x')"),
    ("printf", f"printf('%{CAP + 1}d', 1)"),
])
def test_a_value_over_the_cap_is_refused_naming_the_function(ds: Consumer, name: str, call: str) -> None:
    with pytest.raises(QueryError, match=rf"{name}\(\): the result would be \d+ bytes, more than the cap of {CAP}"):
        ds.sql(f"SELECT {call}")
    assert name in GUARDED_FUNCTIONS


def test_the_table_functions_of_the_same_names_stream_as_before(ds: Consumer) -> None:
    assert ds.sql(f"SELECT count(*) FROM range({CAP * 4})")[0][0] == CAP * 4
    assert ds.sql(f"SELECT count(*) FROM generate_series(1, {CAP * 4})")[0][0] == CAP * 4
