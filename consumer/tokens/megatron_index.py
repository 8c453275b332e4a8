"""Megatron GPT sampling as a :class:`~consumer.tokens.index.SampleIndex` (``sampling="megatron"``, concat style).

Megatron's ``GPTDataset`` lays all documents of the split (here: every document, in corpus order, as
its ``indices``) on one stream in the order of a shuffled ``document_index``, cuts it every
``seq_length`` tokens and serves the cuts in ``shuffle_index`` order; item ``k`` is the text of
``seq_length + E`` tokens (``E = add_extra_token``: consecutive samples overlap by one token, the
last label of a sample being the first input of the next)::

    i = shuffle_index[k]; (d0, o0) = sample_index[i]; (d1, o1) = sample_index[i + 1]
    text = doc(document_index[d0])[o0:] + whole docs document_index[d0+1 .. d1-1]
           + doc(document_index[d1])[:o1 + E]          (d0 == d1: doc(...)[o0:o1 + E])

:func:`megatron_sample_index` builds the three arrays with
:func:`consumer.formats.megatron_sampling.build_gpt_indices` (bit-identical to Megatron-core for the
same sizes, seed and num_samples) and converts them, vectorised, into the CSR form of
:class:`~consumer.tokens.index.SampleIndex`: sample ``k`` of the result is Megatron's item ``k`` (already in
``shuffle_index`` order), with ``seqlen = seq_length + E`` and one segment per document piece
(empty pieces, which only occur with ``E = 0`` at document ends, are dropped). Partial samples are
dropped (``drop_last=True``, as for Megatron's training split), so every row is full: no PAD. With
``num_samples`` Megatron may need several epochs (and may shuffle the last one separately); the index
then holds all ``len(sample_index) - 1`` items, which is at least ``num_samples``, exactly as
Megatron's ``len(dataset)``.

Classes. Megatron samples cross documents, hence classes, and are not grouped by class, so no class
owns a contiguous range of samples. ``sample_class`` is the class of each sample's first document
(the ``class`` column), and ``class_ptr`` is all zeros (length ``n_classes + 1``): every class owns
the empty range, so ``{class: n}`` and ``{class: [i]}`` selections raise ``SelectionError`` ("class
selections ... are not supported with sampling='megatron'") instead of silently serving samples of other classes;
``samples_per_class()`` is all zeros. Select by sample id (ints, slices, lists) or ``ds[None]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError, short_repr
from ..formats.megatron_sampling import build_gpt_indices
from ..util.validate import check_int, int_vector, is_int
from .index import SampleIndex, index_dtype

__all__ = ["megatron_sample_index", "MegatronSampling"]

_FLAGS = ("add_extra_token", "reset_position_ids", "reset_attention_mask", "eod_mask_loss", "create_attention_mask")
_QUERY_DEFAULTS = {"reset_position_ids": False, "reset_attention_mask": False, "eod_mask_loss": False,
                   "create_attention_mask": False, "eod": None, "pad": None}


@dataclass(frozen=True)
class MegatronSampling:
    """``Consumer(..., style="concat", seqlen=L, sampling=MegatronSampling(...))``: Megatron's GPT
    sample order over all documents (``sampling="megatron"`` is ``MegatronSampling()``).

    ``num_samples`` (None: one epoch) and ``add_extra_token`` mean what they mean in Megatron-core;
    the seed is the dataset's ``seed``; rows are ``seqlen + add_extra_token`` tokens wide. The rest shapes what the
    ``"megatron"`` query returns (:mod:`consumer.fetch.megatron_columns`), not the samples: ``reset_position_ids``,
    ``reset_attention_mask``, ``eod_mask_loss`` and ``create_attention_mask`` are ``GPTDatasetConfig``'s switches
    (``create_attention_mask`` is off by default here: a ``[1, L, L]`` mask per row is 64 MiB at L=8192, and
    attention kernels make their own); ``eod`` is the EOD id of a store another tool wrote (its tokenizer's; None:
    our EOF) and ``pad`` the PAD id Megatron's tokenizer reports (None: ours, which no document holds).
    """

    num_samples: int | None = None
    add_extra_token: bool = True
    reset_position_ids: bool = False
    reset_attention_mask: bool = False
    eod_mask_loss: bool = False
    create_attention_mask: bool = False
    eod: int | None = None
    pad: int | None = None

    name = "megatron"

    def __post_init__(self) -> None:
        n = self.num_samples
        if n is not None and not (is_int(n) and n >= 1):
            raise InputError(f"num_samples must be None or an int >= 1, got {short_repr(n)}")
        for flag in _FLAGS:
            if not isinstance(getattr(self, flag), bool):
                raise InputError(f"{flag} must be a bool, got {short_repr(getattr(self, flag))}")
        for name in ("eod", "pad"):
            v = getattr(self, name)
            if v is not None and not (is_int(v) and v >= 0):
                raise InputError(f"{name} must be None or a token id (an int >= 0), got {short_repr(v)}")
            if v is not None:
                object.__setattr__(self, name, int(v))
        if n is not None:
            object.__setattr__(self, "num_samples", int(n))  # numpy ints become plain ints (JSON, cache keys)

    def __setstate__(self, state: dict) -> None:
        """Unpickle, also a value pickled before the query's switches existed (their defaults then)."""
        self.__dict__.update({**_QUERY_DEFAULTS, **state})

    def key_dict(self) -> dict:
        """The settings that shape the sample index (part of the cache key): the query's switches do not."""
        return {"name": "megatron", "num_samples": self.num_samples, "add_extra_token": self.add_extra_token}

    def to_dict(self) -> dict:
        """JSON-able settings (``get_dict``): :meth:`key_dict` and the query's switches that differ from their
        defaults."""
        return {**self.key_dict(), **{k: getattr(self, k) for k, v in _QUERY_DEFAULTS.items() if getattr(self, k) != v}}

    @classmethod
    def from_dict(cls, d: dict) -> MegatronSampling:
        """The settings :meth:`to_dict` wrote."""
        switches: dict[str, Any] = {k: d.get(k, v) for k, v in _QUERY_DEFAULTS.items()}
        return cls(num_samples=d.get("num_samples"), add_extra_token=d.get("add_extra_token", True), **switches)

    def check(self, style: str, seqlen: int | str) -> None:
        """Megatron's order needs concat style and an int ``seqlen`` (its ``seq_length``)."""
        if style != "concat" or isinstance(seqlen, str):
            raise InputError(f"sampling='megatron' needs style='concat' and an int seqlen (Megatron's seq_length), "
                             f"got style={style!r}, seqlen={seqlen!r}")

    def row_width(self, seqlen: int | str, doc_len: np.ndarray) -> int:
        """Tokens per row: ``seq_length`` plus the one-token overlap when ``add_extra_token``."""
        return int(seqlen) + int(self.add_extra_token)

    def build(self, doc_len: np.ndarray, doc_class: np.ndarray, n_classes: int, *, style: str, seqlen: int | str,
              long_files: str, seed: int) -> SampleIndex:
        """The sample index (see :func:`megatron_sample_index`)."""
        return megatron_sample_index(doc_len, doc_class, n_classes, seq_length=int(seqlen), seed=seed,
                                     num_samples=self.num_samples, add_extra_token=self.add_extra_token)


def megatron_sample_index(doc_len, doc_class, n_classes: int, seq_length: int, seed: int,
                          num_samples: int | None = None, add_extra_token: bool = True) -> SampleIndex:
    """Megatron GPT samples over all documents as a :class:`SampleIndex` (see the module docstring).

    Args:
        doc_len: tokens of each document (corpus order; these are Megatron's ``sizes``).
        doc_class: class index of each document (``0 .. n_classes - 1``).
        n_classes: number of classes (``class_ptr`` has ``n_classes + 1`` entries, all zero).
        seq_length: Megatron's ``seq_length`` (>= 2); rows are ``seq_length + add_extra_token`` wide.
        seed: Megatron's ``random_seed`` (one ``RandomState(seed)`` for both shuffles).
        num_samples: samples wanted (None: one epoch), which sets the number of epochs.
        add_extra_token: Megatron's ``add_extra_token_to_sequence`` (the one-token overlap).

    Sample ``k`` is Megatron's dataset item ``k`` (``shuffle_index[k]``'s text).
    """
    sizes = int_vector("doc_len", doc_len)
    classes = int_vector("doc_class", doc_class)
    if sizes.size == 0:
        raise InputError("doc_len must hold at least one document, got none")
    if classes.shape != sizes.shape:
        raise InputError(f"doc_class must have one entry per document: expected {sizes.size}, got {classes.size}")
    if int(sizes.min()) < 0:
        raise InputError(f"doc_len must be >= 0 for every document, got {int(sizes.min())}")
    check_int("n_classes", n_classes, 1)
    if int(classes.min()) < 0 or int(classes.max()) >= n_classes:
        raise InputError(f"doc_class must be in [0, {n_classes}), got values in "
                         f"[{int(classes.min())}, {int(classes.max())}]")
    if not isinstance(add_extra_token, (bool, np.bool_)) and add_extra_token not in (0, 1):
        raise InputError(f"add_extra_token must be a bool, got {short_repr(add_extra_token)}")
    e = int(bool(add_extra_token))
    document_index, sample_index, shuffle_index = build_gpt_indices(
        sizes, seq_length, seed, num_samples=num_samples, add_extra_token=bool(e), drop_last=True)
    doc_index = document_index.astype(np.int64)
    rows = sample_index.astype(np.int64)
    item = shuffle_index.astype(np.int64)
    d0, o0 = rows[item, 0], rows[item, 1]
    d1, o1 = rows[item + 1, 0], rows[item + 1, 1]

    # one piece per document position d0 .. d1 of each sample
    count = d1 - d0 + 1
    first = np.cumsum(count) - count
    owner = np.repeat(np.arange(item.size, dtype=np.int64), count)
    pos = np.repeat(d0, count) + (np.arange(owner.size, dtype=np.int64) - np.repeat(first, count))
    doc = doc_index[pos]
    start = np.zeros(owner.size, dtype=np.int64)
    start[first] = o0
    end = sizes[doc].copy()
    last = first + count - 1
    end[last] = o1 + e
    length = end - start
    keep = length > 0
    doc, start, length, owner = doc[keep], start[keep], length[keep], owner[keep]

    seg_ptr = np.zeros(item.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=item.size), out=seg_ptr[1:])
    col = np.cumsum(length) - length
    col -= np.repeat(col[seg_ptr[:-1]], np.diff(seg_ptr))
    seqlen = int(seq_length) + e
    sample_class = classes[doc[seg_ptr[:-1]]] if item.size else np.zeros(0, dtype=np.int64)
    narrow = index_dtype(seqlen + 1)
    return SampleIndex(seqlen=seqlen, seg_ptr=seg_ptr, seg_doc=doc.astype(index_dtype(sizes.size)), seg_start=start,
                       seg_len=length.astype(narrow), seg_col=col.astype(narrow),
                       sample_class=sample_class.astype(index_dtype(n_classes)),
                       class_ptr=np.zeros(int(n_classes) + 1, dtype=np.int64))
