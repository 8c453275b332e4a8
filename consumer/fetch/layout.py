"""Where the documents of a batch sit in its rows, and the document-aware columns made from it.

Every row of every style is a run of *document pieces* laid from column 0 without gaps (the index's segments:
a piece is one document's tokens ``[start, start + length)``), then PAD. The boundaries come from the sample
index, not from EOF tokens, so they are exact for every style and store, a peer's included (whose documents
carry no EOF of ours). :class:`BatchLayout` holds the pieces of one batch (row, column, length, document, start
in the document) and makes the columns ``document_ids``, ``position_ids``, ``cu_seqlens`` and ``max_seqlen``:

- ``document_ids`` ``[B, L]`` int32: the row-local ordinal of each token's piece (0, 1, ... in each row), -1 on
  PAD. A ``concat`` row's first piece may continue a document begun in the row before: inside the row it is a
  document of its own (attention cannot reach the previous row anyway).
- ``position_ids`` ``[B, L]`` int64: the position inside the piece, restarting at 0 at each piece (Megatron's
  ``reset_position_ids``, Hugging Face's flattened ``position_ids``); 0 on PAD.
- ``cu_seqlens`` ``[P + 1]`` int32: FlashAttention's variable-length form over the batch's non-PAD tokens in
  row-major order (``input_array[attention_mask.bool()]``): 0, then the running sum of each piece's length.
- ``max_seqlen``: int32 scalar, the longest piece.

Everything is vectorised over the pieces and the ``B x L`` positions: no Python per piece or row.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..tokens.index import SampleIndex

__all__ = ["BatchLayout", "DOCUMENT_COLUMNS", "RAGGED_COLUMNS", "batch_layout"]

DOCUMENT_COLUMNS = ("position_ids", "document_ids", "cu_seqlens", "max_seqlen")
_FEW_ROWS = 64  # up to this many rows, [B, L] columns are laid row by row (one slice each), else by a mask
RAGGED_COLUMNS = ("cu_seqlens",)  # 1-D, of a length that varies per batch: at most one entry per token, and one more


@dataclass
class BatchLayout:
    """The document pieces of a batch of ``rows`` rows of ``width`` tokens, in row-major order (int64 arrays)."""

    rows: int
    width: int
    row: np.ndarray     # [P] the row of each piece
    col: np.ndarray     # [P] its first column
    length: np.ndarray  # [P] its tokens in the row
    doc: np.ndarray     # [P] its document
    start: np.ndarray   # [P] its first token's position inside the document

    def clipped(self, width: int) -> BatchLayout:
        """The layout of the first ``width`` columns (pieces past them dropped, the one across them shortened)."""
        if width >= self.width:
            return self
        end = np.minimum(self.col + self.length, width)
        keep = end > self.col
        return BatchLayout(self.rows, width, self.row[keep], self.col[keep], (end - self.col)[keep],
                           self.doc[keep], self.start[keep])

    @cached_property
    def row_len(self) -> np.ndarray:
        """Non-PAD tokens of each row."""
        return np.bincount(self.row, weights=self.length, minlength=self.rows).astype(np.int64)

    @cached_property
    def real(self) -> np.ndarray:
        """``[B, L]`` bool: True on the rows' tokens, False on PAD."""
        return np.arange(self.width, dtype=np.int64)[None, :] < self.row_len[:, None]

    @cached_property
    def ordinal(self) -> np.ndarray:
        """Each piece's ordinal inside its row (0 for a row's first piece)."""
        first = np.ones(self.row.size, dtype=bool)
        first[1:] = self.row[1:] != self.row[:-1]
        at = np.flatnonzero(first)
        return np.arange(self.row.size, dtype=np.int64) - np.repeat(at, np.diff(np.append(at, self.row.size)))

    @cached_property
    def last(self) -> np.ndarray:
        """The position (among the pieces) of each row's last piece, for the rows that have pieces."""
        ends = np.ones(self.row.size, dtype=bool)
        ends[:-1] = self.row[1:] != self.row[:-1]
        return np.flatnonzero(ends)

    def lengthened(self, extend: np.ndarray, width: int) -> BatchLayout:
        """The layout over ``width`` columns with each row's last piece ``extend[row]`` tokens longer (0 or 1)."""
        length = self.length.copy()
        length[self.last] += extend[self.row[self.last]]
        return BatchLayout(self.rows, width, self.row, self.col, length, self.doc, self.start)

    def _running(self, step_at_start: np.ndarray, base: int, fill: int, dtype: type) -> np.ndarray:
        """``[B, L]`` of ``dtype``: a running sum along each row of ``base`` per token, restarted at each piece by
        ``step_at_start`` (the value written at each piece's first column instead; 0 at a row's first piece), then
        ``fill`` on PAD. One array of the batch's size, summed in place: temporaries of a batch's size would come
        fresh from the kernel at every batch when the allocator hands freed memory back."""
        B, W = self.rows, self.width
        out: np.ndarray = np.full((B, W), base, dtype=dtype)
        out[self.row, self.col] = step_at_start
        np.cumsum(out, axis=1, out=out)
        lens = self.row_len
        if B <= _FEW_ROWS:
            for r, n in enumerate(lens.tolist()):
                if n < W:
                    out[r, n:] = fill
        else:
            out[~self.real] = fill
        return out

    def document_ids(self) -> np.ndarray:
        """``[B, L]`` int32: row-local document ordinal, -1 on PAD."""
        return self._running(np.minimum(self.ordinal, 1).astype(np.int32), 0, -1, np.int32)

    def position_ids(self) -> np.ndarray:
        """``[B, L]`` int64: position inside each piece, 0 on PAD."""
        restart = np.zeros(self.length.size, dtype=np.int64)
        later = self.ordinal > 0  # the running sum reached the previous piece's last position: step back to 0
        restart[later] = 1 - self.length[np.flatnonzero(later) - 1]
        return self._running(restart, 1, 0, np.int64)

    def cu_seqlens(self) -> np.ndarray:
        """``[P + 1]`` int32: 0 and the running sum of the pieces' lengths (row-major)."""
        out = np.zeros(self.length.size + 1, dtype=np.int32)
        np.cumsum(self.length, out=out[1:])
        return out

    def max_seqlen(self) -> np.ndarray:
        """The longest piece, as a 0-d int32 array."""
        return np.array(int(self.length.max()) if self.length.size else 0, dtype=np.int32)


def batch_layout(index: SampleIndex, sample_ids: np.ndarray, width: int,
                 shift: np.ndarray | None = None) -> BatchLayout:
    """The pieces of ``sample_ids``' rows (``width`` columns). ``shift`` moves each sample's window that many
    tokens into its document (``long_files="crop"``)."""
    segs, rows = index.segments_of(sample_ids)
    start = index.seg_start[segs].astype(np.int64)
    if shift is not None:
        start = start + shift[rows]
    length = index.seg_len[segs].astype(np.int64)
    return BatchLayout(int(sample_ids.size), int(width), rows.astype(np.int64), index.seg_col[segs].astype(np.int64),
                       length, index.seg_doc[segs].astype(np.int64), start)
