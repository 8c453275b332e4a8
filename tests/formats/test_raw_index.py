"""Modalities' raw JSONL index: byte-identical to Modalities' own IndexGenerator (golden files it wrote), read back
through the safe unpickler, faulty lines refused with file, line and offset."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import FormatError, InputError
from consumer.formats import raw_index_path, read_raw_index, write_raw_index

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "raw_index"
CASES = sorted(p.stem for p in GOLDEN.glob("*.jsonl"))


def test_golden_cases_cover_the_documented_endings():
    assert {"crlf", "no_final_newline", "non_ascii", "lf", "lone_cr"} <= set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_byte_identical_to_modalities(tmp_path, name):
    src = tmp_path / f"{name}.jsonl"
    shutil.copy(GOLDEN / f"{name}.jsonl", src)
    n = write_raw_index(src)
    assert raw_index_path(src) == tmp_path / f"{name}.idx"
    assert (tmp_path / f"{name}.idx").read_bytes() == (GOLDEN / f"{name}.idx").read_bytes()
    entries = read_raw_index(tmp_path / f"{name}.idx")
    assert entries.shape == (n, 2)
    data = src.read_bytes()
    for offset, length in entries.tolist():  # each entry is its line's bytes, CR kept, LF dropped
        assert b"\n" not in data[offset:offset + length]
        assert data[offset + length:offset + length + 1] in (b"\n", b"")


def test_lengths_count_bytes_not_characters(tmp_path):
    src = tmp_path / "u.jsonl"
    src.write_bytes('{"t": "日本語"}\n'.encode())
    write_raw_index(src)
    assert read_raw_index(raw_index_path(src)).tolist() == [[0, len('{"t": "日本語"}'.encode())]]


@pytest.mark.parametrize("data, line, offset", [
    (b'{"a": 1}\n\n{"b": 2}\n', 2, 9),          # an empty line is faulty, as in Modalities
    (b'{"a": 1}\n{"b": \n', 2, 9),               # broken JSON
    (b'{"a": 1}\r{"b": 2}\n', 1, 0),             # a lone CR is no line break: two values on one line
    (b"", 1, 0),                                 # an empty file is one empty line
])
def test_faulty_lines_name_file_line_and_offset(tmp_path, data, line, offset):
    src = tmp_path / "bad.jsonl"
    src.write_bytes(data)
    with pytest.raises(FormatError, match=rf"bad\.jsonl'?: line {line} at byte {offset} is not JSON"):
        write_raw_index(src)
    assert not raw_index_path(src).exists()  # nothing partial written


def test_drop_faulty_entries_leaves_them_out(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b'{"a": 1}\n\nnope\n{"b": 2}')
    assert write_raw_index(src, tmp_path / "out.idx", drop_faulty_entries=True) == 2
    assert read_raw_index(tmp_path / "out.idx").tolist() == [[0, 8], [15, 8]]


def test_missing_input_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="jsonl_path: not a file"):
        write_raw_index(tmp_path / "none.jsonl")


class _Evil:
    def __reduce__(self):
        return (print, ("pwned",))


@pytest.mark.parametrize("payload, message", [
    (pickle.dumps(_Evil()), "not a valid pickle"),
    (pickle.dumps({"a": 1}), "not a valid pickle|expected a list"),
    (pickle.dumps([(1, 2, 3)]), r"expected a tuple of 2 ints"),
    (pickle.dumps([(-1, 2)]), "non-negative"),
    (b"\x80\x04garbage", "not a valid pickle"),
])
def test_read_refuses_anything_but_a_list_of_pairs(tmp_path, payload, message):
    bad = tmp_path / "bad.idx"
    bad.write_bytes(payload)
    with pytest.raises(FormatError, match=message):
        read_raw_index(bad)


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.sampled_from([b'{"a": 1}', b'"x"', b"[1]", b'{"t": "\xe2\x80\xa8"}', b"2 \r"]), max_size=8),
       final=st.booleans())
def test_entries_are_the_lines(tmp_path_factory, lines, final):
    src = tmp_path_factory.mktemp("raw") / "x.jsonl"
    data = b"\n".join(lines) + (b"\n" if final and lines else b"")
    src.write_bytes(data)
    if not lines:
        with pytest.raises(FormatError):
            write_raw_index(src)
        return
    write_raw_index(src)
    got = read_raw_index(raw_index_path(src))
    assert [data[o:o + n] for o, n in got.tolist()] == lines
    assert got.dtype == np.int64
