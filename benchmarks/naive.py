"""Naive readers: what a user writes by hand with open/read/frombuffer, producing ``consumer``'s exact rows.

They take the corpus as given (``{class: [paths]}``), work out the layout themselves from the file sizes
(classes by name, files by path; a document is the file's tokens then EOF, no header: compare them with
``metadata=None`` datasets), and never look at ``consumer``'s index. Token contract: ``n_bytes`` bytes
big-endian per token; a tail of ``k`` bytes becomes ``TAIL_k`` then one zero-padded token; rows are padded
with PAD. Ids come from the public :class:`consumer.Vocab` (only numbers, no code).

- :class:`NaiveDiff`: per sample, open the file, read at most the bytes the row needs, ``frombuffer``, pad;
- :class:`NaiveConcat`: per window, for every file the window spans, open, seek, read the needed byte
  range, ``frombuffer``, place.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["NaiveDiff", "NaiveConcat", "tokens_of"]

_DTYPES = {1: ">u1", 2: ">u2"}


def tokens_of(data: bytes, n_bytes: int) -> np.ndarray:
    """Full tokens of a byte string whose length is a multiple of ``n_bytes`` (int64)."""
    if n_bytes in _DTYPES:
        return np.frombuffer(data, dtype=_DTYPES[n_bytes]).astype(np.int64)
    b = np.frombuffer(data, dtype=np.uint8).reshape(-1, n_bytes).astype(np.int64)
    out = np.zeros(b.shape[0], dtype=np.int64)
    for j in range(n_bytes):
        out = (out << 8) | b[:, j]
    return out


class _Layout:
    """Files in corpus order, their sizes and document lengths in tokens (content, tail, EOF)."""

    def __init__(self, fps: dict[str, list[str]], n_bytes: int, eof: int, pad: int, tail_base: int):
        self.paths = [p for c in sorted(fps) for p in sorted(fps[c])]
        self.cls = np.array([i for i, c in enumerate(sorted(fps)) for _ in fps[c]], dtype=np.int64)
        self.sizes = np.array([os.path.getsize(p) for p in self.paths], dtype=np.int64)
        self.nb, self.eof, self.pad, self.tail_base = n_bytes, eof, pad, tail_base
        self.nfull = self.sizes // n_bytes
        rem = self.sizes % n_bytes
        self.doc_len = self.nfull + np.where(rem > 0, 2, 0) + 1

    def doc_slice(self, d: int, a: int, b: int) -> np.ndarray:
        """Tokens ``[a, b)`` of document ``d``: one ranged read of the file, specials appended by hand."""
        nb, nfull, size = self.nb, int(self.nfull[d]), int(self.sizes[d])
        parts = []
        hi = min(b, nfull)
        if a < hi:
            with open(self.paths[d], "rb") as f:
                f.seek(a * nb)
                parts.append(tokens_of(f.read((hi - a) * nb), nb))
        rem = size - nfull * nb
        extra = []
        if rem:
            with open(self.paths[d], "rb") as f:
                f.seek(nfull * nb)
                tail = f.read(rem) + b"\0" * (nb - rem)
            extra = [self.tail_base + rem, int(tokens_of(tail, nb)[0])]
        extra.append(self.eof)
        lo = max(a, nfull) - nfull
        if lo < b - nfull:
            parts.append(np.array(extra[lo:b - nfull], dtype=np.int64))
        return np.concatenate(parts) if len(parts) > 1 else (parts[0] if parts else np.zeros(0, np.int64))


class NaiveDiff(_Layout):
    """diff style (``long_files="truncate"``): sample ``i`` is file ``i``'s document cut to ``seqlen``."""

    def __init__(self, fps, n_bytes: int, seqlen: int, vocab):
        super().__init__(fps, n_bytes, vocab.eof, vocab.pad, vocab.sep)
        self.seqlen = seqlen

    def fetch(self, ids: np.ndarray) -> np.ndarray:
        """The padded rows of the given samples."""
        out = np.full((ids.size, self.seqlen), self.pad, dtype=np.int64)
        for r, d in enumerate(ids.tolist()):
            row = self.doc_slice(d, 0, min(int(self.doc_len[d]), self.seqlen))
            out[r, :row.size] = row
        return out


class NaiveConcat(_Layout):
    """concat style: per class one stream of documents cut into ``seqlen`` windows, last one padded."""

    def __init__(self, fps, n_bytes: int, seqlen: int, vocab):
        super().__init__(fps, n_bytes, vocab.eof, vocab.pad, vocab.sep)
        self.seqlen = seqlen
        windows = []  # (class stream offsets, first window id) per class
        first = 0
        self.class_windows = []
        for c in range(int(self.cls.max()) + 1):
            docs = np.flatnonzero(self.cls == c)
            starts = np.concatenate([[0], np.cumsum(self.doc_len[docs])])
            n = -(-int(starts[-1]) // seqlen)
            windows.append((docs, starts, first, n))
            first += n
        self.windows = windows
        self.n_samples = first

    def fetch(self, ids: np.ndarray) -> np.ndarray:
        """The padded windows of the given samples."""
        L = self.seqlen
        out = np.full((ids.size, L), self.pad, dtype=np.int64)
        for r, s in enumerate(ids.tolist()):
            for docs, starts, first, n in self.windows:  # noqa: B007  (the matching class is used below)
                if first <= s < first + n:
                    break
            lo, hi = (s - first) * L, min((s - first + 1) * L, int(starts[-1]))
            j = int(np.searchsorted(starts, lo, side="right")) - 1
            while lo < hi:
                d = int(docs[j])
                a = lo - int(starts[j])
                b = min(hi, int(starts[j + 1])) - int(starts[j])
                piece = self.doc_slice(d, a, b)
                col = lo - (s - first) * L
                out[r, col:col + piece.size] = piece
                lo += piece.size
                j += 1
        return out
