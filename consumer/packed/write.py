"""Writing packed stores: :func:`pack` (a dataset's documents) and :func:`merge_packed` (stores into one).

Both write every file under a temporary prefix in the target directory (hidden ``.name.<hex>.tmp``
names, each file fsynced), the sidecar included, and share one commit: remove an older sidecar, rename the
data files and the table into place, then the sidecar last. Nothing at the target is touched before every
byte is written, so a full disk or a file-size limit (:class:`~consumer.errors.StorageFullError`, naming
the prefix and the bytes needed) leaves a previous store there whole. A write killed part-way leaves only
hidden temporary files, which :func:`~consumer.packed.open.open_packed` never mistakes for a store.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from ..catalog.headers import MAX_HEADER_BYTES
from ..errors import InputError, short_repr
from ..fetch.reader import read_segments
from ..formats.chunksums import DEFAULT_CHUNK_BYTES, ChunkHasher, check_chunk_bytes, sums_of_file
from ..formats.mmidx import merge
from ..spec import Spec, metadata_name
from ..tokens.documents import DocumentTable
from ..util.fileio import discard, fsync_dir, sha256_file, space_for, temp_path
from ..util.progress import progress_bar
from ..util.validate import check_bool, check_choice, check_int
from .layout import (
    FORMATS,
    SIDECAR_SUFFIX,
    TABLE_SUFFIX,
    as_prefix,
    make_sidecar,
    store_dtype,
    store_suffixes,
    with_suffix,
)
from .open import Store, load_store
from .sums import SIDECAR_KEY, SUMS_SUFFIX, data_offset, sidecar_entry, write_sums_file
from .table import write_table

__all__ = ["pack", "merge_packed", "token_pieces", "DEFAULT_CHUNK_TOKENS"]

_INT32_MAX = 2**31 - 1
DEFAULT_CHUNK_TOKENS = 1 << 22  # 4M tokens (32 MB of int64) per read_segments call while packing


def _chunks(doc_len: np.ndarray, chunk_tokens: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The token stream of all documents cut into chunks of ``chunk_tokens`` tokens (the last shorter).

    Yields per chunk the segments it holds, in order: document ids, start within the document,
    length, and whether the segment is the document's first piece. A document longer than a chunk
    is split over several; an empty document is one empty segment. Only the chunk's documents are
    touched (``searchsorted`` on the cumulative lengths), so a chunk costs O(its documents).
    """
    ends = np.cumsum(doc_len)
    starts = ends - doc_len
    n, d0, g0 = doc_len.size, 0, 0
    while d0 < n:
        g1 = g0 + chunk_tokens
        d1 = n if g1 >= int(ends[-1]) else int(np.searchsorted(starts, g1, side="left"))
        d = np.arange(d0, max(d1, d0 + 1), dtype=np.int64)
        lo = np.maximum(starts[d], g0)
        hi = np.minimum(ends[d], g1)
        yield d, lo - starts[d], hi - lo, starts[d] >= g0
        d0 += int(np.count_nonzero(ends[d] <= g1))
        g0 = g1


def token_pieces(docs: DocumentTable, dtype: np.dtype, chunk_tokens: int, bar, digest
                 ) -> Iterator[tuple[np.ndarray, bool]]:
    """Every document's tokens in ``dtype``, in order, as ``(piece, first)``: one :func:`read_segments`
    call per chunk of ``chunk_tokens`` tokens, so memory stays bounded whatever the document sizes
    (``digest`` hashes every token, the same bytes as the whole documents back to back)."""
    for d, a, n, first in _chunks(docs.doc_len, chunk_tokens):
        ptr = np.zeros(n.size + 1, dtype=np.int64)
        np.cumsum(n, out=ptr[1:])
        zeros = np.zeros(n.size, dtype=np.int64)
        rows, _ = read_segments(docs, (1, int(ptr[-1])), zeros, ptr[:-1], d, a, n)
        tokens = rows[0].astype(dtype)
        del rows
        digest.update(tokens.data)
        for lo, hi, f in zip(ptr[:-1].tolist(), ptr[1:].tolist(), first.tolist()):
            yield tokens[lo:hi], f
        bar.update(tokens.nbytes)


def _check_all(store: Store) -> None:
    """Check every chunk of an input store (when it has chunk sums), 4M tokens of plain reads at a time."""
    if store.verifier is None:
        return
    reads = store.tokens.for_one_pass()
    n = reads.size
    step = max(DEFAULT_CHUNK_TOKENS, store.verifier.sums.chunk_bytes // reads.itemsize)
    try:
        for lo in range(0, n, step):
            reads.check_ranges(np.array([lo], dtype=np.int64), np.array([min(step, n - lo)], dtype=np.int64))
    finally:
        reads.close()


def _store_pieces(readers: list, owner: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                  chunk_tokens: int) -> Iterator[tuple[np.ndarray, bool]]:
    """Documents of stores as ``(piece, first)`` (see :func:`token_pieces`): document ``k`` is ``lengths[k]``
    tokens from token ``starts[k]`` of store ``owner[k]``, read by ``readers[owner[k]](start, count)``
    at most ``chunk_tokens`` tokens at a time."""
    for k, start, n in zip(owner.tolist(), starts.tolist(), lengths.tolist()):
        first, done = True, 0
        while first or done < n:
            m = min(n - done, chunk_tokens)
            yield readers[k](start + done, m), first
            first, done = False, done + m


class _Both:
    """Feeds every ``update`` to two digests (the sha256 and the chunk sums of the token data)."""

    def __init__(self, a, b) -> None:
        self.a, self.b = a, b

    def update(self, data) -> None:
        self.a.update(data)
        self.b.update(data)


def _commit(tmp: Path, prefix: Path, fmt: str, sidecar: dict) -> dict[str, dict]:
    """Write the sidecar under the temporary prefix too, then rename the store files into place, the sidecar
    last; returns its ``files``. Every byte is written before anything at ``prefix`` is touched: a disk that
    fills up (or a size limit) fails the pack while the previous store there is still whole."""
    kinds = store_suffixes(fmt)
    files = {}
    for kind, suffix in kinds.items():
        files[kind] = {"name": prefix.name + suffix, "size": os.stat(with_suffix(tmp, suffix)).st_size}
    sidecar = dict(sidecar, files=files)
    if SIDECAR_KEY in sidecar:  # the chunk sums file, committed with the data files (see consumer.packed.sums)
        kinds = dict(kinds, sums=SUMS_SUFFIX)
        sidecar[SIDECAR_KEY] = dict(sidecar[SIDECAR_KEY], name=prefix.name + SUMS_SUFFIX,
                                    size=os.stat(with_suffix(tmp, SUMS_SUFFIX)).st_size)
    text = json.dumps(sidecar, indent=1, sort_keys=False).encode("utf-8")
    with open(with_suffix(tmp, SIDECAR_SUFFIX), "xb") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    with_suffix(prefix, SIDECAR_SUFFIX).unlink(missing_ok=True)  # an old sidecar never describes new data
    fsync_dir(prefix.parent)
    for suffix in kinds.values():
        os.replace(with_suffix(tmp, suffix), with_suffix(prefix, suffix))
    fsync_dir(prefix.parent)
    os.replace(with_suffix(tmp, SIDECAR_SUFFIX), with_suffix(prefix, SIDECAR_SUFFIX))
    fsync_dir(prefix.parent)
    return files


def _write_store(final: Path, fmt: str, write, sidecar: dict, need: int) -> dict[str, dict]:
    """Run ``write(tmp_prefix)`` (which writes the store's files under a temporary prefix), then commit;
    on any failure (or a kill signal turned into an exception) remove every temporary file. Running out of
    room (about ``need`` bytes are written) is a :class:`~consumer.errors.StorageFullError` naming the prefix."""
    tmp = temp_path(final)
    try:
        with space_for(final, need, "prefix (the packed store)"):
            write(tmp)
            return _commit(tmp, final, fmt, sidecar)
    except BaseException:
        for suffix in [*store_suffixes(fmt).values(), SUMS_SUFFIX, SIDECAR_SUFFIX]:
            discard(with_suffix(tmp, suffix))
        raise


def _write_sums(tmp: Path, sidecar: dict, sums) -> None:
    """Write the chunk sums under the temporary prefix and record them in the sidecar (size set at commit)."""
    write_sums_file(with_suffix(tmp, SUMS_SUFFIX), sums)
    sidecar[SIDECAR_KEY] = sidecar_entry("", 0, sums)


def _summary(prefix: Path, fmt: str, dtype: np.dtype, files: dict, documents: int, tokens: int,
             source_bytes: int, seconds: float) -> dict:
    sums = with_suffix(prefix, SUMS_SUFFIX)
    files = dict(files, sums={"name": sums.name, "size": sums.stat().st_size})  # the chunk sums, written with it
    return {
        "prefix": str(prefix),
        "format": fmt,
        "dtype": dtype.name,
        "documents": int(documents),
        "tokens": int(tokens),
        "source_bytes": int(source_bytes),
        "bytes": int(sum(f["size"] for f in files.values())),
        "files": {kind: str(prefix.parent / f["name"]) for kind, f in files.items()}
        | {"sidecar": str(with_suffix(prefix, SIDECAR_SUFFIX))},
        "seconds": seconds,
    }


def pack(documents: DocumentTable, classes: list[str], spec: Spec, prefix, format: str = "megatron",
         verbose: bool = False, *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
         checksum_chunk_bytes: int = DEFAULT_CHUNK_BYTES, pieces: Callable | None = None) -> dict:
    """Write every document of ``documents`` to a packed store at ``prefix`` (``Consumer.pack`` calls this).

    One document per source file, in ``documents`` order (corpus order), with exactly the tokens the
    raw reader produces. ``format="megatron"`` writes ``prefix.bin/.idx`` (Megatron-LM's
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
    Every ``checksum_chunk_bytes`` bytes of token data (a power of two, 4 KiB to 1 GiB; 1 MiB by default) get a
    CRC-32C, written to ``prefix.consumer.sums`` (:mod:`consumer.packed.sums`): each chunk is checked the first
    time a process reads it.
    ``verbose`` reports the packed size and shows a progress bar (bytes); otherwise nothing is
    printed. Returns a summary: prefix, format, dtype, documents, tokens, source and store bytes, the
    files written and the wall time. ``pieces(dtype, chunk_tokens, bar, digest)`` replaces
    :func:`token_pieces` as the source of the tokens (the same stream, made elsewhere: a pack on a cluster).
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


def _same(stores: list[Store], key: str) -> None:
    first = stores[0]
    for other in stores[1:]:
        if other.sidecar[key] != first.sidecar[key]:
            raise InputError(
                f"prefixes: every store must have the same {key}: {str(first.prefix)!r} has "
                f"{first.sidecar[key]!r}, {str(other.prefix)!r} has {other.sidecar[key]!r}")


def _merged_class_to_id(stores: list[Store], classes: list[str]) -> dict[str, int]:
    """Union of the inputs' ``class_to_id`` when consistent, else the default 0..C-1 by name."""
    out: dict[str, int] = {}
    for s in stores:
        for c, i in s.sidecar["class_to_id"].items():
            if c in classes and out.setdefault(c, i) != i:
                return {c: k for k, c in enumerate(classes)}
    if set(out) != set(classes) or len(set(out.values())) != len(out):
        return {c: k for k, c in enumerate(classes)}
    return {c: out[c] for c in classes}


def merge_packed(prefixes: Sequence, out_prefix, order_by: str = "corpus") -> dict:
    """Combine Megatron packed stores (e.g. made on different machines) into one store at ``out_prefix``.

    All inputs are fully validated first and must share ``n_bytes``, the metadata mode and the
    header cap (InputError naming both values otherwise). Header texts and classes are unioned and
    re-numbered; a path present in two stores is an InputError naming it. ``order_by="corpus"`` (default)
    writes the documents in corpus order (class name, then path), so merging the stores packed by
    ``consumer pack --shard i/N`` gives byte for byte the ``.bin/.idx`` and file table of one pack of
    the whole corpus; ``order_by="inputs"`` concatenates the inputs as they are with
    :func:`consumer.formats.mmidx.merge` (a byte copy). ``.pbin`` stores are refused (InputError):
    convert them by opening and re-packing. Returns a summary like
    :func:`pack` (plus ``inputs``).
    """
    check_choice("order_by", order_by, ["corpus", "inputs"])
    if isinstance(prefixes, (str, bytes, os.PathLike)) or not isinstance(prefixes, Sequence) or not prefixes:
        raise InputError(f"prefixes must be a non-empty list of store prefixes, got {short_repr(prefixes)}")
    final = as_prefix(out_prefix, "out_prefix", create=True)
    t0 = time.perf_counter()
    stores = [load_store(p) for p in prefixes]
    for s in stores:
        if s.fmt != "megatron":
            raise InputError(f"prefixes: merge_packed supports megatron stores only, {str(s.prefix)!r} is a "
                             f"{s.fmt!r} store (open it with Consumer.from_packed and pack it as megatron)")
        if s.prefix == final:
            raise InputError(f"out_prefix {str(final)!r} is also an input; write the merge to a new prefix")
    seen_inputs: dict[Path, int] = {}
    for k, s in enumerate(stores):
        if s.prefix in seen_inputs:
            raise InputError(f"prefixes: {str(s.prefix)!r} given twice (positions {seen_inputs[s.prefix]} and {k})")
        seen_inputs[s.prefix] = k
    for key in ("n_bytes", "metadata", "max_header_bytes"):
        _same(stores, key)
    first = stores[0].sidecar
    with_header = first["with_header"]
    headers = sorted({h for s in stores for h in s.sidecar["headers"]}) if with_header else [""]
    classes = sorted({c for s in stores for c in s.sidecar["classes"]})
    h_lookup = {h: i for i, h in enumerate(headers)}
    c_lookup = {c: i for i, c in enumerate(classes)}
    paths: list[str] = []
    owner: dict[str, int] = {}
    parts_class, parts_size, parts_header = [], [], []
    for k, s in enumerate(stores):
        for p in s.paths:
            j = owner.setdefault(p, k)
            if j != k:
                raise InputError(f"prefixes: file {p!r} is in two stores: {str(stores[j].prefix)!r} and "
                                 f"{str(s.prefix)!r}; each file may be packed once")
        paths.extend(s.paths)
        hmap = np.array([h_lookup[h] for h in s.sidecar["headers"]], dtype=np.int64) if with_header \
            else np.zeros(1, dtype=np.int64)
        cmap = np.array([c_lookup[c] for c in s.sidecar["classes"]], dtype=np.int64)
        parts_class.append(cmap[s.doc_class])
        parts_size.append(s.doc_size)
        parts_header.append(hmap[s.doc_header])
    documents = len(paths)
    tokens = int(sum(int(s.lengths.sum()) for s in stores))
    vocab = stores[0].vocab
    dtype = store_dtype("megatron", vocab.size)
    sidecar = make_sidecar("megatron", dtype, vocab.n_bytes, first["metadata"], with_header,
                           first["max_header_bytes"], headers, classes, _merged_class_to_id(stores, classes),
                           documents, tokens)

    doc_class, doc_size, doc_header = (np.concatenate(parts_class), np.concatenate(parts_size),
                                       np.concatenate(parts_header))
    # corpus order (class name, then path): the merge of shards is byte for byte the single-machine pack
    order = np.lexsort((np.array(paths, dtype=object).astype(str), doc_class)) if order_by == "corpus" \
        else np.arange(documents)
    owner_of = np.repeat(np.arange(len(stores)), [len(s.paths) for s in stores])
    starts = np.concatenate([s.starts for s in stores])
    lengths = np.concatenate([s.lengths for s in stores])

    def write(tmp: Path) -> None:
        if order_by == "inputs":
            for s in stores:  # a damaged input must not be copied under new, valid chunk sums
                _check_all(s)
            merge([str(s.prefix) for s in stores], str(tmp), atomic=False)
        else:
            # local stores by plain reads of their .bin; a store at a URL by range requests of its tokens; the
            # chunks checked before they are read, so a damaged input is never copied under new, valid chunk sums
            readers = [s.tokens.for_one_pass() for s in stores]
            try:
                FORMATS["megatron"].write(tmp, _store_pieces([r.read for r in readers], owner_of[order],
                                                             starts[order], lengths[order], DEFAULT_CHUNK_TOKENS),
                                          dtype)
            finally:
                for r in readers:
                    r.close()
        sidecar["tokens_sha256"] = sha256_file(with_suffix(tmp, ".bin"))
        _write_sums(tmp, sidecar, sums_of_file(with_suffix(tmp, ".bin"), 0, tokens * dtype.itemsize))
        write_table(with_suffix(tmp, TABLE_SUFFIX), [paths[i] for i in order.tolist()], doc_class[order],
                    doc_size[order], doc_header[order])

    files = _write_store(final, "megatron", write, sidecar, tokens * dtype.itemsize + 64 * documents + (1 << 16))
    out = _summary(final, "megatron", dtype, files, documents, tokens,
                   int(sum(int(s.doc_size.sum()) for s in stores)), time.perf_counter() - t0)
    out["inputs"] = [str(s.prefix) for s in stores]
    return out

