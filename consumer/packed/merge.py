"""Merging packed stores into one: :func:`merge_packed` (``consumer merge``).

Inputs are validated whole first; documents are copied in corpus order by plain reads of each input's ``.bin``
(or range requests of a store at a URL), each read after checking the chunk sums it lies in, or concatenated as
they are (``order_by="inputs"``, a byte copy after checking every chunk). The result is committed like a pack
(:mod:`consumer.packed.commit`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError, short_repr
from ..formats.chunksums import sums_of_file
from ..formats.mmidx import merge
from ..util.fileio import sha256_file
from ..util.validate import check_choice
from .commit import _summary, _write_store, _write_sums
from .layout import FORMATS, TABLE_SUFFIX, as_prefix, make_sidecar, store_dtype, with_suffix
from .merge_table import corpus_order, merged_table, store_pieces
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
    paths, doc_class, doc_size, doc_header = merged_table(stores, headers, classes, with_header)
    documents = len(paths)
    tokens = int(sum(int(s.lengths.sum()) for s in stores))
    vocab = stores[0].vocab
    dtype = store_dtype("megatron", vocab.size)
    sidecar = make_sidecar("megatron", dtype, vocab.n_bytes, first["metadata"], with_header,
                           first["max_header_bytes"], headers, classes, _merged_class_to_id(stores, classes),
                           documents, tokens)

    # corpus order: the merge of shards is byte for byte the single-machine pack
    order = corpus_order(stores, paths, doc_class) if order_by == "corpus" else np.arange(documents)
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
                FORMATS["megatron"].write(tmp, store_pieces([r.read for r in readers], owner_of[order],
                                                            starts[order], lengths[order], DEFAULT_CHUNK_TOKENS,
                                                            dtype), dtype)
            finally:
                for r in readers:
                    r.close()
        sidecar["tokens_sha256"] = sha256_file(with_suffix(tmp, ".bin"))
        _write_sums(tmp, sidecar, sums_of_file(with_suffix(tmp, ".bin"), 0, tokens * dtype.itemsize))
        write_table(with_suffix(tmp, TABLE_SUFFIX), paths.gather(order), doc_class[order], doc_size[order],
                    doc_header[order])

    files = _write_store(final, "megatron", write, sidecar, tokens * dtype.itemsize + 64 * documents + (1 << 16))
    out = _summary(final, "megatron", dtype, files, documents, tokens,
                   int(sum(int(s.doc_size.sum()) for s in stores)), time.perf_counter() - t0)
    out["inputs"] = [str(s.prefix) for s in stores]
    return out

