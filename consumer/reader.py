"""The raw reader: token rows for a batch of sample ids, read straight from the source files.

One call reads a whole batch into a preallocated ``[B, seqlen]`` int64 array (filled with PAD):

1. the batch's segments are gathered from the index (vectorised);
2. header tokens, SEP, TAIL markers and EOF are scattered with a few numpy operations for all
   segments at once (no Python per segment);
3. content bytes are read with one ``os.preadv`` per segment straight into one scratch buffer (no
   per-file allocation), converted to ids in one vectorised pass, and copied into the rows with one
   slice assignment per segment.

Files are opened read-only (``O_RDONLY | O_CLOEXEC``) for the duration of one read and never
written. A file that became shorter than at build time raises :class:`FileChangedError`.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import numpy as np

from .documents import DocumentTable, PackedTokens
from .errors import FileChangedError, InputError
from .formats.mmidx import copy_ranges
from .index import SampleIndex
from .vocab import bytes_to_ids

__all__ = ["read_rows", "read_segments", "packed_runs"]

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flattened ``arange(s, s+n)`` for every (s, n), and the owner (position in ``starts``) of each."""
    owner = np.repeat(np.arange(starts.size, dtype=np.int64), lengths)
    within = np.arange(owner.size, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return starts[owner] + within, owner


def read_rows(index: SampleIndex, docs: DocumentTable, sample_ids: np.ndarray,
              content_mask: bool = False, runs: np.ndarray | None = None,
              width: int | None = None, shift: np.ndarray | None = None,
              dtype: Any = np.int64) -> tuple[np.ndarray, np.ndarray | None]:
    """Token rows ``[B, seqlen]`` (int64, PAD-filled) of ``sample_ids``, and optionally a content mask.

    The content mask is True exactly where a row holds a content token of a file (not header, SEP,
    EOF, TAIL marker or padding): the positions masked-LM may touch. ``runs`` (from
    :func:`packed_runs`, packed stores only) lets a batch whose samples are each one contiguous store
    range be served with one slice copy per row. ``width`` (default ``seqlen``) narrows the rows; it
    must hold the longest selected sample. ``shift`` (one per sample, single-segment samples only:
    ``long_files="crop"``) moves each sample's window that many tokens further into its document.
    """
    L = index.seqlen if width is None else int(width)
    if runs is not None and not content_mask and docs.packed is not None:
        start = runs[sample_ids]
        if start.size == 0 or start.min() >= 0:
            if shift is not None:
                start = start + shift
            lengths = index.sample_tokens()[sample_ids]
            return _rows_from_runs(docs.packed.tokens, docs.vocab.pad, L, start, lengths, dtype), None
    segs, rows = index.segments_of(sample_ids)
    starts = index.seg_start[segs] if shift is None else index.seg_start[segs] + shift[rows]
    return read_segments(docs, (int(sample_ids.size), L), rows, index.seg_col[segs],
                         index.seg_doc[segs], starts, index.seg_len[segs], content_mask, dtype)


def packed_runs(index: SampleIndex, docs: DocumentTable) -> np.ndarray:
    """Per sample of a packed store: the store position of its first token, or -1 when its segments
    are not one contiguous range of the store. In a store written in
    corpus order every concat window and every diff sample is one range."""
    if docs.packed is None:
        raise InputError("docs: packed_runs needs documents served from a packed store, got source files")
    src = docs.packed.doc_ptr[index.seg_doc] + index.seg_start
    follows = np.r_[False, src[1:] == src[:-1] + index.seg_len[:-1]]
    follows[index.seg_ptr[:-1]] = True  # a sample's first segment needs no predecessor
    broken = np.add.reduceat(~follows, index.seg_ptr[:-1]) if src.size else np.zeros(0, dtype=np.int64)
    return np.where(broken == 0, src[index.seg_ptr[:-1]], -1)


def _rows_from_runs(tokens: np.ndarray, pad: int, L: int, start: np.ndarray, length: np.ndarray,
                    dtype: Any = np.int64) -> np.ndarray:
    out = np.empty((start.size, L), dtype=dtype)
    _copy_tokens(out.reshape(-1), tokens, start, length, np.arange(start.size, dtype=np.int64) * L)
    _pad_tails(out, length, pad)
    return out


def _pad_tails(out: np.ndarray, row_len: np.ndarray, pad: int) -> None:
    """Write PAD after the ``row_len[r]`` real tokens of each row (one slice per padded row)."""
    L = out.shape[1]
    for r, m in enumerate(row_len.tolist()):
        if m < L:
            out[r, m:] = pad


def read_segments(docs: DocumentTable, shape: tuple[int, int], rows: np.ndarray, cols: np.ndarray,
                  d: np.ndarray, a: np.ndarray, n: np.ndarray,
                  content_mask: bool = False, dtype: Any = np.int64) -> tuple[np.ndarray, np.ndarray | None]:
    """An int64 array of ``shape`` holding document token ranges, PAD everywhere else.

    Segment ``g`` copies tokens ``[a[g], a[g] + n[g])`` of document ``d[g]`` to row ``rows[g]`` from
    column ``cols[g]`` on. Returns the array and, if asked, the content mask (see :func:`read_rows`).
    When the segments tile each row from column 0 (as every index does) only the tails are padded.
    """
    B, L = shape
    b = a + n
    base = rows * L + cols - a  # flat position of document token 0 of each segment
    row_len = np.bincount(rows, weights=n, minlength=B).astype(np.int64)
    # rows filled from column 0 without gaps (what the index produces) need PAD only after their end
    tiled = bool(np.all(rows[1:] >= rows[:-1]) and
                 np.array_equal(cols, np.cumsum(n) - n - (np.cumsum(row_len) - row_len)[rows]))
    out = np.empty((B, L), dtype=dtype) if tiled else np.full((B, L), docs.vocab.pad, dtype=dtype)
    flat = out.reshape(-1)
    if docs.packed is not None:
        _fill_packed(flat, docs.packed, d, a, n, base)
    else:
        _fill_raw(flat, docs, d, a, b, base)
    if tiled:
        _pad_tails(out, row_len, docs.vocab.pad)
    return out, (_content_mask(docs, B * L, d, a, b, base).reshape(B, L) if content_mask else None)


def _fill_packed(flat: np.ndarray, packed: PackedTokens, d: np.ndarray, a: np.ndarray, n: np.ndarray,
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
    _copy_tokens(flat, packed.tokens, src, n, dst)


def _copy_tokens(out: np.ndarray, tokens: Any, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray) -> None:
    """``out[dst[r]:][:cnt[r]] = tokens[src[r]:][:cnt[r]]`` from a memory-mapped store, or through the token
    source's own ``copy_ranges`` (a store in object storage: every range of the batch in flight at once)."""
    if isinstance(tokens, np.ndarray):
        copy_ranges(out, tokens, src, cnt, dst)
    else:
        tokens.copy_ranges(out, src, cnt, dst)


def _layout(docs: DocumentTable, d: np.ndarray):
    """Per segment's document: content start, size in bytes, full content tokens, tail length."""
    size = docs.doc_size[d]
    nfull, k = np.divmod(size, docs.vocab.n_bytes)
    return docs.content_start[d], size, nfull, k


def _fill_raw(flat: np.ndarray, docs: DocumentTable, d: np.ndarray, a: np.ndarray, b: np.ndarray,
              base: np.ndarray) -> None:
    """Build document tokens from the source files: scatter header/SEP/EOF/TAIL, read content bytes."""
    vocab = docs.vocab
    nb = vocab.n_bytes
    cs, size, nfull, k = _layout(docs, d)
    eof = cs + nfull + 2 * (k > 0)

    def put(pos: np.ndarray, value) -> None:
        hit = (a <= pos) & (pos < b)
        flat[base[hit] + pos[hit]] = value if np.isscalar(value) else value[hit]

    if docs.with_header:
        h = cs - 1
        n_h = np.clip(np.minimum(b, h) - a, 0, None)
        if n_h.any():
            pos, own = _ranges(a, n_h)
            src = docs.header_ptr[docs.doc_header[d]][own] + pos
            flat[base[own] + pos] = docs.header_tok[src]
        put(h, vocab.sep)
    put(eof, vocab.eof)
    has_tail = k > 0
    if has_tail.any():
        marker = cs + nfull
        hit = has_tail & (a <= marker) & (marker < b)
        flat[base[hit] + marker[hit]] = vocab.sep + k[hit]

    # content: full tokens [t0, t1) and, if inside the segment, the padded tail token
    t0 = np.clip(a - cs, 0, nfull)
    t1 = np.clip(b - cs, 0, nfull)
    want_tail = has_tail & (a <= cs + nfull + 1) & (cs + nfull + 1 < b)
    byte_lo = np.where(t1 > t0, t0 * nb, nfull * nb)
    byte_hi = np.where(want_tail, size, t1 * nb)
    n_bytes_read = np.maximum(byte_hi - byte_lo, 0)
    span = -(-n_bytes_read // nb) * nb  # rounded up to whole tokens (the tail is zero-padded)
    need = np.flatnonzero(n_bytes_read > 0)
    if need.size:
        scratch = np.zeros(int(span[need].sum()), dtype=np.uint8)
        q = np.cumsum(span[need]) - span[need]
        paths = docs.paths
        if docs.remote is not None:  # every range of the batch in flight at once
            dn = d[need].tolist()
            docs.remote.reader.read_ranges([paths[i] for i in dn], byte_lo[need], n_bytes_read[need], scratch, q,
                                           expected_etags=[docs.remote.etags[i] for i in dn],
                                           expected_sizes=docs.doc_size[d[need]])
        else:
            view = scratch.data
            dn = d[need]
            sizes, stamps = docs.doc_size[dn].tolist(), docs.doc_mtime[dn].tolist()
            idents = [None] * dn.size if docs.doc_ident is None else docs.doc_ident[dn].tolist()
            for k, (qq, lo, n) in enumerate(zip(q.tolist(), byte_lo[need].tolist(), n_bytes_read[need].tolist())):
                _read_exact(paths[dn[k]], view[qq:qq + n], lo, sizes[k], stamps[k], idents[k])
        ids = bytes_to_ids(scratch, nb)
        tok_q = q // nb
        n_full = (t1 - t0)[need]
        dst = base[need] + cs[need] + t0[need]
        for src, dd, m in zip(tok_q.tolist(), dst.tolist(), n_full.tolist()):
            if m:
                flat[dd:dd + m] = ids[src:src + m]
        tails = np.flatnonzero(want_tail[need])
        if tails.size:
            g = need[tails]
            flat[base[g] + cs[g] + nfull[g] + 1] = ids[tok_q[tails] + n_full[tails]]


def _check_same(path: str, st: os.stat_result, size: int, stamp: int, ident: list | None) -> None:
    """The opened file must be the one indexed: a regular file of the same size, change stamp
    (``max(mtime, ctime)``: users cannot set the ctime back) and, when known, device and inode."""
    mode = st.st_mode
    if not stat.S_ISREG(mode):
        kind = "Is a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
        raise FileChangedError(f"cannot read {path!r}: {kind} now; it was a regular file at build time "
                               "(replaced, or swapped for a link?)")
    if st.st_size != size:
        how = "shorter than at build time" if st.st_size < size else "longer than at build time (appended to?)"
        raise FileChangedError(f"{path!r} is {how}: size {st.st_size} bytes, indexed {size}")
    if ident is not None and ident[1] and (st.st_dev, st.st_ino) != tuple(ident):
        raise FileChangedError(f"{path!r} changed since the build: it is another file now (device/inode "
                               f"{st.st_dev}/{st.st_ino}, indexed {ident[0]}/{ident[1]}): replaced or swapped")
    if stamp and max(st.st_mtime_ns, st.st_ctime_ns) != stamp:
        raise FileChangedError(f"{path!r} changed since the build: modified at {max(st.st_mtime_ns, st.st_ctime_ns)} "
                               f"ns, indexed {stamp} ns (rewritten in place?); rebuild the dataset")


def _read_exact(path: str, into: memoryview, offset: int, size: int = -1, stamp: int = 0,
                ident: list | None = None) -> None:
    """Fill ``into`` with the file's bytes from ``offset``: one ``preadv`` per call in practice, looping
    for reads the kernel splits (over 2 GiB). The opened descriptor is checked with one ``fstat`` against
    what was indexed (``size``, ``stamp``, ``ident``; see :func:`_check_same`): FileChangedError naming the
    path and what changed for a file rewritten, appended to, replaced or swapped for a link, and for a file
    that vanished or became too short."""
    try:
        fd = os.open(path, _OPEN_FLAGS)  # O_NONBLOCK: a FIFO put in a file's place must not hang us
    except OSError as e:
        raise FileChangedError(f"cannot open {path!r} (it was readable at build time): {e.strerror}") from None
    try:
        if size >= 0:
            st = os.fstat(fd)
            if st.st_size != size or (stamp and max(st.st_mtime_ns, st.st_ctime_ns) != stamp) or (
                    ident is not None and st.st_ino != ident[1]) or not stat.S_ISREG(st.st_mode):
                _check_same(path, st, size, stamp, ident)  # builds the message (or lets a benign case pass)
        done, n = 0, len(into)
        while done < n:
            try:
                got = os.preadv(fd, [into[done:]], offset + done)
            except OSError as e:
                raise FileChangedError(f"cannot read {path!r} (a regular file at build time): {e.strerror}") from None
            if got == 0:
                raise FileChangedError(
                    f"{path!r} is shorter than at build time: wanted bytes {offset}..{offset + n}, got {done}")
            done += got
    finally:
        os.close(fd)


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
