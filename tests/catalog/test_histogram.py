"""The byte histogram kernel equals ``np.bincount`` on any bytes, whichever kernel counts them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.catalog.histogram import byte_histogram, numpy_histogram, pillow_histogram

PIL = pytest.importorskip("PIL.Image", reason="Pillow (a dependency) counts the bytes")


def _reference(data: np.ndarray) -> np.ndarray:
    return np.bincount(data, minlength=256)


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=20_000), start=st.integers(0, 7))
def test_every_kernel_equals_bincount(raw: bytes, start: int) -> None:
    data = np.frombuffer(raw, dtype=np.uint8)[start:]  # unaligned starts and odd lengths too
    ref = _reference(data)
    for got in (byte_histogram(data), numpy_histogram(data), pillow_histogram(np.ascontiguousarray(data), PIL)):
        assert got.dtype == np.int64 and got.shape == (256,)
        assert np.array_equal(got, ref)


@pytest.mark.parametrize("n", [0, 1, 4095, 4096, 65535, 65536, 65537, 3 << 20])
def test_sizes_around_every_switch_and_skewed_bytes(n: int) -> None:
    rng = np.random.default_rng(n)
    skewed = np.where(rng.random(n) < 0.9, 0xFF, rng.integers(0, 256, n)).astype(np.uint8)
    for data in (rng.integers(0, 256, n, dtype=np.uint8), skewed, np.zeros(n, np.uint8)):
        assert np.array_equal(byte_histogram(data), _reference(data))
        assert np.array_equal(numpy_histogram(data), _reference(data))


def test_a_strided_view_is_counted_as_its_bytes() -> None:
    data = np.arange(100_000, dtype=np.int64).astype(np.uint8)[::3]
    assert np.array_equal(byte_histogram(data), _reference(data))
