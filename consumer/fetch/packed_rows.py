"""Packed stores, the lean path: token rows of samples that are each one contiguous range of a local store.

What a fetch from a memory-mapped store needs is worked out once per store (:class:`PackedRows`, built on the
first fetch): each sample's store range (``start`` / ``length``, from :func:`~consumer.fetch.reader.packed_runs`),
the tokens as a plain ``ndarray`` view (slicing an ``np.memmap`` subclass costs about a microsecond more), the
PAD id, the vocabulary size and an unsigned view of the store for the id check. A call then copies one slice per
row straight from the store into the output (converted to the output dtype in that one copy, no temporaries) and
pads the tail; a batch of a few rows is handled with Python ints (numpy calls on 1-element arrays cost more than
the work), a larger one with a handful of vectorised calls.

Ids read from a store must be ``< vocab.size`` (a flipped bit must not reach an embedding). The store is checked
in blocks of :data:`BLOCK` tokens, each once: all of a store of up to :data:`EAGER_BYTES` at the first fetch (one
vectorised pass, a few milliseconds), a larger store block by block as fetches first touch them. A clean block is
not checked again while the store's data file keeps its stamp (one ``fstat`` per call of the data file held open:
a write to it moves its change time and every block is checked afresh). A block holding a bad id stays unmarked
and each sample in it is checked on its own, so the clean samples around a damaged one are still served and the
damaged one raises :class:`~consumer.errors.FormatError` naming it. A store whose dtype cannot hold an id
``>= vocab.size`` is never checked.

:meth:`PackedRows.rows` returns None when the batch needs the general reader (a sample that is not one store
range, a store read by ranges from object storage); the caller falls back to
:func:`~consumer.fetch.reader.read_rows` then, whose rows :meth:`PackedRows.check_rows` checks.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from typing import NoReturn

import numpy as np

from ..errors import FormatError, InputError, short_repr
from ..formats.chunksums import ChunkVerifier
from ..sources.base import ByteSource
from ..sources.version import FileVersion
from ..tokens.documents import DocumentTable
from ..tokens.index import SampleIndex
from .reader import packed_runs

__all__ = ["PackedRows", "SMALL_BATCH", "BLOCK", "EAGER_BYTES"]

SMALL_BATCH = 8  # up to this many rows, per-row Python beats vectorised numpy calls on tiny arrays
BLOCK_SHIFT = 16
BLOCK = 1 << BLOCK_SHIFT  # tokens per checked block of the store
EAGER_BYTES = 64 << 20  # stores up to this size are checked whole at the first fetch


def _refuse(_: ByteSource) -> NoReturn:
    raise InputError("docs: PackedRows needs documents served from a packed store, got source files")


class PackedRows:
    """What serving rows from one local packed store needs, computed once (see the module docstring)."""

    def __init__(self, index: SampleIndex, docs: DocumentTable, *, block_shift: int = BLOCK_SHIFT,
                 eager_bytes: int = EAGER_BYTES):
        packed = docs.source.choose(files=_refuse, store=lambda tokens: tokens)
        # int64 [S]: store position of each sample, -1: not one range (kept in a store's index entry, for its documents)
        known = index.runs.of(packed.doc_ptr) if index.runs is not None else None
        self.start = packed_runs(index, docs) if known is None else known.start
        self.length = index.sample_tokens()    # int64 [S]
        self.seqlen = index.seqlen
        self.store = packed.tokens  # every read of the general reader goes through it; the lean path needs a map
        mapped = self.store.mapped()
        self.local = mapped is not None
        self.tokens: np.ndarray = np.zeros(0, np.uint8) if mapped is None else mapped
        self.pad = int(docs.vocab.pad)
        self.size = int(docs.vocab.stored_ids)  # ids a store may hold (every id; a peer store's: its own ids)
        self.prefix = packed.prefix
        self.store_file = packed.data_file
        if self.local:
            kind = self.tokens.dtype
            self.unsigned = self.tokens.view(np.dtype(f"u{kind.itemsize}"))
            # a uint16 store under a vocabulary of 65536 ids or more cannot hold a bad id
            self.must_check = not (kind.kind == "u" and self.size > int(np.iinfo(kind).max))
        else:
            self.unsigned = self.tokens  # never read: nothing is checked block by block off a map
            self.must_check = True
        self.checked = np.zeros(len(self.length), dtype=bool)  # per sample (the general reader's rows)
        n_tokens = int(self.tokens.size) if self.local else 0
        self.shift = block_shift  # blocks of 2**shift tokens
        self.blocks = np.zeros(-(-n_tokens >> block_shift), dtype=bool)  # per block of the store: found clean
        self.eager = self.local and n_tokens * self.tokens.itemsize <= eager_bytes
        self.clean = False  # every block found clean: a call only compares the stamp
        # every sample is one store range: no per-call test (recorded with a cached index: not read here)
        self.all_runs = bool((self.start >= 0).all()) if known is None else known.all_runs
        self.stamp: FileVersion | None = None
        # per sample, 1 once its chunks were found intact (made at the first batch of a few rows that looks): the
        # verifier's map only grows, so a mark holds for good, and a batch of a few rows costs one lookup per row
        self.rows_seen: bytearray | None = None
        self.rows_seen_np = np.zeros(0, dtype=np.bool_)
        # a store with chunk sums has the ids of each chunk checked as the chunk is verified (read with pread, no
        # block is read through the map), while its data file is the one its sums were loaded with
        verifier = self.store.verifier
        self.by_chunks = verifier is not None and verifier.id_limit == self.size
        # the data file held open for a cheap ``fstat`` per call (closed with this object): it is the file the
        # memory map reads, so a file renamed over the store's path is not mistaken for a change of this one
        self._fd = -1
        if self.store_file is not None and self.must_check:
            self._fd = os.open(self.store_file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            weakref.finalize(self, os.close, self._fd)

    # ---------------------------------------------------------------- the id check
    def fresh_stamp(self) -> None:
        """Forget every clean mark when the store's data file changed since the last look (one ``fstat``)."""
        if self._fd < 0:
            return
        st = os.fstat(self._fd)
        stamp = FileVersion.of(st)
        if stamp != self.stamp:
            self.checked[:] = False
            self.blocks[:] = False
            self.stamp = stamp
            verifier = self.store.verifier
            if self.by_chunks and verifier is not None and stamp != verifier.file_stamp:  # written since: the sums
                # verified prove nothing about the ids now in the file
                self.by_chunks = False
            if self.eager and not self.by_chunks:
                self._check_blocks(0, self.blocks.size)
            self.clean = self.by_chunks or bool(self.blocks.all())

    def _check_blocks(self, b0: int, b1: int) -> None:
        """Mark the clean blocks among ``[b0, b1)`` (one vectorised pass over their tokens)."""
        u, k = self.unsigned, self.shift
        lo, hi = b0 << k, min(b1 << k, u.size)
        full = (hi - lo) >> k
        if full:
            self.blocks[b0:b0 + full] = u[lo:lo + (full << k)].reshape(full, 1 << k).max(axis=1) < self.size
        if lo + (full << k) < hi:
            self.blocks[b0 + full] = int(u[lo + (full << k):hi].max()) < self.size

    def _check_span(self, sample: int, s: int, n: int) -> None:
        """Sample ``sample`` (store tokens ``[s, s + n)``, ``n > 0``) lies in blocks not all marked clean: check
        those blocks, and the sample's own tokens when one of them holds a bad id."""
        b0, b1 = s >> self.shift, ((s + n - 1) >> self.shift) + 1
        self._check_blocks(b0, b1)
        if not self.blocks[b0:b1].all() and int(self.unsigned[s:s + n].max()) >= self.size:
            raise self._bad(sample, self.tokens[s:s + n])

    def _bad(self, sample: int, row: np.ndarray) -> FormatError:
        bad = row[(row < 0) | ((row >= self.size) & (row != self.pad))]
        return FormatError(f"{self.prefix}: sample {sample}: token ids must be in [0, {self.size}), got "
                           f"{short_repr(bad[:4].tolist())}; the store is damaged (consumer verify PREFIX checks all "
                           "of it)")

    def check_rows(self, tokens: np.ndarray, sample_ids: np.ndarray, shift: np.ndarray | None) -> None:
        """Check rows the general reader made from this store (samples that are not one store range, masked
        queries, ``long_files="crop"``): one vectorised pass, negative ids caught too (as unsigned they are huge).
        A sample found clean is not checked again while the store is unchanged, unless ``shift`` (crop) moves its
        window. A store at a URL is read with its ETag checked instead of a stamp."""
        if not self.must_check:
            return
        checked = self.checked if shift is None else None
        rows = tokens
        if checked is not None:
            self.fresh_stamp()
            fresh = np.flatnonzero(~checked[sample_ids])
            if not fresh.size:
                return
            if 2 * fresh.size <= sample_ids.size:  # few rows not seen yet: copying them out beats scanning all
                rows = tokens[fresh]
        size = self.size
        if rows.size and int(rows.reshape(-1).view(np.dtype(f"u{tokens.itemsize}")).max()) >= size:
            # the rows hold PAD, which a store of another tool's ids never holds (it lies above them): not a bad id
            bad = (tokens < 0) | ((tokens >= size) & (tokens != self.pad))
            if bad.any():
                row = int(np.argmax(bad.any(axis=1)))
                raise self._bad(int(sample_ids[row]), tokens[row])
        if checked is not None:
            checked[sample_ids] = True

    # ---------------------------------------------------------------- rows
    def rows(self, ids: np.ndarray, width: int | None, dtype: np.dtype,
             into: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray | None:
        """``[B, width or seqlen]`` rows of ``ids`` (in range, checked by the caller) in ``dtype``, PAD after each
        sample's tokens; None when a sample is not one store range or the store is not memory-mapped.
        ``into=(out, positions)`` (``out`` of ``dtype`` and that width): row ``r`` is written at
        ``out[positions[r]]`` and ``out`` returned."""
        if not self.local:
            return None
        if ids.size <= SMALL_BATCH:
            return self._few(ids.tolist(), self.seqlen if width is None else width, dtype, into)
        return self._many(ids, self.seqlen if width is None else width, dtype, into)

    def _few(self, ids: list[int], L: int, dtype: np.dtype,
             into: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray | None:
        start, length = self.start, self.length
        spans = []
        for i in ids:
            s = int(start[i])
            if s < 0:
                return None
            spans.append((i, s, int(length[i])))
        verifier = self.store.verifier
        if verifier is not None and verifier.left:  # chunks not yet found intact: checked before anything else
            self._check_few(verifier, spans)
        if self.must_check:
            self.fresh_stamp()
            if not self.clean:
                blocks, k = self.blocks, self.shift
                for i, s, n in spans:
                    if n and not (blocks[s >> k] and blocks[(s + n - 1) >> k] and
                                  (n <= 1 << k or blocks[s >> k:((s + n - 1) >> k) + 1].all())):
                        self._check_span(i, s, n)
                self.clean = bool(blocks.all())
        out, where = _target(into, len(spans), L, dtype)
        tokens, pad = self.tokens, self.pad
        for r, (_, s, n) in zip(where, spans):
            row = out[r]
            row[:n] = tokens[s:s + n]
            if n < L:
                row[n:] = pad
        return out

    def seen_rows(self) -> bytearray:
        """``rows_seen``, made on first use: one byte per sample, 1 once the sample's chunks were found intact."""
        if self.rows_seen is None:
            self.rows_seen = bytearray(len(self.length))
            self.rows_seen_np = np.frombuffer(self.rows_seen, dtype=np.bool_)  # the same bytes, for a gather
        return self.rows_seen

    def _check_few(self, verifier: ChunkVerifier, spans: list[tuple[int, int, int]]) -> None:
        """The chunk sums of a few rows ``(sample, start, count)``: a row marked in ``rows_seen`` needs nothing, else
        its first and last chunk are looked up in the verifier's map (its contract: no call when both are seen and
        the row spans at most two), and the rows are passed to ``check_spans`` when one of them needs it."""
        ok = self.seen_rows()
        seen, t = verifier.seen, verifier.token_shift
        for i, s, n in spans:
            if not ok[i]:
                lo, hi = s >> t, (s + n - 1) >> t
                if hi - lo > 1 or not (seen[lo] and seen[hi]):
                    verifier.check_spans(self.tokens, [s for _, s, _ in spans], [n for _, _, n in spans])
                    for j, _, _ in spans:
                        ok[j] = 1
                    return
                ok[i] = 1

    def _many(self, ids: np.ndarray, L: int, dtype: np.dtype,
              into: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray | None:
        start = self.start[ids]
        if not self.all_runs and start.min() < 0:
            return None
        starts, lengths = start.tolist(), self.length[ids].tolist()
        verifier = self.store.verifier
        if verifier is not None and verifier.left:  # chunks not yet found intact: checked before anything else (but
            self.seen_rows()  # not for rows whose chunks were: one gather of their marks)
            look = self.rows_seen_np[ids]
            if np.count_nonzero(look) != look.size:
                self.store.check_ranges(start, self.length[ids], self.seqlen)
                self.rows_seen_np[ids] = True
        if self.must_check:
            self.fresh_stamp()
            if not self.clean:
                self._check_many(ids, start)
        tokens, pad = self.tokens, self.pad
        if into is None and 2 * sum(lengths) < ids.size * L:  # mostly padding: one fill, then the tokens
            out = np.full((ids.size, L), pad, dtype=dtype)
            for r, (s, n) in enumerate(zip(starts, lengths)):
                out[r, :n] = tokens[s:s + n]
            return out
        out, where = _target(into, ids.size, L, dtype)
        for r, s, n in zip(where, starts, lengths):
            if n < L:
                row = out[r]
                row[:n] = tokens[s:s + n]
                row[n:] = pad
            else:
                out[r] = tokens[s:s + n]
        return out

    def _check_many(self, ids: np.ndarray, start: np.ndarray) -> None:
        """The block check of a larger batch: samples whose blocks are not all marked clean are checked."""
        length = self.length[ids]
        last = np.maximum(start + length - 1, start) >> self.shift
        first = start >> self.shift
        ok = self.blocks[first] & self.blocks[last]
        for j in np.flatnonzero(last - first > 1).tolist():  # samples over more than two blocks: those between too
            ok[j] &= bool(self.blocks[first[j]:last[j] + 1].all())
        if not ok.all():
            for j in np.flatnonzero(~ok).tolist():
                if length[j]:
                    self._check_span(int(ids[j]), int(start[j]), int(length[j]))
            self.clean = bool(self.blocks.all())


def _target(into: tuple[np.ndarray, np.ndarray] | None, rows: int, width: int,
            dtype: np.dtype) -> tuple[np.ndarray, Sequence[int]]:
    """Where a batch's rows go: a new ``[rows, width]`` array and its rows in order, or ``into``'s array and the
    rows it names (another batch's array, filled part by part)."""
    if into is None:
        return np.empty((rows, width), dtype=dtype), range(rows)
    return into[0], into[1].tolist()
