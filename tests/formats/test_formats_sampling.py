"""Megatron GPT sampling: golden vectors (formats.md §2.8, §7.2) and the vectorised sample index
property-tested against a straightforward port of the C++ loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import InputError
from consumer.formats import (
    build_document_index,
    build_gpt_indices,
    build_sample_index,
    build_shuffle_index,
    num_epochs_for,
    num_samples_before_last_epoch,
    sample_index_dtype,
    separate_last_epoch_for,
    shuffle_index_dtype,
)

SIZES = np.array([20, 50, 60, 30, 100, 5], dtype=np.int32)
ONE_EPOCH_ROWS = [[0, 0], [1, 10], [1, 40], [2, 20], [2, 50], [3, 20], [4, 20], [4, 50], [4, 80]]


# ----------------------------------------------------------------------------------- reference oracle


def oracle_sample_index(
    sizes: list[int],
    document_index: list[int],
    seq_length: int,
    num_epochs: int,
    tokens_per_epoch: int,
    drop_last: bool,
    extra: int,
) -> list[list[int]]:
    """The C++ build_sample_idx loop, written out plainly (one step per document visited)."""
    total = num_epochs * tokens_per_epoch - extra
    num_samples = total // seq_length if drop_last else -(-total // seq_length)
    rows = [[0, 0]]
    doc, offset = 0, 0
    while len(rows) <= num_samples:
        remaining = seq_length + extra
        while remaining != 0:
            available = sizes[document_index[doc]] - offset
            remaining -= available
            if remaining <= 0:  # the window ends inside this document
                offset += remaining + available - extra
                remaining = 0
            elif doc == len(document_index) - 1:  # ran out of documents (drop_last=False only)
                if len(rows) != num_samples:
                    raise AssertionError("ran out of documents before the last sample")
                offset = sizes[document_index[doc]] - extra
                break
            else:
                doc += 1
                offset = 0
        rows.append([doc, offset])
    return rows


# ----------------------------------------------------------------------------------- golden vectors


@pytest.mark.parametrize(
    ("extra", "drop_last", "tail"),
    [(1, True, []), (0, True, []), (1, False, [[5, 4]]), (0, False, [[5, 5]])],
)
def test_worked_example(extra: int, drop_last: bool, tail: list[list[int]]) -> None:
    rows = build_sample_index(SIZES, np.arange(6, dtype=np.int32), 30, 1, 265, drop_last, extra)
    assert rows.dtype == np.int32
    assert rows.tolist() == ONE_EPOCH_ROWS + tail
    assert rows.tolist() == oracle_sample_index(SIZES.tolist(), list(range(6)), 30, 1, 265, drop_last, extra)


def test_two_epochs_identity_order() -> None:
    rows = build_sample_index(SIZES, np.tile(np.arange(6, dtype=np.int32), 2), 30, 2, 265)
    assert rows.tolist() == ONE_EPOCH_ROWS + [
        [6, 5], [7, 15], [7, 45], [8, 25], [8, 55], [9, 25], [10, 25], [10, 55], [10, 85],
    ]  # fmt: skip


def test_full_pipeline_one_epoch() -> None:
    doc, sample, shuffle = build_gpt_indices(SIZES, 30, 1234)
    assert doc.dtype == np.int32 and doc.tolist() == [2, 1, 5, 0, 4, 3]
    assert sample.dtype == np.int32
    assert sample.tolist() == [[0, 0], [0, 30], [1, 0], [1, 30], [3, 5], [4, 15], [4, 45], [4, 75], [5, 5]]
    assert shuffle.dtype == np.uint32 and shuffle.tolist() == [5, 0, 3, 4, 2, 6, 1, 7]


def test_full_pipeline_separate_last_epoch() -> None:
    assert num_epochs_for(265, 30, 10) == 2
    assert num_samples_before_last_epoch(265, 30, 2) == 8
    assert separate_last_epoch_for(265, 30, 10, 2) is True  # from_final 2 < int(0.8 * 8) = 6
    doc, sample, shuffle = build_gpt_indices(SIZES, 30, 1234, num_samples=10)
    assert doc.tolist() == [2, 1, 5, 0, 4, 3, 0, 4, 3, 2, 5, 1]
    assert sample.shape == (18, 2)
    assert shuffle.dtype == np.uint32
    assert shuffle.tolist() == [1, 0, 3, 5, 2, 7, 4, 6, 15, 14, 10, 11, 9, 16, 13, 12, 8]


def test_full_pipeline_not_separate() -> None:
    assert separate_last_epoch_for(265, 30, 15, 2) is False  # from_final 7 >= 6
    doc, sample, shuffle = build_gpt_indices(SIZES, 30, 1234, num_samples=15)
    assert doc.tolist() == [1, 2, 5, 2, 3, 4, 1, 0, 4, 5, 0, 3]
    assert sample.shape == (18, 2)
    assert shuffle.tolist() == [9, 7, 4, 3, 11, 2, 13, 1, 15, 5, 0, 8, 14, 6, 10, 16, 12]


def test_pipeline_pieces_agree_with_pipeline() -> None:
    """The pipeline is exactly: one RandomState, document shuffles first, then shuffle-index shuffles."""
    rng = np.random.RandomState(1234)
    doc = build_document_index(np.arange(6), 2, rng, True)
    sample = build_sample_index(SIZES, doc, 30, 2, 265)
    shuffle = build_shuffle_index(8, sample.shape[0] - 1, rng)
    expected = build_gpt_indices(SIZES, 30, 1234, num_samples=10)
    for got, want in zip((doc, sample, shuffle), expected):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_seed_and_random_state_are_equivalent() -> None:
    a = build_document_index(np.arange(10), 3, 7, False)
    b = build_document_index(np.arange(10), 3, np.random.RandomState(7), False)
    assert np.array_equal(a, b)


# ----------------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("tokens", "seq", "samples", "extra", "epochs"),
    [(265, 30, None, 1, 1), (265, 30, 8, 1, 1), (265, 30, 9, 1, 2), (240, 30, 8, 0, 1), (240, 30, 8, 1, 2),
     (265, 30, 0, 1, 1), (10, 2, 100, 1, 21)],
)  # fmt: skip
def test_num_epochs_for(tokens: int, seq: int, samples: int | None, extra: int, epochs: int) -> None:
    assert num_epochs_for(tokens, seq, samples, bool(extra)) == epochs


def test_separate_last_epoch_rejects_inconsistent_request() -> None:
    with pytest.raises(InputError, match=r"expected in \[0, 9\], got 10"):
        separate_last_epoch_for(265, 30, 18, 2)  # 2 epochs cannot be right for 18 samples
    assert separate_last_epoch_for(265, 30, None, 3) is False
    assert separate_last_epoch_for(265, 30, 5, 1) is False


def test_dtype_rules() -> None:
    assert sample_index_dtype(10, 2**31 - 1) == np.int32
    assert sample_index_dtype(2**31, 5) == np.int64
    assert sample_index_dtype(5, 2**31) == np.int64
    assert shuffle_index_dtype(2**32 - 3) == np.uint32
    assert shuffle_index_dtype(2**32 - 2) == np.int64


def test_document_index_separate_epoch_is_two_shuffles() -> None:
    docs = np.array([3, 7, 9, 11])
    doc = build_document_index(docs, 3, 5, True)
    assert doc.dtype == np.int32 and doc.shape == (12,)
    assert sorted(doc[:8].tolist()) == sorted(docs.tolist() * 2)
    assert sorted(doc[8:].tolist()) == sorted(docs.tolist())


def test_shuffle_index_is_two_permutations() -> None:
    s = build_shuffle_index(5, 9, 3)
    assert s.dtype == np.uint32
    assert sorted(s[:5].tolist()) == list(range(5)) and sorted(s[5:].tolist()) == list(range(5, 9))
    assert build_shuffle_index(0, 0, 3).tolist() == []


@pytest.mark.parametrize(
    ("kwargs", "needles"),
    [
        ({"seq_length": 1}, ["seq_length", ">= 2", "got 1"]),
        ({"num_epochs": 0}, ["num_epochs", "got 0"]),
        ({"tokens_per_epoch": 1}, ["tokens_per_epoch", "got 1"]),
        ({"tokens_per_epoch": 264}, ["expected the stream's token count 265", "264"]),
        ({"document_index": np.array([0, 6])}, ["document_index", "[0, 6)"]),
        ({"add_extra_token": 2}, ["add_extra_token", "got 2"]),
    ],
)
def test_sample_index_input_errors(kwargs: dict, needles: list[str]) -> None:
    args = {"sizes": SIZES, "document_index": np.arange(6), "seq_length": 30, "num_epochs": 1, "tokens_per_epoch": 265}
    args.update(kwargs)
    with pytest.raises(InputError) as info:
        build_sample_index(**args)
    for needle in needles:
        assert needle in str(info.value)


def test_gpt_indices_input_errors() -> None:
    with pytest.raises(InputError, match="more than 1 token"):
        build_gpt_indices(np.array([1, 0]), 4, 0)
    with pytest.raises(InputError, match="indices"):
        build_gpt_indices(SIZES, 30, 0, indices=np.array([6]))
    with pytest.raises(InputError, match="seed"):
        build_gpt_indices(SIZES, 30, -1)


# ----------------------------------------------------------------------------------- edge cases


@pytest.mark.parametrize("extra", [0, 1])
@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize(
    ("sizes", "seq_length"),
    [
        ([0, 4, 0, 0, 4, 0], 4),  # windows end exactly at boundaries followed by empty documents
        ([4, 0, 0, 4, 3, 0], 4),  # empty last document: the "ran out" row is (5, 0 - E)
        ([0, 0, 3], 2),
        ([5], 2),
        ([2, 2, 2, 2], 2),
        ([1, 1, 1, 1, 1], 3),
    ],
)
def test_zero_length_and_boundary_cases(sizes: list[int], seq_length: int, extra: int, drop_last: bool) -> None:
    doc = list(range(len(sizes)))
    tokens = sum(sizes)
    want = oracle_sample_index(sizes, doc, seq_length, 1, tokens, drop_last, extra)
    sizes_arr, doc_arr = np.array(sizes, np.int32), np.array(doc, np.int32)
    got = build_sample_index(sizes_arr, doc_arr, seq_length, 1, tokens, drop_last, extra)
    assert got.tolist() == want


def test_ran_out_row_on_empty_last_document_is_minus_one() -> None:
    """Faithful to the C++: offset = sizes[last] - E = -1 when the last document is empty and E=1."""
    got = build_sample_index(np.array([4, 3, 0], np.int32), np.arange(3), 4, 1, 7, drop_last=False)
    assert got.tolist() == [[0, 0], [1, 0], [2, -1]]
    assert got.tolist() == oracle_sample_index([4, 3, 0], [0, 1, 2], 4, 1, 7, False, 1)


# ----------------------------------------------------------------------------------- property test


@st.composite
def sampling_cases(draw: st.DrawFn) -> tuple:
    sizes = draw(st.lists(st.integers(0, 40), min_size=1, max_size=10).filter(lambda s: sum(s) >= 2))
    split = draw(st.lists(st.integers(0, len(sizes) - 1), min_size=1, max_size=len(sizes), unique=True))
    tokens = sum(sizes[i] for i in split)
    if tokens < 2:
        split = list(range(len(sizes)))
        tokens = sum(sizes)
    epochs = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    separate = draw(st.booleans())
    doc = build_document_index(np.array(split), epochs, seed, separate)
    seq_length = draw(st.integers(2, 50))
    extra = draw(st.sampled_from([0, 1]))
    drop_last = draw(st.booleans())
    return sizes, doc, seq_length, epochs, tokens, drop_last, extra


@settings(max_examples=400, deadline=None)
@given(sampling_cases())
def test_vectorised_matches_cpp_loop(case: tuple) -> None:
    sizes, doc, seq_length, epochs, tokens, drop_last, extra = case
    want = oracle_sample_index(sizes, doc.tolist(), seq_length, epochs, tokens, drop_last, extra)
    got = build_sample_index(np.array(sizes, np.int32), doc, seq_length, epochs, tokens, drop_last, extra)
    assert got.dtype == np.int32
    assert got.tolist() == want


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(1, 300), min_size=1, max_size=30),
    st.integers(2, 64),
    st.integers(0, 2**32 - 1),
    st.one_of(st.none(), st.integers(0, 60)),
    st.booleans(),
)
def test_pipeline_properties(
    sizes: list[int], seq_length: int, seed: int, num_samples: int | None, extra: bool
) -> None:
    arr = np.array(sizes, np.int32)
    if arr.sum() < 2:
        return
    doc, sample, shuffle = build_gpt_indices(arr, seq_length, seed, num_samples, add_extra_token=extra)
    epochs = doc.shape[0] // arr.shape[0]
    assert sorted(doc.tolist()) == sorted(list(range(arr.shape[0])) * epochs)
    n = sample.shape[0] - 1
    assert sorted(shuffle.tolist()) == list(range(n))
    if num_samples is not None:
        assert n >= num_samples
    # Row k starts at flat position k * seq_length (exclusive end of the previous sample).
    starts = np.concatenate(([0], np.cumsum(arr[doc], dtype=np.int64)))
    flat = starts[sample[:, 0]] + sample[:, 1]
    assert flat.tolist() == [k * seq_length for k in range(n + 1)]
