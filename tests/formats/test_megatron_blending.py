"""Megatron-core blending indices: the numpy lockstep build against a line-for-line port of the C++ loop
(``helpers.cpp`` ``build_blending_indices``), property-tested, and against megatron-core's compiled helper where it
can be loaded."""

from __future__ import annotations

import glob
import importlib.machinery
import importlib.util
import math
import os
from collections.abc import Sequence
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import InputError
from consumer.formats.megatron_blending import (
    _lockstep_blend,
    blend_sizes,
    build_blending_indices,
    normalize_weights,
)

# ----------------------------------------------------------------------------------- reference oracle


def cpp_loop(weights: list[float], size: int) -> tuple[list[int], list[int]]:
    """helpers.cpp ``build_blending_indices``, line for line (Python floats are IEEE doubles, one rounding per
    operation, as the C++ compiled without fused multiply-add)."""
    current = [0] * len(weights)
    dataset_index, dataset_sample_index = [], []
    for i in range(size):
        x = max(float(i), 1.0)
        best_d = 0
        best = weights[0] * x - float(current[0])
        for d in range(1, len(weights)):
            error = weights[d] * x - float(current[d])
            if error > best:
                best, best_d = error, d
        dataset_index.append(best_d)
        dataset_sample_index.append(current[best_d])
        current[best_d] += 1
    return dataset_index, dataset_sample_index


def megatron_normalize(weights: Sequence[float]) -> list[float]:
    """``megatron.core.datasets.utils.normalize`` (0.16.1), copied."""
    w = np.array(weights, dtype=np.float64)
    return (w / np.sum(w)).tolist()


def assert_equal_to_loop(weights: list[float], size: int, got: tuple[np.ndarray, np.ndarray]) -> None:
    index, sample = cpp_loop(weights, size)
    assert got[0].dtype == np.int16 and got[1].dtype == np.int64
    assert got[0].shape == got[1].shape == (size,)
    np.testing.assert_array_equal(got[0], np.array(index, dtype=np.int16))
    np.testing.assert_array_equal(got[1], np.array(sample, dtype=np.int64))


def helpers_cpp() -> ModuleType | None:
    """megatron-core's compiled ``helpers_cpp``, loaded from its file (importing ``megatron.core`` would pull in
    torch); None when megatron-core or its compiled helper is not installed."""
    spec = importlib.util.find_spec("megatron")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for path in sorted(glob.glob(os.path.join(root, "core", "datasets", "helpers_cpp*.so"))):
            loader = importlib.machinery.ExtensionFileLoader("helpers_cpp", path)
            module_spec = importlib.util.spec_from_file_location("helpers_cpp", path, loader=loader)
            assert module_spec is not None
            module = importlib.util.module_from_spec(module_spec)
            loader.exec_module(module)
            return module
    return None


# ----------------------------------------------------------------------------------- worked examples


def test_thirty_seventy_by_hand() -> None:
    # i=0, x=1: errors (0.3, 0.7) -> 1; i=1, x=1: (0.3, -0.3) -> 0; i=2: (-0.4, 0.4) -> 1; i=3: (-0.1, 0.1) -> 1;
    # i=4: (0.2, -0.2) -> 0
    index, sample = build_blending_indices([0.3, 0.7], 10)
    assert index.tolist()[:5] == [1, 0, 1, 1, 0]
    assert sample.tolist()[:5] == [0, 0, 1, 2, 1]
    assert_equal_to_loop([0.3, 0.7], 10, (index, sample))


def test_equal_weights_tie_to_the_lowest_part() -> None:
    index, sample = build_blending_indices([1, 1, 1], 9)
    assert index.tolist() == [0, 1, 2] * 3
    assert sample.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_a_zero_weight_part_wins_a_tie_at_zero() -> None:
    # i=2, x=2: errors (0, 1 - 1, 1 - 1) are all 0, and only a strictly greater error replaces part 0
    index, _ = build_blending_indices([0.0, 0.5, 0.5], 3)
    assert index.tolist() == [1, 2, 0]


def test_one_part_and_no_samples() -> None:
    index, sample = build_blending_indices([2.5], 7)
    assert index.tolist() == [0] * 7 and sample.tolist() == list(range(7))
    for weights in ([1.0], [0.3, 0.7]):
        index, sample = build_blending_indices(weights, 0)
        assert index.shape == sample.shape == (0,) and index.dtype == np.int16 and sample.dtype == np.int64


@pytest.mark.parametrize("weights", [[3.0, 7.0], [0.1, 0.1], [5, 1, 1], [0.2, 0.5, 0.3000001]])
def test_normalize_false_hands_the_weights_through(weights: list[float]) -> None:
    assert_equal_to_loop([float(w) for w in weights], 5000, build_blending_indices(weights, 5000, normalize=False))
    assert_equal_to_loop(megatron_normalize(weights), 5000, build_blending_indices(weights, 5000))


def test_normalize_weights_is_megatrons() -> None:
    rng = np.random.default_rng(3)
    for weights in ([0.3, 0.7], [1, 1, 1], list(rng.random(10)), [1e-300, 1.0], [7]):
        assert normalize_weights(weights) == megatron_normalize(weights)


# ----------------------------------------------------------------------------------- property tests

WEIGHT = st.one_of(
    st.floats(0.0, 1.0),
    st.floats(1e-9, 1e-3),
    st.integers(0, 10).map(float),
    st.sampled_from([0.0, 1e-7, 1e-4, 0.1, 0.2, 0.3, 1 / 3, 0.5, 1.0]),
)
WEIGHTS = st.lists(WEIGHT, min_size=1, max_size=12).filter(lambda ws: sum(ws) > 0)


@settings(max_examples=60, deadline=None)
@given(weights=WEIGHTS, size=st.integers(0, 20_000))
def test_equals_the_cpp_loop(weights: list[float], size: int) -> None:
    assert_equal_to_loop(megatron_normalize(weights), size, build_blending_indices(weights, size))


@settings(max_examples=40, deadline=None)
@given(weights=st.one_of(WEIGHTS, st.integers(2, 12).map(lambda p: [1.0] * p)), size=st.integers(2, 20_000))
def test_equal_and_raw_weights_equal_the_cpp_loop(weights: list[float], size: int) -> None:
    assert_equal_to_loop(weights, size, build_blending_indices(weights, size, normalize=False))


@settings(max_examples=80, deadline=None)
@given(weights=WEIGHTS, size=st.integers(0, 6000), chunk=st.integers(1, 200), warmup=st.integers(0, 40))
def test_every_chunking_equals_the_cpp_loop(weights: list[float], size: int, chunk: int, warmup: int) -> None:
    # short chunks and warm-ups make most junctions miss: the repair rounds must still end on the exact run
    w = megatron_normalize(weights)
    assert_equal_to_loop(w, size, _lockstep_blend(np.array(w), size, chunk, warmup))


@pytest.mark.parametrize("weights", [
    [1.0, 1e-3, 0.5, 1e-4, 2.0],
    [1.0, 1.0, 1.0, 1e-7, 1.0, 1.0],
    [7.3e-2, 7.8e-6, 0.185, 6.2e-2, 4.3e-2, 0.25, 0.116, 0.263, 5.9e-3, 2.3e-6],
])
def test_tiny_weights_over_many_short_chunks(weights: list[float]) -> None:
    w = megatron_normalize(weights)
    assert_equal_to_loop(w, 60_000, _lockstep_blend(np.array(w), 60_000, 64, 8))


# ----------------------------------------------------------------------------------- megatron-core itself

HELPERS = helpers_cpp()
needs_megatron = pytest.mark.skipif(HELPERS is None, reason="megatron-core's compiled helpers_cpp is not installed")
_RNG = np.random.default_rng(2024)
MEGATRON_BLENDS = {
    "30-70": [0.3, 0.7],
    "thirds": [1 / 3, 1 / 3, 1 / 3],
    "20-50-30": [0.2, 0.5, 0.3],
    "10 random": _RNG.random(10).tolist(),
    "10 dirichlet": _RNG.dirichlet(np.full(10, 0.3)).tolist(),
    "equal 12": [1.0] * 12,
}


@needs_megatron
@pytest.mark.parametrize("name", list(MEGATRON_BLENDS))
@pytest.mark.parametrize("size", [1, 2, 3, 1000, 100_003, 1_000_000])
def test_equals_megatron_cores_helper(name: str, size: int) -> None:
    assert HELPERS is not None
    weights = normalize_weights(MEGATRON_BLENDS[name])  # what BlendedDataset hands the helper
    expected_index = np.zeros(size, dtype=np.int16)
    expected_sample = np.zeros(size, dtype=np.int64)
    HELPERS.build_blending_indices(expected_index, expected_sample, weights, len(weights), size, False)
    index, sample = build_blending_indices(MEGATRON_BLENDS[name], size)
    np.testing.assert_array_equal(index, expected_index)
    np.testing.assert_array_equal(sample, expected_sample)


# ----------------------------------------------------------------------------------- sizes asked of each part


def test_blend_sizes_by_hand() -> None:
    assert blend_sizes([0.3, 0.7], 1000) == [300, 700]
    assert blend_sizes([1, 1, 1], 10) == [4, 4, 4]  # ceil(10 / 3) each: the blend's size is 12, not 10
    assert blend_sizes([1, 1, 1], 10, surplus=0.005) == [5, 5, 5]  # ceil(4 * 1.005)
    assert blend_sizes([0.25, 0.75], 0) == [0, 0]


def test_blend_sizes_is_the_builders_formula() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        weights = rng.random(int(rng.integers(1, 12))).tolist()
        n = int(rng.integers(0, 10**9))
        for surplus in (0.0, 0.005, 0.1):
            expected = [int(math.ceil(math.ceil(n * w) * (1 + surplus))) for w in megatron_normalize(weights)]
            assert blend_sizes(weights, n, surplus) == expected


def test_blend_sizes_equals_megatron_cores_builder() -> None:
    pytest.importorskip("torch")
    builder = pytest.importorskip("megatron.core.datasets.blended_megatron_dataset_builder")
    rng = np.random.default_rng(12)
    for _ in range(50):
        weights = rng.random(int(rng.integers(1, 12))).tolist()
        sizes = [int(rng.integers(0, 10**9)), int(rng.integers(0, 1000)), 0]
        for surplus in (0.0, 0.005):
            expected = builder._get_size_per_split_per_dataset(megatron_normalize(weights), sizes, surplus)
            got = [blend_sizes(weights, n, surplus) for n in sizes]
            assert [list(col) for col in zip(*got, strict=True)] == expected


# ----------------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("weights, message", [
    ([0.5, -0.1], r"weights\[1\]: expected a finite number >= 0, got -0.1"),
    ([0.5, float("nan")], r"weights\[1\]: expected a finite number >= 0, got nan"),
    ([float("inf"), 1.0], r"weights\[0\]: expected a finite number >= 0, got inf"),
    ([0, 0.0], r"weights: expected at least one weight > 0, got \[0.0, 0.0\]"),
    ([], r"weights must be a non-empty 1-D sequence of numbers, got \[\]"),
    ([[0.5, 0.5]], r"weights must be a non-empty 1-D sequence of numbers, got \[\[0.5, 0.5\]\]"),
    ("0.5", r"weights must be a 1-D sequence of numbers, got '0.5'"),
    (0.5, r"weights must be a 1-D sequence of numbers, got 0.5"),
    (["a", "b"], r"weights must be a non-empty 1-D sequence of numbers, got \['a', 'b'\]"),
    ([1e308, 1e308], r"weights: their sum overflows float64"),
])
def test_bad_weights_are_refused_by_name(weights: object, message: str) -> None:
    for call in (lambda: build_blending_indices(weights, 10), lambda: blend_sizes(weights, 10),  # type: ignore[arg-type]
                 lambda: normalize_weights(weights)):  # type: ignore[arg-type]
        with pytest.raises(InputError, match=message):
            call()


def test_bad_sizes_and_flags_are_refused_by_name() -> None:
    with pytest.raises(InputError, match=r"size must be an int >= 0, got -1"):
        build_blending_indices([0.5, 0.5], -1)
    with pytest.raises(InputError, match=r"size must be an int >= 0, got 10.0"):
        build_blending_indices([0.5, 0.5], 10.0)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"size must be an int >= 0, got True"):
        build_blending_indices([0.5, 0.5], True)
    with pytest.raises(InputError, match=r"normalize must be a bool, got 'yes'"):
        build_blending_indices([0.5, 0.5], 3, normalize="yes")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"weights: at most 32766 parts \(the dataset index is int16\), got 32767"):
        build_blending_indices(np.ones(32767), 3)
    with pytest.raises(InputError, match=r"num_samples must be an int >= 0, got -5"):
        blend_sizes([0.5, 0.5], -5)
    with pytest.raises(InputError, match=r"surplus must be a finite number >= 0, got -0.5"):
        blend_sizes([0.5, 0.5], 5, surplus=-0.5)
