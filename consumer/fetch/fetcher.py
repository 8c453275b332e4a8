"""Fetching: sample ids -> numpy columns (the read + collate-free half of ``ds[...]``).

A :class:`Fetcher` owns what one dataset's fetches need — its documents, its sample index, the class
id of each class, the seed of its masks — and nothing else: no torch (``collate`` turns the columns
into tensors), no selection parsing (``select``), no batch order (``sampler``). It is cheap to build
and holds no open resources.
"""

from __future__ import annotations

import os

import numpy as np
import numpy.typing as npt

from ..errors import InputError, short_repr
from ..sources.base import ByteSource
from ..sources.store import TokenData
from ..tokens.documents import DocumentTable
from ..tokens.index import SampleIndex
from ..tokens.megatron_index import MegatronSampling
from ..tokens.split import crop_offsets
from ..util.validate import is_int
from .columns import BatchParts, MaskConfig, Query, make_columns, mask_rng, parse_query
from .objectives import batch_parts
from .one_row import OneRow
from .packed_rows import SMALL_BATCH, PackedRows
from .raw_rows import FEW_ROWS, few_rows
from .reader import read_rows, read_segments

__all__ = ["Fetcher", "batch_budget"]

_BUDGET_ENV = "CONSUMER_MAX_BATCH_BYTES"
_DEFAULT_BUDGET = 16 << 30  # 16 GiB: far above any real batch, far below what a typo (seqlen=10**12) asks for


_PLAIN = ("input_array",)  # the default query: the token rows alone
_NONE = np.zeros(0, dtype=np.int64)  # a per-sample fact no selected column reads
_INT64, _INT32 = np.dtype(np.int64), np.dtype(np.int32)


def _out_dtype(out_dtype: object) -> np.dtype | None:
    """numpy int64 or int32 for an accepted ``out_dtype``, else None."""
    if out_dtype is np.int64:
        return _INT64
    if out_dtype is np.int32:
        return _INT32
    return np.dtype(out_dtype) if out_dtype in (np.int64, np.int32, "int64", "int32") else None


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
                 crop: bool = False, sampling: object = None):
        self.documents = documents
        self.sampling = sampling  # the dataset's sampling (a MegatronSampling shapes the "megatron" query)
        self.index = index
        self.class_ids = class_ids  # class index -> class id (class_to_id)
        self.seed = seed
        self.crop = crop  # long_files="crop": each long file's window moves per (seed, epoch, sample)
        # how rows are read (the dataset's reading strategy), made on first use: for a packed store each sample's
        # store range, the clean-sample marks and the store stamp; for files, a few rows with Python ints
        self._rows: _StoreRows | _FileRows | None = None
        # one plain row of a warm store (an int in [0, n), a list of one, a 1-element int64 array) of the default
        # query: ``one_row.row(key, query, mask, out_dtype)`` is the tensor (numpy with ``tensor=False``), or None
        # (use :meth:`fetch`, which gives the same result); armed by a general fetch of one row (fetch/one_row.py)
        self.one_row = OneRow(len(index))

    def fetch(self, sample_ids: np.ndarray, query: object = None, *, mask: MaskConfig, epoch: int = 0,
              width: int | None = None, out_dtype: npt.DTypeLike = np.int64,
              into: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """The columns of ``query`` for ``sample_ids`` (in order; int64 or ``out_dtype``). ``epoch`` varies the masks;
        ``width`` (>= the longest selected sample) narrows the rows from ``seqlen``. ``into=(out, positions)``: a
        plain query's rows may be written straight into ``out`` (rows ``positions``, of ``out_dtype`` and the rows'
        width), with no array of their own: the answer's ``input_array`` is then ``out`` itself (a mixture fills its
        batch so, part by part); otherwise it is a new array, as without ``into``."""
        q = parse_query(query)
        if q.objective == "megatron" and isinstance(self.sampling, MegatronSampling) and \
                self.sampling.create_attention_mask and "attention_mask" not in q.columns:  # as Megatron's item has
            q = Query(q.objective, (*q.columns, "attention_mask"))
        n = len(self.index)
        if sample_ids.size:
            if sample_ids.size <= SMALL_BATCH:  # min/max of a few Python ints: cheaper than two numpy reductions
                listed = sample_ids.tolist()
                outside = min(listed) < 0 or max(listed) >= n
            else:
                outside = sample_ids.min() < 0 or sample_ids.max() >= n
            if outside:
                raise InputError(f"sample_ids must be in [0, {n}), got {short_repr(sample_ids.tolist())}")
        if width is not None and sample_ids.size and int(self.index.sample_tokens()[sample_ids].max()) > width:
            raise InputError(f"width={width} is narrower than the longest selected sample "
                             f"({int(self.index.sample_tokens()[sample_ids].max())} tokens)")
        masking = q.objective == "mask"
        dtype = _out_dtype(out_dtype)
        if dtype is None:
            raise InputError(f"out_dtype must be numpy.int64 or numpy.int32, got {short_repr(out_dtype)}")
        rows, width_ = int(sample_ids.size), self.index.seqlen if width is None else int(width)
        # token rows, content mask, masked copy and labels, attention mask: at most ~5 [B, L] int64 arrays at once
        need = rows * (width_ + 1) * 8 * (5 if masking or q.objective != "plain" else 2)
        if "attention_mask" in q.columns and q.objective == "megatron":
            need += rows * width_ * width_  # [B, 1, L, L] bool
        if need > batch_budget():
            raise InputError(f"sample_ids: a batch of {rows} rows x {width_} tokens needs about {need} bytes, over the "
                             f"fetch budget of {batch_budget()} bytes (${_BUDGET_ENV}); fetch fewer samples at a "
                             "time or choose a smaller seqlen")
        reading = self._rows
        if reading is None:
            reading = self._rows = self._reading()
        tokens = None
        plain = q.columns == _PLAIN and q.objective == "plain" and not mask.add_cls
        if into is not None and not (plain and into[0].dtype == dtype and into[0].ndim == 2 and
                                     into[0].shape[1] == width_ and into[1].size == rows):
            into = None
        if not masking and not self.crop:  # a store: one range per row; files: a few rows with Python ints
            tokens = reading.lean(sample_ids, width, width_, dtype, into)
            if tokens is None and isinstance(reading, _StoreRows):
                tokens = reading.mixed(sample_ids, width, dtype, self.index, self.documents)
            if tokens is not None and rows == 1 and width is None and need <= _DEFAULT_BUDGET and \
                    isinstance(reading, _StoreRows) and not self.one_row.armed:
                self.one_row.arm(reading.packed)
        shift = None
        if tokens is None:
            if self.crop:
                first_seg = self.index.seg_ptr[sample_ids]
                doc = self.index.seg_doc[first_seg]
                room = self.documents.doc_len[doc] - self.index.seg_len[first_seg]
                shift = crop_offsets(self.seed, epoch, sample_ids, room)
            tokens, content = read_rows(self.index, self.documents, sample_ids, content_mask=masking,
                                        runs=reading.runs, width=width, shift=shift, dtype=dtype)
            reading.check(tokens, sample_ids, shift)
        else:
            content = None
        if plain:
            return {"input_array": tokens}
        return make_columns(q, self._parts(q, tokens, content, sample_ids, shift, mask, epoch))

    def _parts(self, q: Query, tokens: np.ndarray, content: np.ndarray | None, ids: np.ndarray,
               shift: np.ndarray | None, mask: MaskConfig, epoch: int) -> BatchParts:
        """What this batch's columns are made from (see :func:`consumer.fetch.objectives.batch_parts`)."""
        index = self.index

        def per_sample(name: str) -> np.ndarray:
            if name == "class":
                out: np.ndarray = self.class_ids[index.sample_class[ids]]
                return out
            first_seg = index.seg_ptr[ids]
            if name == "file_id":
                out = index.seg_doc[first_seg].astype(np.int64)
                return out
            out = index.seg_start[first_seg] + (0 if shift is None else shift)
            return out

        return batch_parts(q, tokens, content, ids, documents=self.documents, index=index, shift=shift, mask=mask,
                           sampling=self.sampling, rng=lambda: mask_rng(self.seed, epoch, ids),
                           per_sample=per_sample)

    def _reading(self) -> _StoreRows | _FileRows:
        """How this dataset's rows are read, as its source chooses."""
        def files(source: ByteSource) -> _StoreRows | _FileRows:
            return _FileRows(self.index, self.documents, source)

        def store(_: TokenData) -> _StoreRows | _FileRows:
            return _StoreRows(PackedRows(self.index, self.documents))

        return self.documents.source.choose(files=files, store=store)

    def document_tokens(self, file_id: int) -> np.ndarray:
        """The whole token stream of one file: header, SEP, content, EOF."""
        docs = self.documents
        if not is_int(file_id) or not 0 <= file_id < len(docs):
            raise InputError(f"file_id must be an int in [0, {len(docs)}), got {short_repr(file_id)}")
        n = int(docs.doc_len[file_id])
        zero = np.zeros(1, dtype=np.int64)
        row: np.ndarray = read_segments(docs, (1, n), zero, zero, np.array([file_id]), zero, np.array([n]))[0][0]
        return row


class _StoreRows:
    """Rows of a packed store: the lean path of :class:`PackedRows`, each sample's store range for the general
    reader, and the id check of the rows it makes."""

    def __init__(self, packed: PackedRows) -> None:
        self.packed, self.runs = packed, packed.start

    def lean(self, ids: np.ndarray, width: int | None, width_: int, dtype: np.dtype,
             into: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray | None:
        return self.packed.rows(ids, width, dtype, into)

    def check(self, tokens: np.ndarray, ids: np.ndarray, shift: np.ndarray | None) -> None:
        self.packed.check_rows(tokens, ids, shift)

    def mixed(self, ids: np.ndarray, width: int | None, dtype: np.dtype, index: SampleIndex,
              documents: DocumentTable) -> np.ndarray | None:
        """A batch of which most rows are one store range each and the others not (a ``packed`` row holding the last
        pieces of two long documents): those rows by the lean path, the others by the general reader, or None
        (the general reader for all) when fewer than half are one range, or the store is not mapped."""
        packed = self.packed
        if ids.size <= SMALL_BATCH or not packed.local:
            return None
        runs = packed.start[ids] >= 0
        n_runs = int(np.count_nonzero(runs))
        if 2 * n_runs < ids.size or n_runs == ids.size:
            return None
        ranged, other = ids[runs], ids[~runs]
        fast = packed.rows(ranged, width, dtype)
        if fast is None:
            return None
        slow, _ = read_rows(index, documents, other, runs=self.runs, width=width, dtype=dtype)
        self.check(slow, other, None)
        out = np.empty((ids.size, fast.shape[1]), dtype=dtype)
        out[runs] = fast
        out[~runs] = slow
        return out


class _FileRows:
    """Rows built from the files' bytes: a few rows with Python ints (:func:`few_rows`), else the general reader."""

    runs = None

    def __init__(self, index: SampleIndex, documents: DocumentTable, source: ByteSource) -> None:
        self.index, self.documents, self.source = index, documents, source

    def lean(self, ids: np.ndarray, width: int | None, width_: int, dtype: np.dtype,
             into: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray | None:
        if ids.size > FEW_ROWS:  # rows of files are their own arrays (``into`` is for stores)
            return None
        return few_rows(self.index, self.documents, ids.tolist(), width_, dtype, self.source)

    def check(self, tokens: np.ndarray, ids: np.ndarray, shift: np.ndarray | None) -> None:
        """Nothing: rows built from bytes hold valid ids by construction."""
