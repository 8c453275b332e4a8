"""fairseq's ``batch_by_size``, re-implemented in numpy (the rule is stated below).

Batches are contiguous runs of the ordered index list. Starting at ``start``, a batch takes the largest
count ``c >= 1`` such that ``c <= max_sentences`` and the padding-aware cost
``c * max(num_tokens[start:start + c]) <= max_tokens`` (limits ``None`` or ``<= 0`` mean unlimited);
a batch longer than ``required_batch_size_multiple`` is rounded *down* to a multiple of it (the
dropped items start the next batch). This is fairseq's ``batch_by_size_vec`` (fairseq >= 2020-12,
up to v0.12.3). ``drop_last_partial_multiple=True`` adds fairseq main's (2022-12) rule: when the
multiple is > 1 and the last batch is not a multiple of it, the last batch is dropped.

The cost ``c * cummax`` is non-decreasing in ``c``, so each batch end is one ``searchsorted`` over a
window that doubles until it contains the end: Python work per batch, never per item.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import InputError, short_repr
from ..util.validate import int_vector, is_int

__all__ = ["batch_by_size"]


def _limit(value: int | None, name: str) -> int:
    """None and values <= 0 mean unlimited (returned as 0)."""
    if value is None:
        return 0
    if not is_int(value):
        raise InputError(f"{name} must be an int or None, got {short_repr(value)}")
    return max(int(value), 0)


def _batch_end(num_tokens: np.ndarray, start: int, max_tokens: int, max_sentences: int) -> int:
    """Largest end such that num_tokens[start:end] fits both limits (at least start + 1)."""
    n = num_tokens.shape[0]
    hard = n if max_sentences == 0 else min(n, start + max_sentences)
    if max_tokens == 0:
        return hard
    window = 64
    while True:
        stop = min(hard, start + window)
        cost = np.maximum.accumulate(num_tokens[start:stop]) * np.arange(1, stop - start + 1, dtype=np.int64)
        count = int(np.searchsorted(cost, max_tokens, side="right"))
        if count < stop - start or stop == hard:
            return start + max(count, 1)
        window *= 2


def batch_by_size(
    indices: Sequence[int] | np.ndarray,
    num_tokens: Sequence[int] | np.ndarray,
    max_tokens: int | None = None,
    max_sentences: int | None = None,
    required_batch_size_multiple: int = 1,
    drop_last_partial_multiple: bool = False,
) -> list[np.ndarray]:
    """Split ordered ``indices`` into batches under a padding-aware token budget (fairseq semantics).

    ``num_tokens[j]`` is the cost of ``indices[j]`` (aligned by position, as fairseq's
    ``num_tokens_vec``). Returns a list of int64 arrays. Raises InputError when a single item is
    longer than ``max_tokens`` (fairseq asserts) or when the inputs do not line up.
    """
    idx = int_vector("indices", indices)
    tok = int_vector("num_tokens", num_tokens)
    if idx.shape != tok.shape:
        raise InputError(f"num_tokens must have one entry per index: expected {idx.shape[0]}, got {tok.shape[0]}")
    if tok.size and int(tok.min()) < 0:
        j = int(np.argmin(tok))
        raise InputError(f"num_tokens[{j}] (index {int(idx[j])}): expected >= 0, got {int(tok[j])}")
    limit_tokens = _limit(max_tokens, "max_tokens")
    limit_sentences = _limit(max_sentences, "max_sentences")
    mult = required_batch_size_multiple
    if not is_int(mult) or mult < 1:
        raise InputError(f"required_batch_size_multiple must be an int >= 1, got {short_repr(mult)}")
    if limit_tokens and tok.size and int(tok.max()) > limit_tokens:
        j = int(np.argmax(tok > limit_tokens))
        raise InputError(
            f"max_tokens={limit_tokens}: every item must fit, got index {int(idx[j])} "
            f"(position {j}) with num_tokens={int(tok[j])}"
        )
    batches: list[np.ndarray] = []
    start, n = 0, idx.shape[0]
    while start < n:
        count = _batch_end(tok, start, limit_tokens, limit_sentences) - start
        if count > mult:
            count -= count % mult
        batches.append(idx[start : start + count].copy())
        start += count
    if drop_last_partial_multiple and mult > 1 and batches and batches[-1].shape[0] % mult != 0:
        batches.pop()
    return batches
