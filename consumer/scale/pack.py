"""A pack on an :class:`~consumer.scale.engines.Engine`: workers read the files and write the tokens in parts,
the client streams the parts, in the store's order (the order of the documents it is given: :func:`pack_dataset` puts
a ``style="packed"`` dataset's in the store order of its rows, :func:`~consumer.packed.write.pack_order`), through
the local pack's writer and commit.

1. The documents are cut into contiguous runs (:func:`~consumer.scale.engines.plan_tasks`, by files and
   bytes). Task ``k`` reads its run's files with the raw reader (:func:`~consumer.packed.write.token_pieces`,
   the local pack's source) and writes their tokens, in the store's dtype, to ``part-k`` in a hidden folder
   next to the prefix: first under a temporary name, then renamed once, so a task rerun after its worker
   died (or run twice by the scheduler) leaves one whole part, never a partial one.
2. The client reads the parts in order as they complete and feeds their tokens, document by document, to
   :func:`~consumer.packed.write.pack` (``pieces=``): the ``.bin/.idx`` or ``.pbin``, the file table, the
   sidecar and its checksum are written by the same code as a local pack, from the same token stream,
   hence byte-identical; the same atomic commit applies (hidden temporary files, renamed at the end).
3. The parts folder is removed at the end, whether the pack succeeded or not.

The parts folder must be on a file system every worker and the client mount (the same one as the
prefix). The client's work is a sequential copy of the tokens (disk speed); reading the many small
files, the expensive part, is spread over the workers.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError, InputError
from ..packed.layout import FORMATS, as_prefix, store_dtype
from ..packed.write import DEFAULT_CHUNK_TOKENS, chunk_segments, pack, pack_order, token_pieces
from ..spec import Spec
from ..tokens.documents import DocumentTable
from ..tokens.index import SampleIndex
from ..util.fileio import fsync_dir
from ..util.progress import progress_bar
from ..util.validate import check_choice, check_int
from .engines import COSTS, Engine, plan_tasks, resolve_engine

__all__ = ["pack_dataset", "pack_on", "pack_part_task"]


def pack_part_task(documents: DocumentTable, dtype: str, chunk_tokens: int, path: str) -> int:
    """Write every token of ``documents`` (in ``dtype``) to ``path``: under a temporary name, then renamed once.
    Returns the number of tokens."""
    tmp = f"{path}.{secrets.token_hex(6)}.tmp"
    count = 0
    try:
        with open(tmp, "wb") as f:
            for piece, _, _ in token_pieces(documents, np.dtype(dtype), chunk_tokens,
                                            progress_bar(0, False, ""), hashlib.sha256()):
                f.write(piece.data)
                count += piece.size
        os.replace(tmp, path)  # no fsync: a part lives only while its pack runs (the final store is fsynced)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count


def _part_pieces(path: str, lengths: np.ndarray, dtype: np.dtype, chunk_tokens: int, digest: Any, bar: Any
                 ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The documents of one part file as ``(tokens, lengths, first)`` chunks (see
    :func:`~consumer.packed.write.token_pieces`): document ``k`` is the next ``lengths[k]`` tokens; one read of
    ``chunk_tokens`` tokens at a time. FormatError when the file is not exactly ``sum(lengths)`` tokens."""
    width = dtype.itemsize
    expected = int(lengths.sum())
    if os.stat(path).st_size != expected * width:
        raise FormatError(f"{path}: a pack part holds {os.stat(path).st_size} bytes, expected {expected * width}")
    with open(path, "rb") as f:
        for _, _, n, first in chunk_segments(np.asarray(lengths, dtype=np.int64), chunk_tokens):
            want = int(n.sum())
            buf = np.frombuffer(f.read(want * width), dtype=dtype)
            if buf.size != want:
                raise FormatError(f"{path}: a pack part ended early (it changed while being read)")
            digest.update(buf.data)
            bar.update(buf.nbytes)
            yield buf, n, first


def _refuse_store(engine: Engine, documents: DocumentTable) -> None:
    raise InputError(f"engine: a pack on an engine ({engine.name}) reads the files' bytes on the workers; this "
                     f"dataset's files are {documents.source.kind}: pack it without engine=")


def pack_on(engine: Engine, documents: DocumentTable, classes: list[str], spec: Spec, prefix: Any,
            format: str = "megatron", verbose: bool = False, *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> dict:
    """:func:`~consumer.packed.write.pack` with the files read on ``engine``'s workers (see the module docstring):
    the same store, byte for byte, and the same summary (``documents`` written in the order given)."""
    check_choice("format", format, sorted(FORMATS))
    chunk_tokens = check_int("chunk_tokens", chunk_tokens, 1)
    documents.source.choose(files=lambda source: source, store=lambda _: _refuse_store(engine, documents))
    if len(documents) == 0:
        raise InputError("documents: the dataset has no documents to pack")
    final = as_prefix(prefix, create=True)
    dtype = store_dtype(format, documents.vocab.size)
    doc_len = documents.doc_len
    bounds = plan_tasks(len(documents), engine.slots, COSTS["pack"], documents.doc_size, min_seconds=0.1)
    parts = final.parent / f".{final.name}.{secrets.token_hex(6)}.parts"
    os.mkdir(parts)
    fsync_dir(final.parent)
    keep = np.arange(len(classes), dtype=np.int64)  # classes unchanged in the parts

    def pieces(dtype_: np.dtype, chunk: int, bar: Any, digest: Any,
               ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        tasks = [(documents.subset(np.arange(a, b, dtype=np.int64), keep), dtype.str, chunk, str(parts / f"part-{k}"))
                 for k, (a, b) in enumerate(bounds)]
        for (a, b), (k, count) in zip(bounds, enumerate(engine.map(pack_part_task, tasks, label="pack"))):
            if count != int(doc_len[a:b].sum()):
                raise FormatError(f"pack part {k} (documents {a}..{b - 1}) holds {count} tokens, expected "
                                  f"{int(doc_len[a:b].sum())}")
            yield from _part_pieces(str(parts / f"part-{k}"), doc_len[a:b], dtype_, chunk, digest, bar)
            os.unlink(parts / f"part-{k}")  # streamed: the disk holds the parts not yet copied only

    try:
        return pack(documents, classes, spec, final, format, verbose, chunk_tokens=chunk_tokens, pieces=pieces)
    finally:
        shutil.rmtree(parts, ignore_errors=True)


def pack_dataset(documents: DocumentTable, classes: list[str], spec: Spec, prefix: Any, format: str = "megatron",
                 verbose: bool = False, engine: Any = None, *, index: SampleIndex, **options: Any) -> dict:
    """``Consumer.pack``: the documents in the order the store holds them (:func:`~consumer.packed.write.pack_order`
    of the dataset's ``index``: a ``style="packed"`` dataset's in the store order of its rows, reordered once here),
    then :func:`~consumer.packed.write.pack` here, or :func:`pack_on` the cluster of ``engine`` (a
    ``dask.distributed.Client`` or ``"dask"``; None: here)."""
    order = pack_order(documents, spec, index)
    if order is not None:
        documents = documents.subset(order, np.arange(len(classes), dtype=np.int64))
    on = resolve_engine(engine)
    if on is not None:
        return pack_on(on, documents, classes, spec, prefix, format, verbose, **options)
    return pack(documents, classes, spec, prefix, format, verbose, **options)
