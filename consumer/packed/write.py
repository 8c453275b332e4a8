"""Writing packed stores: :func:`pack` (a dataset's documents; :func:`~consumer.packed.merge.merge_packed` merges
stores into one).

Both write every file under a temporary prefix in the target directory and share one commit
(:mod:`consumer.packed.commit`): nothing at the target is touched before every byte is written, so a full disk
or a file-size limit (:class:`~consumer.errors.StorageFullError`, naming the prefix and the bytes needed) leaves
a previous store there whole. A write killed part-way leaves only hidden temporary files, which
:func:`~consumer.packed.open.open_packed` never mistakes for a store.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from ..catalog.headers import MAX_HEADER_BYTES
from ..errors import InputError
from ..fetch.reader import read_segments
from ..formats.chunksums import DEFAULT_CHUNK_BYTES, ChunkHasher, check_chunk_bytes
from ..spec import Spec, metadata_name
from ..tokens.documents import DocumentTable
from ..tokens.index import SampleIndex
from ..tokens.packing import store_order
from ..util.progress import progress_bar
from ..util.validate import check_bool, check_choice, check_int
from .commit import _Both, _summary, _write_store, _write_sums
from .layout import (
    FORMATS,
    TABLE_SUFFIX,
    as_prefix,
    make_sidecar,
    store_dtype,
    with_suffix,
)
from .sums import data_offset
from .table import write_table

__all__ = ["pack", "pack_order", "token_pieces", "chunk_segments", "DEFAULT_CHUNK_TOKENS"]

_INT32_MAX = 2**31 - 1
DEFAULT_CHUNK_TOKENS = 1 << 22  # 4M tokens (32 MB of int64) per read_segments call while packing


def chunk_segments(doc_len: np.ndarray, chunk_tokens: int,
                   ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The token stream of all documents cut into chunks of ``chunk_tokens`` tokens (the last shorter).

    Yields per chunk the segments it holds, in order: document ids, start within the document,
    length, and whether the segment is the document's first piece. A document longer than a chunk
    is split over several; an empty document is one empty segment. Only the chunk's documents are
    touched (``searchsorted`` on the cumulative lengths), so a chunk costs O(its documents).
    """
    ends = np.cumsum(doc_len)  # document d starts where d - 1 ends (no second array of starts)
    n, d0, g0 = doc_len.size, 0, 0
    while d0 < n:
        g1 = g0 + chunk_tokens
        # the documents starting before g1: document 0, and each d whose predecessor ends before g1
        d1 = n if g1 >= int(ends[-1]) else 1 + int(np.searchsorted(ends[:n - 1], g1, side="left"))
        d = np.arange(d0, max(d1, d0 + 1), dtype=np.int64)
        starts = ends[d] - doc_len[d]
        lo = np.maximum(starts, g0)
        hi = np.minimum(ends[d], g1)
        yield d, lo - starts, hi - lo, starts >= g0
        d0 += int(np.count_nonzero(ends[d] <= g1))
        g0 = g1


def token_pieces(docs: DocumentTable, dtype: np.dtype, chunk_tokens: int, bar, digest
                 ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every document's tokens in ``dtype``, in order, a chunk of ``chunk_tokens`` tokens at a time, as
    ``(tokens, lengths, first)``: the chunk's segments back to back, each one a document or a piece of one
    (``first``: the document's first piece). One :func:`read_segments` call and one write per chunk, so memory
    stays bounded whatever the document sizes and nothing runs per document in Python (``digest`` hashes every
    token, the same bytes as the whole documents back to back)."""
    for d, a, n, first in chunk_segments(docs.doc_len, chunk_tokens):
        ptr = np.zeros(n.size + 1, dtype=np.int64)
        np.cumsum(n, out=ptr[1:])
        zeros = np.zeros(n.size, dtype=np.int64)
        rows, _ = read_segments(docs, (1, int(ptr[-1])), zeros, ptr[:-1], d, a, n)
        tokens = rows[0].astype(dtype)
        del rows
        digest.update(tokens.data)
        yield tokens, n, first
        bar.update(tokens.nbytes)


def pack_order(documents: DocumentTable, spec: Spec, index: SampleIndex) -> np.ndarray | None:
    """The order a pack writes ``documents`` in, as document ids; None: as they are (corpus order).

    A ``style="packed"`` dataset's documents go in the store order of its packed plan ``index`` (the dataset's own
    :class:`~consumer.tokens.index.SampleIndex`, not planned again; :func:`~consumer.tokens.packing.store_order`: by
    the row of each document's last piece, then its place in that row), so the rows of the store served
    ``style="packed"`` (same ``seqlen`` and ``long_files``) are the dataset's rows and each one, but for a row with
    the last pieces of two long documents, one contiguous range of the store (one slice copy a row). Classes stay
    grouped. Other styles (and a packed dataset already in that order): None. The caller (``Consumer.pack``,
    :func:`~consumer.scale.pack.pack_dataset`) reorders with ``documents.subset`` (every source's ``subset`` takes
    documents in any order: local files, objects, records, a store's documents) before :func:`pack`.
    """
    if spec.style != "packed" or len(documents) == 0:
        return None
    order = store_order(index.seg_doc, index.seg_start, len(documents), index.seqlen)
    return None if bool((order == np.arange(order.size)).all()) else order


def pack(documents: DocumentTable, classes: list[str], spec: Spec, prefix, format: str = "megatron",
         verbose: bool = False, *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
         checksum_chunk_bytes: int = DEFAULT_CHUNK_BYTES, pieces: Callable | None = None) -> dict:
    """Write every document of ``documents`` to a packed store at ``prefix`` (``Consumer.pack`` calls this).

    One document per source file, with exactly the tokens the raw reader produces, in ``documents`` order, as given
    (:func:`~consumer.scale.pack.pack_dataset` puts a ``style="packed"`` dataset's documents in the store order of
    its packed rows first, :func:`pack_order`: each packed row of the store then one contiguous range, read with one
    copy); the file table follows the same order.
    ``format="megatron"`` writes ``prefix.bin/.idx`` (Megatron-LM's
    ``IndexedDataset`` layout), ``"modalities"`` writes ``prefix.pbin``; both add
    ``prefix.consumer.npz`` (file table) and ``prefix.consumer.json`` (sidecar: ``classes``, ``spec``'s
    header mode and ``class_to_id``); see :mod:`consumer.packed.layout`. Tokens are read and written
    in chunks of ``chunk_tokens`` tokens (many documents per read, or a piece of a longer one), so
    memory stays bounded by the chunk whatever the document sizes; a ``"megatron"`` store holds at
    most 2**31 - 1 tokens per document (its ``.idx`` lengths are int32: InputError naming the file).
    Atomic: a pack that fails or is killed while writing leaves the final names untouched (a previous
    store there stays valid; a kill leaves only hidden ``.tmp`` files). Only a failure during the final
    renames (microseconds) can leave a mix of old and new files, which ``open_packed`` refuses by their
    recorded sizes or the missing sidecar.
    Every ``checksum_chunk_bytes`` bytes of token data (a power of two, 4 KiB to 1 GiB; 16 KiB by default) get a
    CRC-32C, written to ``prefix.consumer.sums`` (:mod:`consumer.packed.sums`): each chunk is checked the first
    time a process reads it.
    ``verbose`` reports the packed size and shows a progress bar (bytes); otherwise nothing is
    printed. Returns a summary: prefix, format, dtype, documents, tokens, source and store bytes, the
    files written and the wall time. ``pieces(dtype, chunk_tokens, bar, digest)`` replaces
    :func:`token_pieces` as the source of the tokens (the same stream, made elsewhere: a pack on a cluster), in the
    order of ``documents``.
    """
    check_choice("format", format, sorted(FORMATS))
    check_bool("verbose", verbose)
    chunk_tokens = check_int("chunk_tokens", chunk_tokens, 1)
    sum_bytes = check_chunk_bytes(checksum_chunk_bytes, "checksum_chunk_bytes")
    if len(documents) == 0:
        raise InputError("documents: the dataset has no documents to pack")
    final = as_prefix(prefix, create=True)
    dtype = store_dtype(format, documents.vocab.size)
    tokens = int(documents.doc_len.sum())
    longest = int(np.argmax(documents.doc_len))
    if format == "megatron" and int(documents.doc_len[longest]) > _INT32_MAX:
        raise InputError(f"documents: {documents.paths[longest]!r} has {int(documents.doc_len[longest])} tokens; a "
                         f"megatron store holds at most {_INT32_MAX} per document (int32 lengths): pack it with "
                         "format='modalities', or use a larger n_bytes")
    packed_bytes = tokens * dtype.itemsize
    t0 = time.perf_counter()
    bar = progress_bar(packed_bytes, verbose, f"pack {final.name} ({format}, {dtype.name})", unit="B",
                       announce=f"consumer pack: {len(documents)} documents, {tokens} tokens -> {packed_bytes} "
                                f"bytes of {dtype.name} tokens ({format}) at {final}")
    class_to_id = spec.class_to_id if spec.class_to_id is not None else {c: i for i, c in enumerate(classes)}
    sidecar = make_sidecar(format, dtype, spec.n_bytes, metadata_name(spec.metadata), documents.with_header,
                           MAX_HEADER_BYTES, documents.headers, list(classes), dict(class_to_id), len(documents),
                           tokens, spec=spec)

    def write(tmp: Path) -> None:
        digest, hasher = hashlib.sha256(), ChunkHasher(sum_bytes, data_offset(format))
        sink = _Both(digest, hasher)
        source = token_pieces(documents, dtype, chunk_tokens, bar, sink) if pieces is None \
            else pieces(dtype, chunk_tokens, bar, sink)
        FORMATS[format].write(tmp, source, dtype)
        sidecar["tokens_sha256"] = digest.hexdigest()
        _write_sums(tmp, sidecar, hasher.finish())
        write_table(with_suffix(tmp, TABLE_SUFFIX), documents.paths, documents.doc_class, documents.doc_size,
                    documents.doc_header)

    try:
        files = _write_store(final, format, write, sidecar, packed_bytes + 64 * len(documents) + (1 << 16))
    finally:
        bar.close()
    return _summary(final, format, dtype, files, len(documents), tokens, int(documents.doc_size.sum()),
                    time.perf_counter() - t0)

