"""Fetching: sample ids -> numpy columns (the read + collate-free half of ``ds[...]``).

A :class:`Fetcher` owns what one dataset's fetches need — its documents, its sample index, the class
id of each class, the seed of its masks — and nothing else: no torch (``collate`` turns the columns
into tensors), no selection parsing (``select``), no batch order (``sampler``). It is cheap to build
and holds no open resources.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import FormatError, InputError, short_repr
from ..tokens.documents import DocumentTable
from ..tokens.index import SampleIndex
from ..tokens.split import crop_offsets
from ..util.validate import is_int
from .columns import MaskConfig, build_columns, columns_of, mask_rng, needs_masking
from .reader import packed_runs, read_rows, read_segments

__all__ = ["Fetcher", "batch_budget"]

_BUDGET_ENV = "CONSUMER_MAX_BATCH_BYTES"
_DEFAULT_BUDGET = 16 << 30  # 16 GiB: far above any real batch, far below what a typo (seqlen=10**12) asks for


def batch_budget() -> int:
    """The most bytes one fetch may allocate: ``$CONSUMER_MAX_BATCH_BYTES`` or 16 GiB."""
    text = os.environ.get(_BUDGET_ENV)
    if text is None:
        return _DEFAULT_BUDGET
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"{_BUDGET_ENV} must be a positive number of bytes, got {short_repr(text)}")
    return value


class Fetcher:
    """Reads batches of one dataset: ``fetch(ids, query)`` -> ``{column: numpy array}``."""

    def __init__(self, documents: DocumentTable, index: SampleIndex, class_ids: np.ndarray, seed: int,
                 crop: bool = False):
        self.documents = documents
        self.index = index
        self.class_ids = class_ids  # class index -> class id (class_to_id)
        self.seed = seed
        self.crop = crop  # long_files="crop": each long file's window moves per (seed, epoch, sample)
        self._runs: np.ndarray | None = None  # packed stores: per-sample contiguous ranges, made on first use
        self._checked: np.ndarray | None = None  # packed stores: per sample, its ids were found valid once
        self._tokens = documents.source.tokens  # a packed store's token data, else None
        self._stamp: tuple[int, ...] | None = None

    def fetch(self, sample_ids: np.ndarray, query=None, *, mask: MaskConfig, epoch: int = 0,
              width: int | None = None, out_dtype: Any = np.int64) -> dict[str, np.ndarray]:
        """The columns of ``query`` for ``sample_ids`` (in order; int64 or ``out_dtype``). ``epoch`` varies the masks;
        ``width`` (>= the longest selected sample) narrows the rows from ``seqlen``."""
        cols = columns_of(query)
        n = len(self.index)
        if sample_ids.size and (sample_ids.min() < 0 or sample_ids.max() >= n):
            raise InputError(f"sample_ids must be in [0, {n}), got {short_repr(sample_ids.tolist())}")
        if width is not None and sample_ids.size and int(self.index.sample_tokens()[sample_ids].max()) > width:
            raise InputError(f"width={width} is narrower than the longest selected sample "
                             f"({int(self.index.sample_tokens()[sample_ids].max())} tokens)")
        masking = needs_masking(cols)
        dtype = np.dtype(out_dtype) if out_dtype in (np.int64, np.int32, "int64", "int32") else None
        if dtype is None:
            raise InputError(f"out_dtype must be numpy.int64 or numpy.int32, got {short_repr(out_dtype)}")
        rows, width_ = int(sample_ids.size), self.index.seqlen if width is None else int(width)
        # token rows, content mask, masked copy and labels, attention mask: at most ~5 [B, L] int64 arrays at once
        need = rows * (width_ + 1) * 8 * (5 if masking else 2)
        if need > batch_budget():
            raise InputError(f"sample_ids: a batch of {rows} rows x {width_} tokens needs about {need} bytes, over the "
                             f"fetch budget of {batch_budget()} bytes (${_BUDGET_ENV}); fetch fewer samples at a "
                             "time or choose a smaller seqlen")
        if self._tokens is not None and self._runs is None:
            self._runs = packed_runs(self.index, self.documents)
            self._checked = np.zeros(len(self.index), dtype=bool)
        first_seg = self.index.seg_ptr[sample_ids]
        shift = None
        if self.crop:
            doc = self.index.seg_doc[first_seg]
            room = self.documents.doc_len[doc] - self.index.seg_len[first_seg]
            shift = crop_offsets(self.seed, epoch, sample_ids, room)
        tokens, content = read_rows(self.index, self.documents, sample_ids, content_mask=masking, runs=self._runs,
                                    width=width, shift=shift, dtype=dtype)
        if self._tokens is not None:
            self._check_ids(tokens, sample_ids, shift)
        return build_columns(
            cols, tokens, content, vocab=self.documents.vocab, cfg=mask,
            rng_factory=lambda: mask_rng(self.seed, epoch, sample_ids), sample_ids=sample_ids,
            sample_class_ids=self.class_ids[self.index.sample_class[sample_ids]],
            file_id=self.index.seg_doc[first_seg].astype(np.int64),
            offset=self.index.seg_start[first_seg] + (0 if shift is None else shift))

    def _check_ids(self, tokens: np.ndarray, sample_ids: np.ndarray, shift: np.ndarray | None) -> None:
        """Ids read from a store must be < vocab.size (a flipped bit must not reach an embedding): one
        vectorised pass, negative ids caught too (as uint64 they are huge). A sample's tokens are the same
        store ranges at every fetch (unless ``long_files="crop"`` moves its window), so a sample found clean
        once is not checked again while the store's data file is unchanged (one ``stat`` per batch: a write
        to it moves its change time and every sample is checked afresh); a store at a URL is read with its
        ETag checked instead."""
        checked = self._checked if shift is None else None
        tokens_data = self._tokens
        if checked is not None and tokens_data is not None and tokens_data.data_file is not None:  # changed in place?
            stamp = tokens_data.stamp()
            if stamp != self._stamp:
                checked[:] = False
                self._stamp = stamp
        rows = tokens
        if checked is not None:
            fresh = np.flatnonzero(~checked[sample_ids])
            if not fresh.size:
                return
            if 2 * fresh.size <= sample_ids.size:  # few rows not seen yet: copying them out beats scanning all
                rows = tokens[fresh]
        size = self.documents.vocab.size
        if rows.size and int(rows.reshape(-1).view(np.dtype(f"u{tokens.itemsize}")).max()) >= size:
            row = int(np.argmax(((tokens < 0) | (tokens >= size)).any(axis=1)))
            bad = tokens[row][(tokens[row] < 0) | (tokens[row] >= size)]
            raise FormatError(f"{getattr(tokens_data, 'prefix', '?')}: sample {int(sample_ids[row])}: token ids "
                              f"must be in [0, {size}), got {short_repr(bad[:4].tolist())}; the store is damaged "
                              "(consumer verify PREFIX checks all of it)")
        if checked is not None:
            checked[sample_ids] = True

    def document_tokens(self, file_id: int) -> np.ndarray:
        """The whole token stream of one file: header, SEP, content, EOF."""
        docs = self.documents
        if not is_int(file_id) or not 0 <= file_id < len(docs):
            raise InputError(f"file_id must be an int in [0, {len(docs)}), got {short_repr(file_id)}")
        n = int(docs.doc_len[file_id])
        zero = np.zeros(1, dtype=np.int64)
        return read_segments(docs, (1, n), zero, zero, np.array([file_id]), zero, np.array([n]))[0][0]

