"""Many documents in one write: the ``(tokens, lengths, first)`` segments the store writers take.

``tokens`` holds segments of ``lengths`` tokens back to back; a segment whose ``first`` is True starts a new
document, and only the first segment of a call may be False: it continues the document written last (a document
longer than a chunk is written over several calls). :func:`split_segments` checks that shape and splits off the
continuation, so each writer's batched method (``IndexedWriter.add_segments``, ``PbinWriter.add_segments``) is its
own bookkeeping only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError, short_repr

__all__ = ["split_segments"]


def split_segments(arr: np.ndarray, lengths: Any, first: Any, what: str
                   ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """``(continuation, tokens, lengths)``: the tokens that continue the ``what`` written last (None when the first
    segment starts a new one), then the new ones' tokens and lengths (int64). InputError naming ``lengths`` or
    ``first`` when the segments do not have the shape the module docstring gives."""
    lens = np.asarray(lengths, dtype=np.int64).reshape(-1)
    firsts = np.asarray(first, dtype=bool).reshape(-1)
    if lens.shape != firsts.shape or int(lens.sum()) != arr.shape[0] or (lens.size and int(lens.min()) < 0):
        raise InputError(f"lengths: expected {firsts.size} non-negative lengths summing to len(tokens) = "
                         f"{arr.shape[0]}, got {short_repr(lens.tolist())}")
    head = None
    if lens.size and not firsts[0]:
        head, arr, lens, firsts = arr[:int(lens[0])], arr[int(lens[0]):], lens[1:], firsts[1:]
    if not firsts.all():
        raise InputError(f"first: only the first segment of a call may continue a {what}, got False at "
                         f"{int(np.argmin(firsts)) + 1 + (head is not None)}")
    return head, arr, lens
