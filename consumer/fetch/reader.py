"""The reader: token rows for a batch of sample ids, from the files' bytes or a packed store's tokens.

One call reads a whole batch into a preallocated ``[B, seqlen]`` array (int64, or int32 on request):

1. the batch's segments are gathered from the index (vectorised; whether the index tiles its rows is
   checked once per index, not per batch);
2. content bytes are read with one :meth:`~consumer.sources.base.ByteSource.read_ranges` call for the whole
   batch (local files: one ``preadv`` per segment; objects: every range in flight at once) straight into a
   staging buffer laid out like the rows (no per-file allocation), and converted to ids with one slice per row
   (a packed store's tokens are copied instead: one slice per contiguous run);
3. header tokens, SEP, TAIL markers, the padded tail tokens and EOF are scattered over the positions
   they own with a few numpy operations for all segments at once (no Python per segment), and each
   row is padded after its last token.

The source checks every file is the version indexed, before and after each read: one that changed (or was
written while it was read: its bytes could mix two versions) raises :class:`~consumer.errors.FileChangedError`
(see :mod:`consumer.sources.local`); no byte of it is served.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InputError
from ..sources.base import ByteSource
from ..sources.store import TokenData
from ..tokens.documents import DocumentTable
from ..tokens.index import SampleIndex, sample_chunks
from ..tokens.vocab import bytes_to_ids
from ..util.ranges import flat_ranges

__all__ = ["read_rows", "read_segments", "packed_runs"]


def read_rows(index: SampleIndex, docs: DocumentTable, sample_ids: np.ndarray,
              content_mask: bool = False, runs: np.ndarray | None = None,
              width: int | None = None, shift: np.ndarray | None = None,
              dtype: npt.DTypeLike = np.int64) -> tuple[np.ndarray, np.ndarray | None]:
    """Token rows ``[B, seqlen]`` (int64, PAD-filled) of ``sample_ids``, and optionally a content mask.

    The content mask is True exactly where a row holds a content token of a file (not header, SEP,
    EOF, TAIL marker or padding): the positions masked-LM may touch. ``runs`` (from
    :func:`packed_runs`, packed stores only) lets a batch whose samples are each one contiguous store
    range be served with one slice copy per row. ``width`` (default ``seqlen``) narrows the rows; it
    must hold the longest selected sample. ``shift`` (one per sample, single-segment samples only:
    ``long_files="crop"``) moves each sample's window that many tokens further into its document.
    """
    L = index.seqlen if width is None else int(width)
    if runs is not None and not content_mask:  # runs: a packed store's (see packed_runs)
        start = runs[sample_ids]
        if start.size == 0 or start.min() >= 0:
            if shift is not None:
                start = start + shift
            lengths = index.sample_tokens()[sample_ids]
            return docs.source.choose(
                files=_needs_store("runs"),
                store=lambda packed: _rows_from_runs(packed, docs.vocab.pad, L, start, lengths, dtype)), None
    segs, rows = index.segments_of(sample_ids)
    starts = index.seg_start[segs] if shift is None else index.seg_start[segs] + shift[rows]
    wide = np.int64  # the narrow index fields (int32) take part in flat-position arithmetic below
    return read_segments(docs, (int(sample_ids.size), L), rows, index.seg_col[segs].astype(wide),
                         index.seg_doc[segs].astype(wide), starts, index.seg_len[segs].astype(wide), content_mask,
                         dtype, tiled=index.tiled)


_RUNS_CHUNK = 1 << 22  # segments whose samples' runs are found at a time


def packed_runs(index: SampleIndex, docs: DocumentTable) -> np.ndarray:
    """Per sample of a packed store: the store position of its first token, or -1 when its segments
    are not one contiguous range of the store. In a store written in
    corpus order every concat window and every diff sample is one range. Found a chunk of samples at a time
    (temporaries of the chunk's segments, not of the index's: 800 MB of int64 at 10^8 segments)."""
    doc_ptr = docs.source.choose(files=_needs_store("packed_runs"), store=lambda packed: packed.doc_ptr)
    ptr = index.seg_ptr
    out = np.full(max(ptr.size - 1, 0), -1, dtype=np.int64)  # -1 also for a sample without segments
    for lo, hi in sample_chunks(ptr, _RUNS_CHUNK):
        a, b = int(ptr[lo]), int(ptr[hi])
        if b == a:
            continue
        first = ptr[lo:hi] - a  # each sample's first segment within the chunk
        src = doc_ptr[index.seg_doc[a:b]] + index.seg_start[a:b]
        follows = np.empty(b - a, dtype=bool)
        follows[0] = False
        np.equal(src[1:], src[:-1] + index.seg_len[a:b - 1].astype(np.int64), out=follows[1:])
        follows[first] = True  # a sample's first segment needs no predecessor
        out[lo:hi] = np.where(np.add.reduceat(~follows, first) == 0, src[first], -1)
    return out


def _needs_store(what: str) -> Callable[[ByteSource], Any]:
    """The ``files`` way of :meth:`~consumer.sources.base.ByteSource.choose` where only a store has a way."""
    def refuse(_: ByteSource) -> Any:
        raise InputError(f"docs: {what} needs documents served from a packed store, got source files")
    return refuse


def _rows_from_runs(packed: TokenData, pad: int, L: int, start: np.ndarray, length: np.ndarray,
                    dtype: npt.DTypeLike = np.int64) -> np.ndarray:
    out, padded = _rows(start.size, L, dtype, length, pad)
    _copy_tokens(out.reshape(-1), packed, start, length, np.arange(start.size, dtype=np.int64) * L, L)
    if not padded:
        _pad_tails(out, length, pad)
    return out


def _rows(B: int, L: int, dtype: npt.DTypeLike, row_len: np.ndarray, pad: int) -> tuple[np.ndarray, bool]:
    """The ``[B, L]`` output of rows holding ``row_len`` tokens from column 0, and whether it is PAD-filled
    already: rows that are mostly padding are filled in one pass first (cheaper than one slice per row after),
    full rows are left uninitialised (every position is written once)."""
    if 2 * int(row_len.sum()) < B * L:
        return np.full((B, L), pad, dtype=dtype), True
    return np.empty((B, L), dtype=dtype), False


def _pad_tails(out: np.ndarray, row_len: np.ndarray, pad: int) -> None:
    """Write PAD after the ``row_len[r]`` real tokens of each row (one slice per padded row)."""
    L = out.shape[1]
    for r, m in enumerate(row_len.tolist()):
        if m < L:
            out[r, m:] = pad


def read_segments(docs: DocumentTable, shape: tuple[int, int], rows: np.ndarray, cols: np.ndarray,
                  d: np.ndarray, a: np.ndarray, n: np.ndarray,
                  content_mask: bool = False, dtype: npt.DTypeLike = np.int64,
                  tiled: bool | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """An int64 array of ``shape`` holding document token ranges, PAD everywhere else.

    Segment ``g`` copies tokens ``[a[g], a[g] + n[g])`` of document ``d[g]`` to row ``rows[g]`` from
    column ``cols[g]`` on. Returns the array and, if asked, the content mask (see :func:`read_rows`).
    When the segments tile each row from column 0 (as every index does: ``tiled=True`` says so, ``None``
    checks) only the tails are padded.
    """
    B, L = shape
    b = a + n
    base = rows * L + cols - a  # flat position of document token 0 of each segment
    row_len = np.bincount(rows, weights=n, minlength=B).astype(np.int64)
    if tiled is None:  # rows filled from column 0 without gaps need PAD only after their end
        tiled = bool(np.all(rows[1:] >= rows[:-1]) and
                     np.array_equal(cols, np.cumsum(n) - n - (np.cumsum(row_len) - row_len)[rows]))
    out, padded = _rows(B, L, dtype, row_len, docs.vocab.pad) if tiled else \
        (np.full((B, L), docs.vocab.pad, dtype=dtype), True)
    flat = out.reshape(-1)
    # content is converted row by row when the rows are tiled: one slice per row, whatever the number of files
    runs = (np.arange(B, dtype=np.int64) * L, row_len) if tiled else (base + a, n)
    docs.source.choose(files=lambda source: _fill_raw(flat, docs, source, d, a, b, base, *runs),
                       store=lambda packed: _fill_packed(flat, packed, d, a, n, base))
    if not padded:
        _pad_tails(out, row_len, docs.vocab.pad)
    return out, (_content_mask(docs, B * L, d, a, b, base).reshape(B, L) if content_mask else None)


def _fill_packed(flat: np.ndarray, packed: TokenData, d: np.ndarray, a: np.ndarray, n: np.ndarray,
                 base: np.ndarray) -> None:
    """Copy token ranges out of a packed store. Neighbouring segments that are contiguous both in the
    store and in the output (a concat window over consecutive documents) are merged into one run, so a
    window costs one slice copy; no per-token work."""
    src = packed.doc_ptr[d] + a
    dst = base + a
    if src.size > 1:
        joins = (src[1:] == src[:-1] + n[:-1]) & (dst[1:] == dst[:-1] + n[:-1])
        starts = np.flatnonzero(np.r_[True, ~joins])
        src, dst, n = src[starts], dst[starts], np.add.reduceat(n, starts)
    _copy_tokens(flat, packed, src, n, dst)


def _copy_tokens(out: np.ndarray, packed: TokenData, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray,
                 longest: int | None = None) -> None:
    """``out[dst[r]:][:cnt[r]] = tokens[src[r]:][:cnt[r]]`` through the store's
    :meth:`~consumer.sources.token_store.TokenStore.copy_ranges` (memory-mapped slices, or every range of the
    batch in flight at once for a store in object storage), which checks the chunk sums first (a damaged chunk
    raises FormatError: none of its bytes reaches ``out``); ``longest``, when known, bounds ``cnt``."""
    packed.tokens.copy_ranges(out, src, cnt, dst, longest)


def _layout(docs: DocumentTable, d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per segment's document: content start, size in bytes, full content tokens, tail length."""
    size = docs.doc_size[d]
    nfull, k = np.divmod(size, docs.vocab.n_bytes)
    return docs.content_start[d], size, nfull, k


# per n_bytes, per tail length k: the bits of a token read from k tail bytes followed by n_bytes - k other bytes
# that hold the tail (big-endian: the high bytes); the padded tail token is the read value and this mask
_TAIL_MASKS = {nb: np.array([((1 << 8 * k) - 1) << 8 * (nb - k) for k in range(nb)], dtype=np.int64)
               for nb in (1, 2, 3)}


def _fill_raw(flat: np.ndarray, docs: DocumentTable, source: ByteSource, d: np.ndarray, a: np.ndarray,
              b: np.ndarray, base: np.ndarray, run_start: np.ndarray, run_len: np.ndarray) -> None:
    """Build document tokens from the source files.

    Content bytes are read (one range per segment, all in one source call) into a staging buffer laid out like
    ``flat`` (token ``i`` of ``flat`` is bytes ``[i * n_bytes, (i + 1) * n_bytes)`` of it), converted to ids with
    one slice per run (``run_start``/``run_len``: the rows, or the segments when they do not tile rows), then
    header, SEP, TAIL markers, padded tail tokens and EOF are scattered over the positions they own.
    """
    vocab = docs.vocab
    nb = vocab.n_bytes
    size = docs.doc_size[d]
    nfull, k = np.divmod(size, nb)  # per segment, not cached per document: 16 bytes a file at 10^7 files
    cs = docs.content_start[d] if docs.with_header else 0  # content starts at token 0 without headers
    marker = cs + nfull  # TAIL_k when the size is not a multiple of n_bytes, else EOF
    # content: full tokens [t0, t1) and, if inside the segment, the padded tail token (after the marker)
    t0 = np.minimum(np.maximum(a - cs, 0), nfull)
    t1 = np.minimum(np.maximum(b - cs, 0), nfull)
    body = t1 > t0
    tail = (k > 0) & (a <= marker + 1) & (marker + 1 < b)
    lo = np.where(body, t0, nfull) * nb  # first byte read
    n_read = np.where(tail, size, t1 * nb) - lo
    # the bytes land at the slot of the first token read: the tail bytes follow the full tokens (so they sit in
    # the marker's slot) or, with no full token in the segment, in the tail's own slot
    land = base + cs + np.where(body, t0, nfull + 1)
    need = np.flatnonzero(n_read > 0)
    if need.size:
        staging = np.empty(flat.size * nb, dtype=np.uint8)
        q = land[need] * nb
        source.read_ranges(d[need], lo[need], n_read[need], staging, q)  # checked: the version indexed
        if nb < 3:
            ids = bytes_to_ids(staging, nb)  # a view
            for s, m in zip(run_start.tolist(), run_len.tolist()):
                flat[s:s + m] = ids[s:s + m]
        else:
            for s, m in zip(run_start.tolist(), run_len.tolist()):
                flat[s:s + m] = bytes_to_ids(staging[s * nb:(s + m) * nb], nb)
        if tail.any():  # before the markers: a tail read after full tokens sits in the marker's slot
            g = np.flatnonzero(tail)
            pos = base[g] + marker[g]
            flat[pos + 1] = flat[pos + ~body[g]] & _TAIL_MASKS[nb][k[g]]  # read into the marker's slot or its own
    hit = (k > 0) & (a <= marker) & (marker < b)
    flat[base[hit] + marker[hit]] = vocab.sep + k[hit]
    eof = marker + 2 * (k > 0)
    hit = (a <= eof) & (eof < b)
    flat[base[hit] + eof[hit]] = vocab.eof
    if docs.with_header:
        h = docs.content_start[d] - 1
        n_h = np.minimum(b, h) - a
        if (n_h > 0).any():
            pos, own = flat_ranges(a, np.maximum(n_h, 0))
            flat[base[own] + pos] = docs.header_tok[docs.header_ptr[docs.doc_header[d]][own] + pos]
        hit = (a <= h) & (h < b)
        flat[base[hit] + h[hit]] = vocab.sep


def _content_mask(docs: DocumentTable, size: int, d: np.ndarray, a: np.ndarray, b: np.ndarray,
                  base: np.ndarray) -> np.ndarray:
    """Flat bool mask: True on content tokens of files (not header, SEP, TAIL marker, EOF or PAD)."""
    cs, _, nfull, k = _layout(docs, d)
    lo = np.maximum(a, cs)
    hi = np.minimum(b, cs + nfull + 2 * (k > 0))
    ok = hi > lo
    edges = np.zeros(size + 1, dtype=np.int8)
    np.add.at(edges, base[ok] + lo[ok], 1)
    np.add.at(edges, base[ok] + hi[ok], -1)
    mask = np.cumsum(edges[:-1], dtype=np.int8).astype(bool)
    marker = cs + nfull
    hit = (k > 0) & (a <= marker) & (marker < b)
    mask[base[hit] + marker[hit]] = False
    return mask
