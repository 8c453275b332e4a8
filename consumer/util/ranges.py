"""Flattened ranges: :func:`flat_ranges`, every ``arange(s, s + n)`` of a batch of ranges laid end to end, with
the range each position comes from (vectorised: no Python per range)."""

from __future__ import annotations

import numpy as np

__all__ = ["flat_ranges"]


def flat_ranges(starts: np.ndarray | int, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flattened ``arange(starts[i], starts[i] + lengths[i])`` for every range ``i`` (``lengths >= 0``), and the
    owner ``i`` of each position (int64). ``starts=0`` gives each position's index within its range."""
    lengths = np.asarray(lengths)
    owner = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
    within = np.arange(owner.size, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    if isinstance(starts, np.ndarray):
        return starts[owner] + within, owner
    return within + starts if starts else within, owner
