"""SQL over the files' raw bytes: head, tail, bytes_at, contains, regexp_bytes; changed files are refused."""

from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.errors import FileChangedError, QueryError
from consumer.query.bytefuncs import contains_file
from consumer.sources.byte_reads import iter_file, read_span
from consumer.sources.local import LocalFiles

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))


@pytest.fixture
def mixed(tmp_path):
    """A mixed corpus: PNGs (some renamed .txt), text, random bytes, an empty file, one large file."""
    rng = np.random.default_rng(5)
    root = tmp_path / "mixed"
    files = {
        "img/a.png": PNG + b"a" * 100,
        "img/b.png": PNG + rng.integers(0, 256, 5000, dtype=np.uint8).tobytes(),
        "img/disguised.txt": PNG + b"hidden",
        "doc/c.txt": b"hello PNG world \x89PN",
        "doc/png.png": b"not a png at all",
        "doc/empty.txt": b"",
        "doc/short.bin": b"\x89P",
        "bin/r.bin": rng.integers(0, 256, 3000, dtype=np.uint8).tobytes(),
        "bin/big.bin": rng.integers(0, 256, 3 * 2**20, dtype=np.uint8).tobytes() + b"NEEDLE-AT-END",
    }
    for name, data in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    ds = Consumer(str(root), cache_dir=False, metadata=None, style="concat", seqlen=64)
    yield ds, {str(root / k): v for k, v in files.items()}
    ds.close()


def test_head_finds_exactly_the_pngs(mixed):
    ds, files = mixed
    found = sorted(p for (p,) in ds.sql("SELECT path FROM files WHERE head(path, 4) = x'89504E47'"))
    assert found == sorted(p for p, d in files.items() if d[:4] == b"\x89PNG")
    assert any(p.endswith("disguised.txt") for p in found) and not any(p.endswith("png.png") for p in found)


def test_head_tail_bytes_at_return_the_bytes(mixed):
    ds, files = mixed
    rows = ds.sql("SELECT path, head(path, 10), tail(path, 7), bytes_at(path, 3, 5), bytes_at(path, 1000000, 4), "
                  "head(path, 0) FROM files")
    assert len(rows) == len(files)
    for path, head, tail, mid, far, none in rows:
        data = files[path]
        assert (head, tail, mid, far, none) == (data[:10], data[-7:] if data else b"", data[3:8], data[1000000:1000004],
                                                b"")


def test_contains_and_regexp(mixed):
    ds, files = mixed
    got = dict(ds.sql("SELECT path, contains(path, x'4E4545444C45') FROM files"))  # b"NEEDLE"
    assert got == {p: b"NEEDLE" in d for p, d in files.items()} and sum(got.values()) == 1
    rx = dict(ds.sql("SELECT path, regexp_bytes(path, 'hel+o|hidden') FROM files"))
    assert rx == {p: re.search(rb"hel+o|hidden", d) is not None for p, d in files.items()}
    assert ds.sql("SELECT contains(path, 'abc') FROM files LIMIT 1")  # DuckDB's own contains(text, text) stays


@pytest.mark.parametrize("statement, message", [
    ("SELECT head(path, 70000) FROM files", r"head\(path, n\): n must be an integer 0..65536, got 70000"),
    ("SELECT tail(path, -1) FROM files", r"tail\(path, n\): n must be an integer"),
    ("SELECT contains(path, ?) FROM files", "pattern must be 0..65536 bytes"),
    ("SELECT regexp_bytes(path, '(') FROM files", "bad pattern"),
    ("SELECT head('/etc/passwd', 4)", "not a file of this dataset"),
])
def test_bad_arguments_are_query_errors(mixed, statement, message):
    ds, _ = mixed
    with pytest.raises(QueryError, match=message):
        ds.sql(statement, [b"x" * 70000] if "?" in statement else ())


def test_null_arguments_give_null(mixed):
    ds, _ = mixed
    assert ds.sql("SELECT head(NULL, 4), contains(NULL, x'00'), head(path, NULL) FROM files LIMIT 1") == [
        (None, None, None)]


def test_a_file_changed_since_indexing_is_refused(mixed):
    ds, files = mixed
    victim = next(p for p in files if p.endswith("a.png"))
    time.sleep(0.01)
    with open(victim, "r+b") as f:  # same size, other bytes: only the change stamp tells
        f.write(b"GIF8")
    for statement in ("SELECT count(*) FROM files WHERE head(path, 4) = x'89504E47'",
                      "SELECT count(*) FROM files WHERE contains(path, x'00')",
                      "SELECT tail(path, 3) FROM files"):
        with pytest.raises(FileChangedError, match="a.png"):
            ds.sql(statement)
    os.truncate(victim, 3)
    with pytest.raises(FileChangedError, match="size 3 bytes, indexed"):
        ds.sql("SELECT bytes_at(path, 0, 2) FROM files")
    others = ds.sql("SELECT count(*) FROM files WHERE NOT path LIKE '%a.png' AND head(path, 1) = x'89'")
    assert others == [(sum(d[:1] == b"\x89" for p, d in files.items() if not p.endswith("a.png")),)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=0, max_size=3000), pattern=st.binary(min_size=0, max_size=40),
       chunk=st.integers(1, 64), at=st.integers(0, 3000))
def test_streamed_contains_agrees_with_bytes_find(tmp_path_factory, data, pattern, chunk, at):
    """The chunked search (pattern across chunk borders included) against Python's bytes.find."""
    planted = data[:at] + pattern + data[at:] if at % 2 else data
    p = tmp_path_factory.mktemp("c") / "f"
    p.write_bytes(planted)
    source = LocalFiles.listed([str(p)])
    # small chunks: the pattern crosses chunk borders
    assert contains_file(source, 0, pattern, chunk) == (planted.find(pattern) >= 0)
    assert b"".join(bytes(x) for x in iter_file(source, 0, chunk)) == planted
    assert read_span(source, 0, 0, 5) == planted[:5] and read_span(source, 0, len(planted) + 9, 3) == b""


def test_contains_in_sql_agrees_with_bytes_find_on_every_file(mixed):
    ds, files = mixed
    for pattern in (b"", b"\x89PNG", b"PN", b"a" * 50, b"\x00\x00\x00", b"NEEDLE-AT-END", b"hidden!"):
        got = dict(ds.sql("SELECT path, contains(path, ?) FROM files", [pattern]))
        assert got == {p: d.find(pattern) >= 0 for p, d in files.items()}, pattern


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(st.binary(min_size=0, max_size=2000), min_size=1, max_size=6),
       pattern=st.binary(min_size=1, max_size=8), plant=st.integers(0, 5))
def test_contains_in_sql_agrees_with_bytes_find_hypothesis(tmp_path_factory, files, pattern, plant):
    """Through ds.sql on a generated corpus: the pattern planted in some files, absent or present by chance in
    others."""
    root = tmp_path_factory.mktemp("h") / "corpus" / "k"
    root.mkdir(parents=True)
    datas = {}
    for i, data in enumerate(files):
        if i == plant % len(files):
            data = data[:len(data) // 2] + pattern + data[len(data) // 2:]
        p = root / f"f{i}.bin"
        p.write_bytes(data)
        datas[str(p)] = data
    ds = Consumer(str(root.parent), cache_dir=False, metadata=None)
    try:
        got = dict(ds.sql("SELECT path, contains(path, ?) FROM files", [pattern]))
        assert got == {p: d.find(pattern) >= 0 for p, d in datas.items()}
    finally:
        ds.close()
