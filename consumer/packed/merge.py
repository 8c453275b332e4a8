"""Merging packed stores into one: :func:`merge_packed` (``consumer merge``).

Inputs are validated whole first; documents are copied in corpus order by plain reads of each input's ``.bin``
(or range requests of a store at a URL), each read after checking the chunk sums it lies in, or concatenated as
they are (``order_by="inputs"``, a byte copy after checking every chunk). The result is committed like a pack
(:mod:`consumer.packed.commit`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError, short_repr
from ..formats.chunksums import sums_of_file
from ..formats.mmidx import merge
from ..util.fileio import sha256_file
from ..util.validate import check_choice
from .commit import _summary, _write_store, _write_sums
from .layout import FORMATS, TABLE_SUFFIX, as_prefix, make_sidecar, store_dtype, with_suffix
from .open import Store, load_store
from .table import write_table
from .write import DEFAULT_CHUNK_TOKENS

__all__ = ["merge_packed"]


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


def _inputs(prefixes: Sequence, out_prefix) -> tuple[Path, list[Store]]:
    """The output prefix and the input stores, each loaded (validated whole): megatron stores, none given twice,
    none at the output prefix."""
    if isinstance(prefixes, (str, bytes, os.PathLike)) or not isinstance(prefixes, Sequence) or not prefixes:
        raise InputError(f"prefixes must be a non-empty list of store prefixes, got {short_repr(prefixes)}")
    final = as_prefix(out_prefix, "out_prefix", create=True)
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
    return final, stores


def _file_table(stores: list[Store], headers: list[str], classes: list[str], with_header: bool
                ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The merged file table in input order: paths, class, size and header per document, classes and headers
    numbered in the merged lists; a path in two stores is an InputError naming it."""
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
    return paths, np.concatenate(parts_class), np.concatenate(parts_size), np.concatenate(parts_header)


_RECORD_SUFFIX = {"lines": "#", "jsonl": "#", "parquet": "#"}  # a record's path: container#record
_ARCHIVE = re.compile(r"^(.*?\.(?:tar|tgz|tar\.gz|tar\.bz2|tar\.xz|tar\.zst))/", re.IGNORECASE)  # archive/member


def _container(path: str, kind: str | None) -> str:
    """The container a document of a ``kind`` store lies in (the path itself for a whole file)."""
    if kind in _RECORD_SUFFIX:
        return path.rsplit("#", 1)[0]
    if kind == "tar":
        found = _ARCHIVE.match(path)
        return found.group(1) if found else path
    return path


def _corpus_order(stores: list[Store], paths: list[str], doc_class: np.ndarray) -> np.ndarray:
    """The permutation into corpus order of the inputs' documents (in input order): by class, then by path for
    whole files; documents inside containers by class, then container path, each container's documents in the
    order its store holds them (record order: a string sort would put ``#10`` before ``#2``, and a tar's members
    are in archive order)."""
    kinds = [(s.sidecar.get("spec") or {}).get("documents") for s in stores]
    if all(k in (None, "files") for k in kinds):
        return np.lexsort((np.array(paths, dtype=object).astype(str), doc_class))
    owner = np.repeat(np.arange(len(stores)), [len(s.paths) for s in stores])
    containers = np.array([_container(p, kinds[k]) for p, k in zip(paths, owner.tolist())], dtype=object)
    return np.lexsort((np.arange(len(paths)), containers.astype(str), doc_class))


def merge_packed(prefixes: Sequence, out_prefix, order_by: str = "corpus") -> dict:
    """Combine Megatron packed stores (e.g. made on different machines) into one store at ``out_prefix``.

    All inputs are fully validated first and must share ``n_bytes``, the metadata mode and the
    header cap (InputError naming both values otherwise). Header texts and classes are unioned and
    re-numbered; a path present in two stores is an InputError naming it. ``order_by="corpus"`` (default)
    writes the documents in corpus order (class name, then path; documents inside containers by container path,
    then in their store's order, which is record order), so merging the stores packed by
    ``consumer pack --shard i/N`` gives byte for byte the ``.bin/.idx`` and file table of one pack of
    the whole corpus; ``order_by="inputs"`` concatenates the inputs as they are with
    :func:`consumer.formats.mmidx.merge` (a byte copy). ``.pbin`` stores are refused (InputError):
    convert them by opening and re-packing. Returns a summary like
    :func:`pack` (plus ``inputs``).
    """
    check_choice("order_by", order_by, ["corpus", "inputs"])
    t0 = time.perf_counter()
    final, stores = _inputs(prefixes, out_prefix)
    for key in ("n_bytes", "metadata", "max_header_bytes"):
        _same(stores, key)
    first = stores[0].sidecar
    with_header = first["with_header"]
    headers = sorted({h for s in stores for h in s.sidecar["headers"]}) if with_header else [""]
    classes = sorted({c for s in stores for c in s.sidecar["classes"]})
    paths, doc_class, doc_size, doc_header = _file_table(stores, headers, classes, with_header)
    documents = len(paths)
    tokens = int(sum(int(s.lengths.sum()) for s in stores))
    vocab = stores[0].vocab
    dtype = store_dtype("megatron", vocab.size)
    sidecar = make_sidecar("megatron", dtype, vocab.n_bytes, first["metadata"], with_header,
                           first["max_header_bytes"], headers, classes, _merged_class_to_id(stores, classes),
                           documents, tokens)

    # corpus order: the merge of shards is byte for byte the single-machine pack
    order = _corpus_order(stores, paths, doc_class) if order_by == "corpus" else np.arange(documents)
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

