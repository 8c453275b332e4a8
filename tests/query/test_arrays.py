"""Arrow arrays built from buffers (:mod:`consumer.query.arrays`): the values, NULLs and types ``pa.array`` would
give, a bad input named, and a dataset's first SQL statement made without importing pandas."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.query.arrays import dictionary, numbers, strings


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**63, 2**63 - 1), st.booleans()), max_size=40),
       st.sampled_from([np.int64, np.int32, np.uint8, np.float64]))
def test_numbers_match_pa_array(rows, dtype):
    values = np.array([v for v, _ in rows], dtype=np.int64).astype(dtype)
    mask = np.array([m for _, m in rows], dtype=bool)
    got = numbers(values, mask=mask)
    got.validate(full=True)
    assert got.equals(pa.array(values, mask=mask))
    assert got.null_count == int(mask.sum())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(), max_size=20), st.booleans())
def test_strings_match_pa_array(values, large):
    values = [v for v in values if not any(0xD800 <= ord(c) <= 0xDFFF for c in v)]
    got = strings(values, large=large)
    got.validate(full=True)
    assert got.equals(pa.array(values, type=pa.large_string() if large else pa.string()))


def test_dictionary_with_nulls():
    got = dictionary(np.array([1, 0, 1]), ["a", "b"], mask=np.array([False, True, False]))
    assert got.to_pylist() == ["b", None, "b"]
    assert got.type == pa.dictionary(pa.int32(), pa.string())


@pytest.mark.parametrize("values, mask, message", [
    (np.array(["a"]), None, r"values: expected a 1-d array of integers or floats, got <U1"),
    (np.zeros((2, 2)), None, r"values: expected a 1-d array .* of shape \(2, 2\)"),
    (np.zeros(3), np.zeros(2, dtype=bool), r"mask: expected the shape of values \(3,\), got \(2,\)"),
])
def test_bad_inputs_are_named(values, mask, message):
    with pytest.raises(ValueError, match=message):
        numbers(values, mask=mask)


def test_first_statement_does_not_import_pandas(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"text": "a"}\n{"text": "b\\u00e9"}\n')
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "x.txt").write_bytes(b"xyz")
    script = (
        "import sys\n"
        "from consumer import Consumer\n"
        f"ds = Consumer({str(tmp_path / 'd.jsonl')!r}, documents='jsonl', cache_dir=False)\n"
        "assert ds.sql('SELECT count(*) FROM documents') == [(2,)]\n"
        "ds.sql('SELECT class, count(*) FROM files GROUP BY class')\n"
        f"fs = Consumer({str(tmp_path / 'f')!r}, metadata=None, cache_dir=False)\n"
        "fs.sql('SELECT class, count(*), sum(size) FROM files GROUP BY class')\n"
        "print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
