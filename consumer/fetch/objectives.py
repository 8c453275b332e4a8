"""What each objective makes its columns from: :func:`batch_parts` gives the fetcher's token rows the parts that
:func:`consumer.fetch.columns.make_columns` reads (masked rows, the rows' document layout, causal labels, Megatron's
columns, span corruption), each made only if a selected column needs it.

- **mask** (MLM): the rows masked by :func:`~consumer.fetch.columns.mask_tokens` with the batch's generator.
- **causal**: the labels of :mod:`consumer.fetch.causal`. Each row's next token after its last column is read
  where its document goes on (one token per row, through the same reader), so the last position has its label.
  Rows of ``sampling="megatron"`` with ``add_extra_token`` carry that token already: the input is the row without
  it (``seq_length`` wide, as Megatron's ``tokens``).
- **megatron**: :mod:`consumer.fetch.megatron_columns` over the rows (needs ``sampling="megatron"``).
- **span**: :mod:`consumer.fetch.spans`, per document piece, sentinels above every id of the vocabulary.
- the document columns: :class:`~consumer.fetch.layout.BatchLayout` of the rows (over the input's width).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import FormatError, QueryError, short_repr
from ..sources.store import TokenData
from ..tokens.documents import DocumentTable
from ..tokens.index import SampleIndex
from ..tokens.megatron_index import MegatronSampling
from ..tokens.vocab import TokenVocab
from .causal import causal_labels, next_tokens_exist
from .columns import BatchParts, MaskConfig, Query, mask_tokens
from .layout import DOCUMENT_COLUMNS, BatchLayout, batch_layout
from .megatron_columns import megatron_columns
from .reader import read_segments
from .spans import max_spans, span_corrupt

__all__ = ["batch_parts", "span_vocab_size"]


def span_vocab_size(vocab_size: int, seqlen: int, noise_density: float = 0.15,
                    mean_span: float = 20.0) -> tuple[int, int]:
    """``(sentinels, vocabulary size with them)`` of the span query over rows of ``seqlen`` tokens of a vocabulary of
    ``vocab_size`` ids (``ds.vocab.size``): the sentinels sit just above every id (``<extra_id_0>`` the highest, as
    T5 counts them), as many as a piece of ``seqlen`` tokens can need. A model's embedding needs the second number."""
    n = max_spans(seqlen, noise_density, mean_span)
    return n, vocab_size + n


def _following(docs: DocumentTable, layout: BatchLayout, extend: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Each row's token after its last column (PAD where its document ends inside the row): one token read per row
    that has one, from the last piece's document (``layout``'s last pieces are lengthened by ``extend``): a gather
    out of a store (its chunks checked, its ids too), a 1-token segment of the files' bytes."""
    out = np.full(layout.rows, docs.vocab.pad, dtype=np.int64)
    rows = np.flatnonzero(extend)
    if not rows.size:
        return out
    at = layout.last[extend[layout.row[layout.last]] > 0]
    d, a, n = layout.doc[at], layout.start[at] + layout.length[at] - 1, rows.size
    one, first = np.ones(n, dtype=np.int64), np.arange(n, dtype=np.int64)

    def from_files(_: object) -> np.ndarray:
        got, _ = read_segments(docs, (n, 1), first, np.zeros(n, dtype=np.int64), d, a, one, dtype=dtype, tiled=True)
        return got[:, 0]

    def from_store(packed: TokenData) -> np.ndarray:
        got = np.empty(n, dtype=np.int64)
        packed.tokens.copy_ranges(got, packed.doc_ptr[d] + a, one, first, 1)
        bad = (got < 0) | (got >= docs.vocab.stored_ids)
        if bad.any():
            raise FormatError(f"{packed.prefix}: token ids must be in [0, {docs.vocab.stored_ids}), got "
                              f"{short_repr(got[bad][:4].tolist())}; the store is damaged (consumer verify PREFIX "
                              "checks all of it)")
        return got

    out[rows] = docs.source.choose(files=from_files, store=from_store)
    return out


def _causal(tokens: np.ndarray, docs: DocumentTable, index: SampleIndex, ids: np.ndarray,
            shift: np.ndarray | None, overlap: bool, loss_on: tuple[str, ...]
            ) -> tuple[np.ndarray, BatchLayout, Callable[[], np.ndarray]]:
    """The causal input rows, their layout (over their width), and a maker of their labels. With
    ``overlap`` each of ``tokens``' rows ends with the next token already (Megatron's extra token: the input is the
    row without it), else the next token is read where the row's last document goes on."""
    if overlap:
        rows = np.ascontiguousarray(tokens[:, :-1])
        full = batch_layout(index, ids, tokens.shape[1], shift)
        ends = np.minimum(full.row_len, rows.shape[1])
        return rows, full.clipped(rows.shape[1]), lambda: causal_labels(rows, tokens[:, -1], ends, full, docs, loss_on)
    plain = batch_layout(index, ids, tokens.shape[1], shift)
    extend = next_tokens_exist(plain, docs)
    full = plain.lengthened(extend, tokens.shape[1] + 1)
    return tokens, plain, lambda: causal_labels(tokens, _following(docs, full, extend, tokens.dtype),
                                                           plain.row_len, full, docs, loss_on)


def batch_parts(q: Query, tokens: np.ndarray, content: np.ndarray | None, ids: np.ndarray, *,
                documents: DocumentTable, index: SampleIndex, shift: np.ndarray | None, mask: MaskConfig,
                sampling: object, rng: Callable[[], np.random.Generator],
                per_sample: Callable[[str], np.ndarray]) -> BatchParts:
    """The parts of one batch for query ``q`` (see the module docstring). ``content`` is the content mask (MLM),
    ``rng()`` the batch's generator (masks, spans), ``per_sample(name)`` the ``class``/``file_id``/``offset``."""
    docs, vocab, obj = documents, documents.vocab, q.objective
    documented = any(c in DOCUMENT_COLUMNS or c == "loss_mask" for c in q.columns)
    megatron = sampling if isinstance(sampling, MegatronSampling) else None
    if mask.add_cls:
        if obj not in ("plain", "mask") or documented:
            raise QueryError(f"add_cls: a CLS token belongs to no document and predicts nothing; the query "
                             f"{list(q.columns)} ({obj}) needs rows without it (set_mlm_mode(add_cls=False))")
        tokens = np.concatenate([np.full((tokens.shape[0], 1), vocab.cls, dtype=tokens.dtype), tokens], axis=1)
        if content is not None:
            content = np.concatenate([np.zeros((content.shape[0], 1), dtype=bool), content], axis=1)
    if obj == "megatron" and megatron is None:
        raise QueryError("the 'megatron' query serves Megatron's GPTDataset items: it needs sampling='megatron' "
                         "(a MegatronSampling); for next-token labels over other rows use the 'causal' query")
    overlap = megatron is not None and megatron.add_extra_token and obj in ("causal", "megatron")
    makers: dict[str, Callable[[], Any]] = {name: functools.partial(per_sample, name)
                                            for name in ("class", "file_id", "offset")}
    rows, width = tokens, tokens.shape[1] - (1 if overlap else 0)
    if obj in ("causal", "plain") and ("labels" in q.columns or "loss_mask" in q.columns):
        rows, layout, makers["causal"] = _causal(tokens, docs, index, ids, shift, overlap and obj == "causal",
                                                 mask.loss_on)
        makers["layout"] = lambda: layout
    else:
        makers["layout"] = lambda: batch_layout(index, ids, tokens.shape[1], shift).clipped(width)
    if obj == "mask":
        if content is None:
            raise QueryError(f"columns {list(q.columns)} mask the input: the reader must return the content mask")
        makers["masked"] = lambda: mask_tokens(tokens, content, mask, vocab, rng())
    elif obj == "megatron" and megatron is not None:
        eod = megatron.eod if megatron.eod is not None else (None if isinstance(vocab, TokenVocab) else vocab.eof)
        makers["megatron"] = lambda: megatron_columns(
            tokens.astype(np.int64, copy=False), extra_token=megatron.add_extra_token, eod=eod,
            pad=vocab.pad if megatron.pad is None else megatron.pad, reset_position_ids=megatron.reset_position_ids,
            reset_attention_mask=megatron.reset_attention_mask, eod_mask_loss=megatron.eod_mask_loss,
            want=tuple(c for c in ("tokens", "labels", "loss_mask", "position_ids", "attention_mask")
                       if c in q.columns))
    elif obj == "span":
        n_sentinels, size = span_vocab_size(vocab.size, index.seqlen, mask.noise_density, mask.mean_span)

        def span() -> tuple[np.ndarray, np.ndarray]:
            pieces = makers["layout"]()  # no overlap here: the pieces over the rows' whole width
            inputs, labels, _ = span_corrupt(
                tokens.astype(np.int64, copy=False), pieces.row, pieces.col, pieces.length, rng(),
                noise_density=mask.noise_density, mean_span=mask.mean_span, sentinel_top=size - 1,
                n_sentinels=n_sentinels, eos=vocab.eof, pad=vocab.pad, first_free_id=vocab.size)
            return inputs, labels
        makers["span"] = span
    return BatchParts(rows, vocab.pad, ids, makers)
