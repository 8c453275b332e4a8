"""Cutting documents into windows for the sample index, a chunk of documents at a time.

:func:`pieces` lays the documents of each group (a class for ``concat``, a document for ``diff`` with
``long_files="windows"``) on one token axis, each group's stream starting on a window boundary, and cuts it into
``seqlen`` windows: per piece (the part of one document in one window) its document, start in the document,
length and column, and the pieces of each window. At 10^8 documents an int64 array of their size is 800 MB, so
nothing of that size is made beside the results: starts are found per chunk of documents, twice (once to count
the pieces, once to write them). :func:`first_pieces` is the one piece a document of ``long_files="truncate"``,
:func:`class_ptr_of` the ``class_ptr`` of an index's ``sample_class``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PIECE_CHUNK", "class_ptr_of", "first_pieces", "index_dtype", "pieces"]

PIECE_CHUNK = 1 << 16  # documents cut at a time: temporaries stay a few MB whatever the corpus size
_CHUNK = 1 << 20  # documents summed per group at a time


def index_dtype(bound: int) -> np.dtype:
    """The dtype of an index field whose values are ``0 <= v < bound``: int32 when ``bound <= 2**31``, else int64."""
    return np.dtype(np.int32 if bound <= 2**31 else np.int64)


def class_ptr_of(sample_class: np.ndarray, n_classes: int) -> np.ndarray:
    """``class_ptr`` (int64, ``n_classes + 1``): where each class's samples begin in ``sample_class`` (sorted)."""
    class_ptr = np.zeros(n_classes + 1, dtype=np.int64)
    np.cumsum(np.bincount(sample_class, minlength=n_classes), out=class_ptr[1:])
    return class_ptr


def first_pieces(doc_len: np.ndarray, seqlen: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(doc, start, length)`` of one piece a document, its first ``seqlen`` tokens (``long_files="truncate"``), in
    the dtypes of :func:`pieces` (``length`` not copied when ``doc_len`` is in its dtype already)."""
    n_docs = doc_len.size
    return (np.arange(n_docs, dtype=index_dtype(n_docs)), np.zeros(n_docs, dtype=np.int64),
            np.minimum(doc_len, seqlen).astype(index_dtype(seqlen + 1), copy=False))


def _group_offsets(doc_len: np.ndarray, group: np.ndarray, seqlen: int) -> np.ndarray:
    """Per group ``g``: what a document of ``g`` adds to the tokens of every document before it to get its global
    start, when each group's stream begins on a window boundary (``group`` non-decreasing: each group's documents
    together). Made a chunk of documents at a time: no array of the documents' size."""
    n_groups = int(group[-1]) + 1 if group.size else 0
    group_len = np.zeros(n_groups, dtype=np.int64)
    for a in range(0, group.size, _CHUNK):  # the groups of a chunk are group[a] .. its last
        g = group[a:a + _CHUNK]
        g0 = int(g[0])
        part = np.bincount(g - g0, weights=doc_len[a:a + _CHUNK]).astype(np.int64)
        group_len[g0:g0 + part.size] += part
    windows = -(-group_len // seqlen)
    return (np.cumsum(windows) - windows) * seqlen - (np.cumsum(group_len) - group_len)


def _doc_chunks(doc_len: np.ndarray, group: np.ndarray, seqlen: int):
    """``(lo, hi, starts)``: the global starts of documents ``lo .. hi - 1`` on one token axis where every group
    begins at a multiple of ``seqlen`` (so windows are dense), a chunk of :data:`PIECE_CHUNK` documents at a time."""
    offsets = _group_offsets(doc_len, group, seqlen)
    before = 0  # tokens of the documents before the chunk
    for lo in range(0, doc_len.size, PIECE_CHUNK):
        dl = doc_len[lo:lo + PIECE_CHUNK]
        starts = np.cumsum(dl, dtype=np.int64)
        end = int(starts[-1])
        starts -= dl
        starts += before + offsets[group[lo:lo + dl.size]]
        before += end
        yield lo, lo + dl.size, starts


def pieces(doc_len: np.ndarray, group: np.ndarray, seqlen: int):
    """Cut documents into ``seqlen`` windows, each group's stream of documents on its own windows.

    Returns (doc, start-in-doc, length, column) per piece, ordered by global position, and the number of pieces of
    each window. Two passes over chunks of documents (:func:`_doc_chunks`): the first counts the pieces, the second
    writes them into the final arrays, in their final dtypes; no other array as large as the documents or the
    pieces is made (at 10^8 documents an int64 one is 800 MB).
    """
    total = n_windows = 0
    for lo_d, hi_d, ds in _doc_chunks(doc_len, group, seqlen):
        dl = doc_len[lo_d:hi_d]
        total += int(((ds + dl - 1) // seqlen - ds // seqlen + 1).sum())
        n_windows = int((ds[-1] + dl[-1] - 1) // seqlen) + 1  # the last document ends the last window
    doc = np.empty(total, dtype=index_dtype(doc_len.size))
    start = np.empty(total, dtype=np.int64)
    length = np.empty(total, dtype=index_dtype(seqlen + 1))  # lengths <= seqlen, columns < seqlen
    col = np.empty(total, dtype=index_dtype(seqlen))
    counts = np.zeros(n_windows, dtype=np.int64)
    a = 0
    for lo_d, hi_d, doc_start in _doc_chunks(doc_len, group, seqlen):
        dl = doc_len[lo_d:hi_d]
        nn = (doc_start + dl - 1) // seqlen - doc_start // seqlen + 1  # pieces of each document
        at = np.empty(nn.size + 1, dtype=np.int64)  # first piece of each document
        at[0] = a
        np.cumsum(nn, out=at[1:])
        at[1:] += a
        b = int(at[-1])
        local = np.repeat(np.arange(nn.size, dtype=np.int64), nn)
        ds = doc_start[local]
        # window of piece k = k - (pieces before its document) + first window of its document
        window = np.arange(a, b, dtype=np.int64) - np.repeat(at[:-1] - doc_start // seqlen, nn)
        lo = np.maximum(window * seqlen, ds)
        hi = np.minimum((window + 1) * seqlen, ds + dl[local])
        doc[a:b] = local + lo_d
        start[a:b] = lo - ds
        length[a:b] = hi - lo
        col[a:b] = lo - window * seqlen
        if b > a:
            counts[int(window[0]):int(window[-1]) + 1] += np.bincount(window - window[0])
        a = b
    return doc, start, length, col, counts
