"""Source files, a few rows: the raw reader's work for a small batch, with Python ints instead of numpy arrays.

:func:`~consumer.fetch.reader.read_rows` lays a batch out with a few dozen vectorised numpy calls: the right
choice for 20 rows and more, a fixed cost of tens of microseconds that a batch of one or four rows (``ds[i]``,
a DataLoader without a batch sampler) never amortises. :func:`few_rows` computes the same layout per segment with
Python ints (one document's header, SEP, content, TAIL marker, padded tail token and EOF, as
:mod:`consumer.tokens.documents` defines them), reads every byte range of the batch with one
call of the dataset's source (:meth:`~consumer.sources.base.ByteSource.read_ranges`: for local files one open,
``fstat`` check and ``preadv`` per segment, the same :class:`~consumer.errors.FileChangedError` for a file that
changed) into one staging buffer, and writes each row once. The rows are identical to the general reader's (a
property test compares them).

It serves files (not packed stores), rows that tile from column 0 (every index built here), without a content mask
(masked queries) or crop shifts, at most :data:`FEW_SEGMENTS` segments (beyond that the vectorised layout is the
cheaper one); it returns None otherwise and the caller uses the general reader.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..sources.base import ByteSource
from ..tokens.documents import DocumentTable
from ..tokens.index import SampleIndex
from ..tokens.vocab import bytes_to_ids

__all__ = ["few_rows", "FEW_ROWS", "FEW_SEGMENTS"]

FEW_ROWS = 8  # up to this many rows (and FEW_SEGMENTS segments) the per-segment Python beats the vectorised layout
FEW_SEGMENTS = 16


def few_rows(index: SampleIndex, docs: DocumentTable, ids: list[int], width: int, dtype: npt.DTypeLike,
             source: ByteSource | None = None) -> np.ndarray | None:
    # long: the one-batch hot path, one pass over a few segments with plain ints; helpers would cost per segment
    """``[len(ids), width]`` token rows of samples ``ids`` read from the source files (``source``: the
    documents' byte source, when the caller has it), PAD after each sample's tokens (``width`` >= the longest of
    them); None when the general reader must serve them (see the module docstring)."""
    if source is None:  # a packed store's rows are copied, not built
        source = docs.source.choose(files=lambda s: s, store=lambda _: None)
    if source is None or not index.tiled:
        return None
    vocab = docs.vocab
    nb = vocab.n_bytes
    seg_ptr, seg_doc, seg_start, seg_len = index.seg_ptr, index.seg_doc, index.seg_start, index.seg_len
    sizes, with_header = docs.doc_size, docs.with_header
    cstart = docs.content_start if with_header else None
    # per segment: (row, base, a, b, d, cs, nfull, k, staging offset of its bytes or -1); per read: d, lo, n, at
    bounds = [(int(seg_ptr[i]), int(seg_ptr[i + 1])) for i in ids]
    if sum(g1 - g0 for g0, g1 in bounds) > FEW_SEGMENTS:
        return None
    segs = []
    rd, rlo, rn, rq = [], [], [], []
    at = 0
    row_len = []
    for r, (g0, g1) in enumerate(bounds):
        col = 0
        for g in range(g0, g1):
            d, a, n = int(seg_doc[g]), int(seg_start[g]), int(seg_len[g])
            b = a + n
            size = int(sizes[d])
            nfull, k = divmod(size, nb)
            cs = int(cstart[d]) if cstart is not None else 0
            t0 = min(max(a - cs, 0), nfull)
            t1 = min(max(b - cs, 0), nfull)
            tail = k > 0 and a <= cs + nfull + 1 < b
            lo = t0 * nb if t1 > t0 else nfull * nb
            m = (size if tail else t1 * nb) - lo
            q = -1
            if m > 0:
                q = at
                rd.append(d)
                rlo.append(lo)
                rn.append(m)
                rq.append(at)
                at += m + nb  # room to read a tail token's bytes as one full token
            segs.append((r, col - a, a, b, d, cs, nfull, k, t0, t1, q))
            col += n
        row_len.append(col)
    staging = np.empty(at, dtype=np.uint8)
    if rd:
        source.read_ranges(rd, rlo, rn, staging, rq)
    out = np.empty((len(ids), width), dtype=dtype)
    sep, eof, pad = vocab.sep, vocab.eof, vocab.pad
    header_ptr, header_tok, doc_header = docs.header_ptr, docs.header_tok, docs.doc_header
    for r, base, a, b, d, cs, nfull, k, t0, t1, q in segs:
        row = out[r]
        if with_header:
            h = cs - 1  # the SEP after the header
            if a < h:
                hp = int(header_ptr[int(doc_header[d])])
                e = min(b, h)
                row[base + a:base + e] = header_tok[hp + a:hp + e]
            if a <= h < b:
                row[base + h] = sep
        if t1 > t0:
            raw = staging[q:q + (t1 - t0) * nb]
            row[base + cs + t0:base + cs + t1] = raw.view(">u2") if nb == 2 else raw if nb == 1 else \
                bytes_to_ids(raw, nb)
        if k:
            marker = cs + nfull
            if a <= marker < b:
                row[base + marker] = sep + k
            if a <= marker + 1 < b:  # the padded tail token: its k bytes follow the full tokens read
                s = q + (t1 - t0) * nb
                row[base + marker + 1] = int.from_bytes(staging[s:s + k].tobytes(), "big") << 8 * (nb - k)
            end = marker + 2
        else:
            end = cs + nfull
        if a <= end < b:
            row[base + end] = eof
    for r, m in enumerate(row_len):
        if m < width:
            out[r, m:] = pad
    return out
