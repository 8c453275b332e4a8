"""``distinct``: numpy.unique's answer for integer arrays, without loading numpy.ma."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from consumer.util.sets import distinct

INTS = st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.uint64])


@given(hnp.arrays(INTS, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=7)))
def test_distinct_is_numpy_unique(values: np.ndarray) -> None:
    got = distinct(values)
    want = np.unique(values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_distinct_is_a_new_array() -> None:
    values = np.array([3, 1, 2], dtype=np.int64)
    got = distinct(values)
    got[0] = 99
    assert values.tolist() == [3, 1, 2]
    one = np.array([5])
    assert not np.shares_memory(distinct(one), one)


def test_distinct_of_a_list_and_of_nothing() -> None:
    assert distinct([4, 4, -1, 4]).tolist() == [-1, 4]
    assert distinct(np.zeros(0, dtype=np.int32)).dtype == np.int32
    assert distinct(np.zeros(0, dtype=np.int32)).size == 0


def test_distinct_does_not_load_numpy_ma() -> None:
    code = ("import sys, numpy as np; from consumer.util.sets import distinct; "
            "distinct(np.array([2, 1, 2])); print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
