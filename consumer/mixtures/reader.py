"""A part of a mixture as the mixture's fetch reads it (:class:`PartReader`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import FileChangedError

__all__ = ["PartReader"]


class PartReader:
    """A part as the mixture's fetch reads it: ``read(sample_ids, query, epoch=, width=, out_dtype=)`` (the part's
    own ``fetch_numpy``, or a blend's fetcher). A change on disk is reported with the part's name (the same
    :class:`FileChangedError`, the part's own message after it)."""

    __slots__ = ("name", "read")

    def __init__(self, name: str, read: Callable[..., dict[str, np.ndarray]]):
        self.name, self.read = name, read

    def fetch_numpy(self, sample_ids: np.ndarray, query: Any = None, *, epoch: int = 0, width: int | None = None,
                    out_dtype: Any = np.int64, into: Any = None) -> dict[str, np.ndarray]:
        """The part's columns of ``query`` for its local ``sample_ids`` (``into``: ``Fetcher.fetch``'s)."""
        try:
            return self.read(sample_ids, query, epoch=epoch, width=width, out_dtype=out_dtype, into=into)
        except FileChangedError as e:
            raise FileChangedError(f"part {self.name!r} changed since the mixture was made: {e}") from e
