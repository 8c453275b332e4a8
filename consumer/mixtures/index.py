"""A mixture's sample index: what the batch order (``EpochPlan``) and selections need of it, made from the parts'
indexes without Python per sample. Part ``p``'s samples are the global ids ``class_ptr[p] .. class_ptr[p + 1] - 1``
(in the order of the parts), so a part is a class and owns one contiguous block."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

__all__ = ["MixtureIndex"]


class MixtureIndex:
    """``class_ptr`` (int64 offsets of the parts), ``sample_class`` (int32, the part of every sample, built on first
    use), ``sample_tokens()`` (the parts' real tokens per sample, concatenated, on first use) and ``seqlen``."""

    def __init__(self, parts: list[Any], seqlen: int):
        self._parts = parts
        self.seqlen = int(seqlen)
        sizes = np.array([len(p) for p in parts], dtype=np.int64)
        self.class_ptr = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(sizes)])

    def __len__(self) -> int:
        return int(self.class_ptr[-1])

    def samples_per_class(self) -> np.ndarray:
        """Samples of each part."""
        return np.diff(self.class_ptr)

    @cached_property
    def sample_class(self) -> np.ndarray:
        """``[S]`` int32: the part index of every sample (a constant block per part)."""
        return np.repeat(np.arange(len(self._parts), dtype=np.int32), self.samples_per_class())

    @cached_property
    def _sample_tokens(self) -> np.ndarray:
        tokens = [np.asarray(p.index.sample_tokens(), dtype=np.int64) for p in self._parts]
        return np.concatenate(tokens) if tokens else np.zeros(0, dtype=np.int64)

    def sample_tokens(self) -> np.ndarray:
        """``[S]`` int64: real (non-PAD) tokens of every sample, the parts' concatenated (cached)."""
        return self._sample_tokens

    def part_of(self, sample_ids: np.ndarray) -> np.ndarray:
        """The part index of each global sample id (ids in range; an empty part owns none)."""
        out: np.ndarray = np.searchsorted(self.class_ptr, sample_ids, side="right") - 1
        return out

    def local_of(self, sample_ids: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """Each global id's sample in its part (``owner``: :meth:`part_of` of the ids)."""
        out: np.ndarray = sample_ids - self.class_ptr[owner]
        return out
