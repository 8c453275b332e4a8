"""Token-budget batches of an epoch plan: fairseq's ``batch_by_size`` over length-sorted samples, dealt to ranks.

Kept apart from :mod:`consumer.training.plan` because it is the one batch shape that is not a slice of the
epoch's order: batches vary in size (``rows x longest row <= max_tokens``) and are made once per plan.
"""

from __future__ import annotations

import numpy as np

__all__ = ["budget_batches", "deal_batches"]


def budget_batches(ids: np.ndarray, lengths: np.ndarray, tie_rank: np.ndarray, max_tokens: int,
                   max_rows: int | None, multiple: int) -> list[np.ndarray]:
    """``ids`` sorted by ``lengths`` (equal lengths by ``tie_rank``) and cut under the padding-aware budget
    ``rows x longest row <= max_tokens`` (at most ``max_rows`` rows; a batch longer than ``multiple`` is cut down
    to a multiple of it). ``lengths`` and ``tie_rank`` are indexed by sample id."""
    from ..formats.fairseq_batching import batch_by_size  # noqa: PLC0415  (loaded only by a plan with a budget)

    order = ids[np.lexsort((tie_rank[ids], lengths[ids]))]
    return batch_by_size(order, lengths[order], max_tokens=max_tokens, max_sentences=max_rows,
                         required_batch_size_multiple=multiple)


def deal_batches(n_batches: int, world_size: int, drop_last: bool) -> tuple[np.ndarray, int]:
    """Which of an epoch's ``n_batches`` batches (positions in its serving order) the ranks take, and how many
    each rank gets: rank ``r`` takes positions ``r, r + W, ...`` of the returned array. ``drop_last`` drops an
    incomplete last step; otherwise the first batches repeat (cyclically) to complete it."""
    if drop_last:
        steps = n_batches // world_size
        return np.arange(steps * world_size, dtype=np.int64), steps
    steps = -(-n_batches // world_size)
    return np.resize(np.arange(n_batches, dtype=np.int64), steps * world_size), steps
