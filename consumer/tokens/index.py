"""The sample index: which tokens of which documents make each sample, as flat numpy arrays.

Nothing here reads a file. Input: the token length of every document (``doc_len``), its class, and
the style settings. Output: a :class:`SampleIndex`, a CSR structure::

    sample s  ->  segments seg_ptr[s] .. seg_ptr[s+1]-1
    segment g ->  document seg_doc[g], tokens [seg_start[g], seg_start[g] + seg_len[g]) of it,
                  written at column seg_col[g] of the sample's row

Samples are ordered by class (then by file, then by window), so each class owns the contiguous
sample range ``class_ptr[c] .. class_ptr[c+1]-1``. Styles (``STYLES``):

- ``diff``: one sample per document, truncated to ``seqlen`` (``long_files="truncate"``) or cut into
  consecutive windows (``long_files="windows"``, so no token is unreachable). Rows are padded.
- ``concat``: the documents of a class form one stream cut into exact ``seqlen`` windows; windows never
  cross classes; the last window of a class is padded. Every token appears exactly once.
- ``packed``: whole documents placed into rows by best-fit decreasing, per class (:mod:`consumer.tokens.packing`);
  only documents longer than ``seqlen`` are cut (``long_files`` ``"windows"``, its default, or ``"truncate"``).

Everything is vectorised (cumsum / repeat / searchsorted): no Python loop per sample or document.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import ConsumerWarning, InputError, short_repr
from ..util.validate import check_choice, check_int, int_vector
from .packing import PACKED_LONG_FILES, packed_arrays
from .pieces import class_ptr_of, first_pieces, index_dtype, pieces

__all__ = ["AUTO_SEQLEN_CAP", "INDEX_ARRAYS", "LONG_FILES", "MAX_SEQLEN", "STYLES", "SampleIndex", "StoreRuns",
           "auto_seqlen", "build_index", "check_seqlen", "index_dtype", "long_files_choices", "resolve_seqlen",
           "sample_chunks", "warn_if_padded", "PaddingNotice"]

LONG_FILES = ("truncate", "windows", "crop")  # crop: like truncate, the window moved per epoch at fetch time
_CHUNK = 1 << 20  # elements per step of the once-per-index checks (bounded temporaries at 10^7 files)

# the flat arrays that make a SampleIndex (beside its seqlen): what the index cache stores
INDEX_ARRAYS = ("seg_ptr", "seg_doc", "seg_start", "seg_len", "seg_col", "sample_class", "class_ptr")


@dataclass(frozen=True, eq=False)
class StoreRuns:
    """Per sample of a packed store, what :func:`~consumer.fetch.reader.packed_runs` finds: the store position of
    its first token when its segments are one contiguous range of the store, else -1 (``start``, int64 [S]), and
    whether every sample is one range. They hold for the documents whose first tokens are ``doc_ptr`` (that very
    array: a reader given other documents finds its own)."""

    start: np.ndarray
    all_runs: bool
    doc_ptr: np.ndarray

    def of(self, doc_ptr: np.ndarray) -> StoreRuns | None:
        """These runs if they were found for ``doc_ptr``, else None."""
        return self if doc_ptr is self.doc_ptr else None


@dataclass(frozen=True)
class SampleIndex:
    """Flat arrays describing every sample (see the module docstring).

    ``seg_ptr``, ``seg_start`` and ``class_ptr`` are int64. The bounded fields are as narrow as their bound
    allows (:func:`index_dtype`, decided per index when it is built): ``seg_len`` and ``seg_col`` (<= ``seqlen``
    <= :data:`MAX_SEQLEN`) and ``sample_class`` are int32, ``seg_doc`` is int32 below 2**31 documents, else
    int64. Arithmetic that can leave those bounds (offsets into a store, flat positions) casts to int64 first.
    """

    seqlen: int
    seg_ptr: np.ndarray     # [S+1]
    seg_doc: np.ndarray     # [G]
    seg_start: np.ndarray   # [G] token offset inside the document
    seg_len: np.ndarray     # [G]
    seg_col: np.ndarray     # [G] column inside the sample's row
    sample_class: np.ndarray  # [S]
    class_ptr: np.ndarray   # [C+1]
    # a packed store's only, kept in its index cache entry: each sample's store range (None: found at the first fetch)
    runs: StoreRuns | None = None

    def __len__(self) -> int:
        return int(self.seg_ptr.size - 1)

    def samples_per_class(self) -> np.ndarray:
        """Number of samples of each class."""
        return np.diff(self.class_ptr)

    def sample_tokens(self) -> np.ndarray:
        """Number of real (non-padding) tokens of each sample (computed once, then cached)."""
        return self._sample_tokens

    def remember_sample_tokens(self, tokens: np.ndarray) -> None:
        """Take ``tokens`` as :meth:`sample_tokens` (int32 [S], e.g. mapped from a cache entry) instead of
        computing it."""
        self.__dict__["_sample_tokens"] = tokens  # what the cached property stores: it is then never computed

    def entry_arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        """The arrays a cache entry keeps of this index (:data:`INDEX_ARRAYS` and ``sample_tokens``), named
        ``prefix + name`` (:meth:`from_entry` takes them back)."""
        out = {prefix + k: getattr(self, k) for k in INDEX_ARRAYS}
        out[prefix + "sample_tokens"] = self.sample_tokens()
        return out

    @classmethod
    def from_entry(cls, seqlen: int, arrays: Mapping[str, np.ndarray], prefix: str = "", *,
                   runs: StoreRuns | None = None, facts: Mapping[str, object] | None = None) -> SampleIndex:
        """The index whose :meth:`entry_arrays` (mapped from a cache entry) are ``arrays``: ``sample_tokens`` and
        ``facts`` taken as found, not computed again, where the entry has them."""
        index = cls(seqlen=int(seqlen), **{k: arrays[prefix + k] for k in INDEX_ARRAYS}, runs=runs)
        tokens = arrays.get(prefix + "sample_tokens")
        if tokens is not None:
            index.remember_sample_tokens(tokens)
        index.remember_facts(dict(facts) if isinstance(facts, Mapping) else {})
        return index

    def facts(self) -> dict[str, bool]:
        """What a reader checks once over the whole index (``tiled``, ``one_segment_each``), as JSON to keep
        beside the index's arrays in a cache entry (:meth:`remember_facts` takes them back)."""
        return {"tiled": self.tiled, "one_segment_each": self._one_segment_each}

    def remember_facts(self, facts: dict) -> None:
        """Take what :meth:`facts` found (from a cache entry of this very index) instead of checking it again;
        anything else in ``facts`` is ignored."""
        for name, attr in (("tiled", "tiled"), ("one_segment_each", "_one_segment_each")):
            if isinstance(facts.get(name), bool):
                self.__dict__[attr] = facts[name]

    @cached_property
    def _sample_tokens(self) -> np.ndarray:
        # int32: a sample holds at most seqlen <= MAX_SEQLEN tokens (4 bytes a sample, not 8)
        if not self.seg_len.size:
            return np.zeros(len(self), dtype=np.int32)
        if self.seg_len.dtype == np.int32 and self._one_segment_each:
            return self.seg_len  # one segment a sample (diff): its length is the sample's, nothing to add up
        out = np.zeros(len(self), dtype=np.int32)
        ptr = self.seg_ptr
        for lo, hi in sample_chunks(ptr, _CHUNK):  # no int64 copy of every segment's length
            a, b = int(ptr[lo]), int(ptr[hi])
            if b > a:
                out[lo:hi] = np.add.reduceat(np.asarray(self.seg_len[a:b], dtype=np.int64), ptr[lo:hi] - a)
        return out

    @cached_property
    def _one_segment_each(self) -> bool:
        ptr = self.seg_ptr
        return bool(ptr.size - 1 == self.seg_len.size and
                    all((np.diff(ptr[i:i + _CHUNK + 1]) == 1).all() for i in range(0, ptr.size - 1, _CHUNK)))

    @cached_property
    def tiled(self) -> bool:
        """Whether every sample's segments fill its row from column 0 without gaps (what every index
        builder makes): then a reader only pads after each row's last token. Checked once (in chunks: no
        temporary as large as the index), then cached."""
        col, n, G = self.seg_col, self.seg_len, self.seg_len.size
        first = np.zeros(G + 1, dtype=bool)
        first[self.seg_ptr[:-1]] = True  # a sample's first segment starts at column 0, the others where one ended
        for i in range(0, G, _CHUNK):
            j = min(i + _CHUNK, G)
            prev_end = np.zeros(j - i, dtype=col.dtype)
            if i:
                prev_end[0] = col[i - 1] + n[i - 1]
            np.add(col[i:j - 1], n[i:j - 1], out=prev_end[1:])
            prev_end[first[i:j]] = 0
            if not np.array_equal(col[i:j], prev_end):
                return False
        return True

    def segments_of(self, sample_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Segment ids of the given samples (in order) and the position (row) of each in ``sample_ids``."""
        starts = self.seg_ptr[sample_ids]
        if self._one_segment_each:  # diff samples of short files: no repeat needed
            return starts, np.arange(sample_ids.size, dtype=np.int64)
        counts = self.seg_ptr[sample_ids + 1] - starts
        rows = np.repeat(np.arange(sample_ids.size, dtype=np.int64), counts)
        offsets = np.arange(rows.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.repeat(starts, counts) + offsets, rows


MAX_SEQLEN = 2**31 - 1
"""Largest ``seqlen`` accepted (tokens per sample): positions fit int32, as in Megatron and most models."""
AUTO_SEQLEN_CAP = 2**20
"""Largest ``seqlen`` that ``seqlen="auto"`` picks (1,048,576 tokens: 8 MiB per int64 row). Longer
documents are truncated (``diff`` with ``long_files="truncate"``) or windowed; pass an int to go higher."""


def auto_seqlen(doc_len: np.ndarray) -> tuple[int, int]:
    """``(seqlen, longest)`` for ``seqlen="auto"``: the longest document in tokens, capped at
    :data:`AUTO_SEQLEN_CAP`. ``seqlen < longest`` tells the caller the cap applied (worth a warning)."""
    longest = int(np.max(doc_len)) if np.size(doc_len) else 1
    return min(max(longest, 1), AUTO_SEQLEN_CAP), longest


_AUTO = re.compile(r"auto(?::p(\d+(?:\.\d+)?))?")
SEQLEN_FORMS = ("a positive int, 'auto' (the longest document) or 'auto:pNN' (the NN-th percentile of document "
                "lengths, 0 < NN <= 100)")
PADDING_WARN_SHARE = 0.5  # warn when more than this share of the rows' tokens would be PAD


def check_seqlen(seqlen) -> int | str:
    """Validate a requested ``seqlen``: a positive int (returned as a plain int), ``"auto"`` or
    ``"auto:pNN"`` (returned as given)."""
    if isinstance(seqlen, str):
        m = _AUTO.fullmatch(seqlen)
        if m is None or (m.group(1) is not None and not 0 < float(m.group(1)) <= 100):
            raise InputError(f"seqlen must be {SEQLEN_FORMS}, got {short_repr(seqlen)}")
        return seqlen
    if isinstance(seqlen, bool) or not isinstance(seqlen, (int, np.integer)) or seqlen < 1:
        raise InputError(f"seqlen must be {SEQLEN_FORMS}, got {short_repr(seqlen)}")
    if seqlen > MAX_SEQLEN:
        raise InputError(f"seqlen must be at most {MAX_SEQLEN} tokens (2**31 - 1), got {short_repr(seqlen)}")
    return int(seqlen)


def resolve_seqlen(seqlen, doc_len: np.ndarray | None) -> int:
    """``seqlen`` as an int: ``"auto"`` is the longest document in tokens, ``"auto:pNN"`` the ``NN``-th
    percentile of the document lengths (the smallest length at least ``NN`` % of documents fit in,
    ``numpy.percentile(..., method="inverted_cdf")``); ints must be >= 1."""
    checked = check_seqlen(seqlen)
    if isinstance(checked, int):
        return checked
    if doc_len is None:
        raise InputError(f"seqlen={checked!r} needs the document lengths to be resolved")
    if not doc_len.size:
        return 1
    match = _AUTO.fullmatch(checked)
    q = match.group(1) if match else None
    if q is None:
        return auto_seqlen(doc_len)[0]
    return max(1, int(np.percentile(doc_len, float(q), method="inverted_cdf")))


def padding_share(index: SampleIndex) -> float:
    """Share of PAD among all tokens of all rows (``len(index) * seqlen`` tokens); 0.0 without samples."""
    n = len(index)
    if not n:
        return 0.0
    return 1.0 - float(index.sample_tokens().sum()) / (n * index.seqlen)


def warn_if_padded(requested, style: str, index: SampleIndex, *, stacklevel: int = 4) -> float:
    """Warn (:class:`~consumer.errors.ConsumerWarning`) when ``seqlen="auto"`` (the longest document) in
    ``diff`` style makes more than half of the rows PAD, i.e. more than half of an average batch.
    Returns the share. An int or an ``"auto:pNN"`` is the user's choice and never warns.

    ``stacklevel`` 4 points the warning at the caller of ``Consumer(...)`` when called from the
    facade's build step.
    """
    share = padding_share(index)
    if style == "diff" and requested == "auto" and share > PADDING_WARN_SHARE:
        lengths = index.sample_tokens()
        p95 = int(np.percentile(lengths, 95, method="inverted_cdf")) if lengths.size else 1
        warnings.warn(
            f"seqlen={requested!r} resolved to {index.seqlen} tokens, so {share:.0%} of every row is PAD "
            f"on average (the median sample has {int(np.median(lengths))} tokens); choose seqlen= an int "
            f"(the 95th percentile here is {p95}) with long_files='windows' so no byte is lost, "
            f"or seqlen='auto:p95'; create_token_batches(max_tokens=...) also cuts rows to each batch's "
            f"longest sample", ConsumerWarning, stacklevel=stacklevel)
    return share


class PaddingNotice:
    """A dataset's padding warning (:func:`warn_if_padded`), given once, where rows are made (the dataset's
    ``fetch_numpy``, under ``ds[...]``, ``fetch``, ``get_next_batch`` and the loader): building a dataset, SQL,
    ``info`` and ``pack`` make no rows, so they never warn. ``enabled=False`` (a subset) never warns; neither
    does a pickled copy (a loader worker's), whose original says it."""

    def __init__(self, requested: object, style: str, index: SampleIndex, *, enabled: bool = True):
        self.requested, self.style, self.index = requested, style, index
        self.pending = enabled and style == "diff" and requested == "auto"  # the only case that can warn

    def once(self) -> None:
        """Warn if it applies and has not been said yet, pointing at the first caller outside this package."""
        if not self.pending:
            return
        self.pending = False
        frame, level = sys._getframe(1), 3  # level 1: warn_if_padded, 2: once, 3: once's caller
        while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
            frame, level = frame.f_back, level + 1
        warn_if_padded(self.requested, self.style, self.index, stacklevel=level)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the consumer package


def _assemble(doc, start, length, counts, col, doc_class, n_classes, seqlen) -> SampleIndex:
    # windows are dense and ordered: every document has >= 1 token (its EOF), streams are contiguous
    n_samples = counts.size
    seg_ptr = np.zeros(n_samples + 1, dtype=np.int64)
    np.cumsum(counts, out=seg_ptr[1:])
    first_doc = doc[seg_ptr[:-1]] if n_samples else np.zeros(0, dtype=np.int64)
    sample_class = doc_class[first_doc].astype(index_dtype(n_classes))
    return SampleIndex(seqlen=seqlen, seg_ptr=seg_ptr, seg_doc=doc, seg_start=start, seg_len=length,
                       seg_col=col, sample_class=sample_class, class_ptr=class_ptr_of(sample_class, n_classes))


def sample_chunks(seg_ptr: np.ndarray, segments: int) -> Iterator[tuple[int, int]]:
    """``(lo, hi)``: consecutive ranges of samples holding about ``segments`` segments each (at least one sample),
    for passes over an index with temporaries of a chunk's size (a concat index of 10^8 documents has 10^8 segments
    in 4 * 10^5 samples)."""
    lo, n = 0, seg_ptr.size - 1
    while lo < n:
        hi = min(n, max(lo + 1, int(np.searchsorted(seg_ptr, int(seg_ptr[lo]) + segments, side="right")) - 1))
        yield lo, hi
        lo = hi


def build_concat(doc_len, doc_class, n_classes, seqlen, *, long_files="truncate") -> SampleIndex:
    """concat style: per class one stream of documents cut into exact ``seqlen`` windows."""
    doc, start, length, col, counts = pieces(doc_len, doc_class, seqlen)
    return _assemble(doc, start, length, counts, col, doc_class, n_classes, seqlen)


def build_diff(doc_len, doc_class, n_classes, seqlen, *, long_files="truncate") -> SampleIndex:
    """diff style: one padded sample per document (or consecutive windows of it with ``long_files="windows"``).
    ``"crop"`` indexes like ``"truncate"``; the reader moves each long file's window per epoch."""
    n_docs = doc_len.size
    if long_files == "windows":
        doc, start, length, col, counts = pieces(doc_len, np.arange(n_docs, dtype=np.int64), seqlen)
        return _assemble(doc, start, length, counts, col, doc_class, n_classes, seqlen)
    doc, start, length = first_pieces(doc_len, seqlen)
    # one sample a document, its one segment: what _assemble makes of counts of ones, without the gathers (and
    # without copies of arrays already in their dtype: the classes of a store, often all zeros never written)
    sample_class = doc_class.astype(index_dtype(n_classes), copy=False)
    return SampleIndex(seqlen=seqlen, seg_ptr=np.arange(n_docs + 1, dtype=np.int64), seg_doc=doc, seg_start=start,
                       seg_len=length, seg_col=np.zeros(n_docs, dtype=length.dtype),
                       sample_class=sample_class, class_ptr=class_ptr_of(sample_class, n_classes))


def build_packed(doc_len, doc_class, n_classes, seqlen, *, long_files="windows") -> SampleIndex:
    """packed style: whole documents in rows by best-fit decreasing, per class (:mod:`consumer.tokens.packing`)."""
    return SampleIndex(seqlen, *packed_arrays(doc_len, doc_class, n_classes, seqlen, long_files=long_files))


STYLES = {"diff": build_diff, "concat": build_concat, "packed": build_packed}


def long_files_choices(style: str) -> tuple[str, ...]:
    """The ``long_files`` values ``style`` accepts, its default first (``"windows"`` for packed, else
    ``"truncate"``)."""
    return PACKED_LONG_FILES if style == "packed" else LONG_FILES


def build_index(style: str, doc_len: np.ndarray, doc_class: np.ndarray, n_classes: int, seqlen: int,
                *, long_files: str | None = None) -> SampleIndex:
    """Build the :class:`SampleIndex` of ``style`` (a key of :data:`STYLES`) over documents of ``doc_len`` tokens.

    ``doc_class`` must be non-decreasing (documents grouped by class, as :class:`~consumer.sources.corpus.Corpus` orders
    them). ``long_files`` applies to ``diff`` and ``packed`` (None: the style's default, :func:`long_files_choices`).
    """
    if not isinstance(style, str) or style not in STYLES:
        raise InputError(f"style must be one of {sorted(STYLES)}, got {short_repr(style)}")
    choices = long_files_choices(style)
    long_files = check_choice("long_files", choices[0] if long_files is None else long_files, choices)
    seqlen = resolve_seqlen(seqlen, None)
    n_classes = check_int("n_classes", n_classes, 0)
    doc_len = int_vector("doc_len", doc_len, keep_int32=True)  # int32 lengths (a .idx's) are not widened
    doc_class = int_vector("doc_class", doc_class, 0, n_classes - 1, keep_int32=True)
    if doc_len.shape != doc_class.shape:
        raise InputError(f"doc_len and doc_class must have the same length, got {doc_len.size} and {doc_class.size}")
    if doc_len.size and doc_len.min() < 1:
        raise InputError(f"doc_len must be >= 1 for every document, got {int(doc_len.min())}")
    if any(bool((np.diff(doc_class[a:a + _CHUNK + 1]) < 0).any()) for a in range(0, doc_class.size, _CHUNK)):
        raise InputError("doc_class must be non-decreasing (documents grouped by class)")
    return STYLES[style](doc_len, doc_class, n_classes, seqlen, long_files=long_files)
