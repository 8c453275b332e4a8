"""fairseq batch_by_size: golden table (formats.md §7.3) and a property test against the spec loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import InputError
from consumer.formats import batch_by_size

# num_tokens, max_tokens, max_sentences, mult, current (vec), main (drop last)
GOLDEN = [
    ([3, 5, 4, 6, 2, 7], 12, None, 1, [[0, 1], [2, 3], [4], [5]], None),
    ([2, 2, 2, 3, 3, 3, 4, 4, 4, 5], 16, None, 2, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]], None),
    ([2, 2, 2, 3, 3, 3, 4, 4, 4, 5], 16, 3, 1, [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]], None),
    ([8, 1, 1, 1, 1, 1, 1, 1], 10, None, 1, [[0], [1, 2, 3, 4, 5, 6, 7]], None),
    ([1, 2, 3, 4, 5, 6, 7, 8], 20, None, 1, [[0, 1, 2, 3], [4, 5], [6, 7]], None),
    ([1, 1, 1, 1, 1, 1, 1], None, 3, 2, [[0, 1], [2, 3], [4, 5], [6]], [[0, 1], [2, 3], [4, 5]]),
    ([5, 5, 5, 5, 5], None, None, 2, [[0, 1, 2, 3], [4]], [[0, 1, 2, 3]]),
    ([2, 1, 4, 1, 4, 1, 1, 1], 4, 3, 2, [[0, 1], [2], [3], [4], [5, 6], [7]], [[0, 1], [2], [3], [4], [5, 6]]),
]


def as_lists(batches: list[np.ndarray]) -> list[list[int]]:
    return [b.tolist() for b in batches]


@pytest.mark.parametrize(("num_tokens", "max_tokens", "max_sentences", "mult", "current", "main"), GOLDEN)
def test_golden_table(
    num_tokens: list[int],
    max_tokens: int | None,
    max_sentences: int | None,
    mult: int,
    current: list[list[int]],
    main: list[list[int]] | None,
) -> None:
    indices = np.arange(len(num_tokens))
    got = batch_by_size(indices, num_tokens, max_tokens, max_sentences, mult)
    assert as_lists(got) == current
    assert all(b.dtype == np.int64 for b in got)
    dropped = batch_by_size(indices, num_tokens, max_tokens, max_sentences, mult, drop_last_partial_multiple=True)
    assert as_lists(dropped) == (current if main is None else main)


def test_sentence_longer_than_max_tokens() -> None:
    with pytest.raises(InputError) as info:
        batch_by_size([0, 1], [5, 11], max_tokens=10)
    message = str(info.value)
    for needle in ("max_tokens=10", "index 1", "num_tokens=11"):
        assert needle in message


def test_indices_keep_their_values_and_costs_align_by_position() -> None:
    got = batch_by_size([7, 3, 9, 1], [4, 4, 1, 1], max_tokens=8)
    assert as_lists(got) == [[7, 3], [9, 1]]
    with pytest.raises(InputError, match="index 9"):
        batch_by_size([7, 3, 9, 1], [4, 4, 20, 1], max_tokens=8)


@pytest.mark.parametrize("limit", [None, 0, -1])
def test_non_positive_limits_are_unlimited(limit: int | None) -> None:
    assert as_lists(batch_by_size(range(5), [100] * 5, limit, limit)) == [[0, 1, 2, 3, 4]]


def test_empty_input() -> None:
    assert batch_by_size([], [], 10, 2, 2) == []
    assert batch_by_size([], [], 10, 2, 2, drop_last_partial_multiple=True) == []


@pytest.mark.parametrize(
    ("args", "kwargs", "needle"),
    [
        (([0, 1], [1]), {}, "expected 2, got 1"),
        (([0], [1]), {"required_batch_size_multiple": 0}, "required_batch_size_multiple"),
        (([0], [-1]), {}, "expected >= 0, got -1"),
        (([0], [1.5]), {}, "num_tokens must be a 1-D integer array"),
        (([0], [1]), {"max_tokens": "10"}, "max_tokens must be an int"),
    ],
)
def test_input_errors(args: tuple, kwargs: dict, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        batch_by_size(*args, **kwargs)


def test_long_batches_use_doubling_window() -> None:
    tokens = np.ones(10_000, dtype=np.int64)
    got = batch_by_size(np.arange(10_000), tokens, max_tokens=3000, required_batch_size_multiple=7)
    assert [len(b) for b in got] == [2996, 2996, 2996, 1008, 4]
    assert np.array_equal(np.concatenate(got), np.arange(10_000))


# ----------------------------------------------------------------------------------- property test


def spec_batches(
    num_tokens: list[int], max_tokens: int | None, max_sentences: int | None, mult: int, drop_last: bool
) -> list[list[int]]:
    """formats.md §3.3 pseudo-code, literally (quadratic, for small inputs)."""
    mt = -1 if max_tokens is None else max_tokens
    ms = -1 if max_sentences is None else max_sentences
    n = len(num_tokens)
    batches, start = [], 0
    while start < n:
        c = 1
        while start + c + 1 <= n:
            nxt = c + 1
            if ms > 0 and nxt > ms:
                break
            if mt > 0 and nxt * max(num_tokens[start : start + nxt]) > mt:
                break
            c = nxt
        if c > mult:
            c -= c % mult
        batches.append(list(range(start, start + c)))
        start += c
    if drop_last and mult > 1 and batches and len(batches[-1]) % mult != 0:
        batches.pop()
    return batches


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.integers(0, 20), max_size=60),
    st.one_of(st.none(), st.integers(-1, 80)),
    st.one_of(st.none(), st.integers(-1, 12)),
    st.integers(1, 8),
    st.booleans(),
)
def test_matches_spec_loop(
    num_tokens: list[int], max_tokens: int | None, max_sentences: int | None, mult: int, drop_last: bool
) -> None:
    if max_tokens is not None and max_tokens > 0 and num_tokens and max(num_tokens) > max_tokens:
        with pytest.raises(InputError):
            batch_by_size(range(len(num_tokens)), num_tokens, max_tokens, max_sentences, mult, drop_last)
        return
    got = batch_by_size(range(len(num_tokens)), num_tokens, max_tokens, max_sentences, mult, drop_last)
    assert as_lists(got) == spec_batches(num_tokens, max_tokens, max_sentences, mult, drop_last)
