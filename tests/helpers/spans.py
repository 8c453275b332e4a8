"""Span corruption's inverse for the tests: :func:`rebuild` the rows :func:`~consumer.fetch.spans.span_corrupt`
corrupted."""

from __future__ import annotations

import numpy as np

from consumer.errors import InputError, short_repr
from consumer.util.ranges import flat_ranges


def rebuild(inputs: np.ndarray, labels: np.ndarray, input_lengths: np.ndarray, label_lengths: np.ndarray, *,
            sentinel_top: int, n_sentinels: int) -> list[np.ndarray]:
    """The original tokens of each row (its pieces concatenated) from
    :func:`~consumer.fetch.spans.span_corrupt`'s outputs: each sentinel of the inputs is replaced by the span that
    follows the same sentinel in the labels (EOS dropped).

    Raises :class:`InputError` when a row's inputs and labels do not hold the same sentinels in the same order."""
    low = sentinel_top - n_sentinels + 1
    out = []
    for r in range(inputs.shape[0]):
        x = inputs[r, :max(int(input_lengths[r]) - 1, 0)]
        y = labels[r, :max(int(label_lengths[r]) - 1, 0)]
        sx, sy = (x >= low) & (x <= sentinel_top), (y >= low) & (y <= sentinel_top)
        if not np.array_equal(x[sx], y[sy]) or (y.size and not sy[0]):
            raise InputError(f"row {r}: inputs hold sentinels {short_repr(x[sx].tolist())}, labels "
                             f"{short_repr(y[sy].tolist())}")
        span_len = np.diff(np.append(np.flatnonzero(sy), y.size)) - 1
        width = np.where(sx, 0, 1)
        width[sx] = span_len
        first = np.cumsum(width) - width
        row = np.empty(int(width.sum()), dtype=np.int64)
        row[first[~sx]] = x[~sx]
        fill, _ = flat_ranges(0, span_len)
        row[np.repeat(first[sx], span_len) + fill] = y[~sy]
        out.append(row)
    return out
