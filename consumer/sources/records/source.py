"""Documents inside container files as a :class:`~consumer.sources.base.ByteSource`: :class:`RecordFiles`.

Its "files" are the documents (``paths`` like ``shard.jsonl#12`` or ``shard.tar/name``; ``sizes`` their byte
lengths; ``stamps`` their container's change stamp), so samples, fetch, pack, the loader and SQL work on them
unchanged. A document is a byte range of its container (a line, a tar member: read in place through the
containers' own source, with its version checks), the text of its JSON record's line (a plain JSONL container: the
line read in place, with the same checks, and decoded again), or a range of the container's decode cache (the
texts of a compressed JSONL container, Parquet values: read from the cache after checking the container is still
the version indexed). A container that changed
after indexing is never served: :class:`~consumer.errors.FileChangedError` names it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ...errors import FileChangedError, FormatError
from ...formats.mmidx import copy_ranges
from ...util.sets import distinct
from ..base import FEW_RANGES, ByteSource, Handoff, check_few_ranges, check_ranges
from ..paths import PathList
from .compressed import compression_of
from .jsonl_read import BadLine, LineTexts
from .options import RecordOptions

__all__ = ["RecordFiles"]

_MAGIC_HEAD = 1 << 20  # bytes of a document libmagic looks at
_GAP = 4096  # ranges of a container at most this far apart are read as one (the bytes between read and dropped)


def _ints(a: Any) -> np.ndarray:
    """``a`` as int32 when it is so (values that fit, narrowed by the build), else as int64."""
    got = np.asarray(a)
    return got if got.dtype == np.int32 else got.astype(np.int64, copy=False)


class RecordFiles(ByteSource):
    """Documents ``i`` = ``doc_length[i]`` bytes at ``doc_offset[i]`` of container ``doc_container[i]`` (of
    ``containers``, a source of the container files) when ``doc_inplace[i]``, else of that container's decode cache
    ``decoded[c]`` (a file path, or a uint8 array when kept in memory), or the text of its JSON record's line when
    ``from_lines[c]`` (decoded as ``options`` say, its offset 0). ``json_offset``/``json_length``: each JSON
    record's line in its container, or in its decode cache for a compressed one (jsonl), else None; ``record``:
    each document's line, row or member number. These integer arrays stay int32 when given so (values that fit: 4
    bytes a document), else int64; ``sizes`` and ``stamps`` are int64 as in every source (``stamps``: each
    document's container stamp, given when known, e.g. mapped from an index entry; else gathered here)."""

    kind = "documents inside container files"

    def __init__(self, containers: ByteSource, paths: Sequence[str], doc_container: np.ndarray,
                 doc_offset: np.ndarray, doc_length: np.ndarray, doc_inplace: np.ndarray,
                 decoded: Sequence[Any], json_offset: np.ndarray | None = None,
                 json_length: np.ndarray | None = None, record: np.ndarray | None = None,
                 from_lines: np.ndarray | None = None, options: RecordOptions | None = None,
                 stamps: np.ndarray | None = None) -> None:
        self.containers = containers
        self.paths = paths if isinstance(paths, PathList) else PathList.of(list(paths))
        self.doc_container = _ints(doc_container)
        self.doc_offset = _ints(doc_offset)
        self.sizes = np.asarray(doc_length, dtype=np.int64)
        self.doc_inplace = np.asarray(doc_inplace, dtype=bool)
        self.stamps = np.asarray(stamps, dtype=np.int64) if stamps is not None else \
            containers.stamps[self.doc_container] if self.doc_container.size else np.zeros(0, np.int64)
        self.decoded = list(decoded)
        self.json_offset = None if json_offset is None else _ints(json_offset)
        self.json_length = None if json_length is None else _ints(json_length)
        self.record = np.zeros(self.sizes.size, np.int32) if record is None else _ints(record)
        self.from_lines = np.zeros(len(containers), dtype=bool) if from_lines is None else \
            np.asarray(from_lines, dtype=bool)
        if self.from_lines.any() and (options is None or self.json_offset is None or self.json_length is None):
            raise ValueError("from_lines: documents decoded from their JSON lines need options and the lines' ranges")
        self.options = options
        self._maps: dict[int, np.ndarray] = {}
        self._texts: LineTexts | None = None
        self._in_cache: np.ndarray | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_maps"] = {}  # memory maps are reopened in each process
        state["_texts"] = None  # and the decoder made again
        return state

    def _decoded(self, c: int) -> np.ndarray:
        got = self._maps.get(c)
        if got is None:
            where = self.decoded[c]
            if isinstance(where, np.ndarray):
                got = where
            else:
                try:
                    got = np.memmap(where, dtype=np.uint8, mode="r") if where and os.path.getsize(where) else \
                        np.zeros(0, np.uint8)
                except OSError as e:
                    raise FileChangedError(f"the decode cache of {self.containers.paths[c]!r} ({where}) cannot be "
                                           f"read: {e.strerror}; build the dataset again") from None
            self._maps[c] = got
        return got

    def subset(self, ids: np.ndarray) -> RecordFiles:
        """The documents ``ids``, in that order (the containers are shared)."""
        ids = np.asarray(ids, dtype=np.int64)
        def pick(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[ids]

        return RecordFiles(self.containers, PathList.of(self.paths.take(ids)) if isinstance(self.paths, PathList)
                           else [self.paths[i] for i in ids.tolist()], self.doc_container[ids], self.doc_offset[ids],
                           self.sizes[ids], self.doc_inplace[ids], self.decoded, pick(self.json_offset),
                           pick(self.json_length), self.record[ids], self.from_lines, self.options,
                           stamps=self.stamps[ids])

    def with_paths(self, paths: Sequence[str]) -> RecordFiles:
        """The same documents under ``paths`` (equal strings)."""
        return RecordFiles(self.containers, paths, self.doc_container, self.doc_offset, self.sizes, self.doc_inplace,
                           self.decoded, self.json_offset, self.json_length, self.record, self.from_lines,
                           self.options, stamps=self.stamps)

    def read_ranges(self, ids: Any, offsets: Any, lengths: Any, out: np.ndarray, at: Any) -> None:
        """See :meth:`ByteSource.read_ranges`: ranges of in-place documents are read from their containers (the
        containers' version checks), JSON texts decoded from their lines (read with the same checks), the others
        from the decode caches after checking their containers."""
        ids, offsets, lengths, at = (np.asarray(x, dtype=np.int64) for x in (ids, offsets, lengths, at))
        if ids.ndim == 1 and ids.size <= FEW_RANGES and ids.shape == offsets.shape == lengths.shape == at.shape:
            check_few_ranges(len(self.paths), ids.tolist(), offsets.tolist(), lengths.tolist(), out, at.tolist(),
                             self.sizes)  # a few ranges (one document): the same checks with plain ints
        else:
            check_ranges(len(self.paths), ids, offsets, lengths, out, at, self.sizes)
        if not ids.size:
            return
        cont, inplace = self.doc_container[ids].astype(np.int64), self.doc_inplace[ids]
        start = self.doc_offset[ids] + offsets  # int64 (offsets is)
        if inplace.any():
            self._in_place(cont[inplace], start[inplace], lengths[inplace], out, at[inplace])
        if inplace.all():
            return
        lined = ~inplace & self.from_lines[cont]
        if lined.any():
            self._from_lines(ids[lined], start[lined], lengths[lined], out, at[lined])
        rest = ~inplace & ~lined
        if rest.any():
            self._from_caches(cont[rest], start[rest], lengths[rest], out, at[rest])

    def _in_place(self, cont: np.ndarray, start: np.ndarray, lengths: np.ndarray, out: np.ndarray,
                  at: np.ndarray) -> None:
        """Ranges of the containers, read in container and offset order (one open of a local container for all
        its ranges of the call), ranges at most :data:`_GAP` bytes apart read as one (a run of a container's
        records, as packing reads them, is one read) and copied out."""
        if cont.size <= 1:  # plain ints: a source checks a few ranges without numpy
            self.containers.read_ranges(cont.tolist(), start.tolist(), lengths.tolist(), out, at.tolist())
            return
        order = np.lexsort((start, cont))
        cont, start, lengths, at = cont[order], start[order], lengths[order], at[order]
        end = start + lengths
        new = np.ones(cont.size, dtype=bool)  # a range starting a span (ranges may overlap: a span ends at its max)
        new[1:] = (cont[1:] != cont[:-1]) | (start[1:] > end[:-1] + _GAP)
        if new.all():
            self.containers.read_ranges(cont, start, lengths, out, at)
            return
        first = np.flatnonzero(new)
        span_lo = start[first]
        span_hi = np.maximum.reduceat(end, first)
        span_at = np.zeros(first.size, dtype=np.int64)
        np.cumsum((span_hi - span_lo)[:-1], out=span_at[1:])
        buf = np.empty(int(span_hi[-1] - span_lo[-1] + span_at[-1]), dtype=np.uint8)
        self.containers.read_ranges(cont[first], span_lo, span_hi - span_lo, buf, span_at)
        span = np.cumsum(new) - 1
        copy_ranges(out, buf, start - span_lo[span] + span_at[span], lengths, at)

    def _from_lines(self, ids: np.ndarray, start: np.ndarray, lengths: np.ndarray, out: np.ndarray,
                    at: np.ndarray) -> None:
        """Ranges of documents that are the texts of their JSON lines: each document's line read once from its
        container (with its version checks) into one buffer and decoded (:class:`~.jsonl_read.LineTexts`). A text
        whose length is not the one indexed (a container rewritten with the same size and change stamp) is never
        served."""
        if self._texts is None:
            assert self.options is not None  # checked on construction when a container is from_lines
            self._texts = LineTexts(self.options)
        uniq, inv = (ids, np.zeros(1, dtype=np.int64)) if ids.size == 1 else np.unique(ids, return_inverse=True)
        assert self.json_offset is not None and self.json_length is not None  # checked on construction
        lens = self.json_length[uniq].astype(np.int64)  # the lines one after another, a free byte around each
        starts = np.zeros(uniq.size, dtype=np.int64)
        np.cumsum(lens[:-1] + 1, out=starts[1:])
        ends = starts + lens
        work = np.empty(int(ends[-1]) + 2, dtype=np.uint8)
        self._in_place(self.doc_container[uniq].astype(np.int64), self.json_offset[uniq].astype(np.int64), lens,
                       work, starts + 1)
        try:
            data, offset, length = self._texts.block(work, starts, ends)
        except BadLine as e:
            if not e.changed:
                raise FormatError(f"{self.paths[int(uniq[e.index])]!r}: its JSON record cannot be decoded: {e.why}"
                                  ) from None
            raise FileChangedError(f"{self.paths[int(uniq[e.index])]!r}: its JSON record no longer decodes "
                                   f"({e.why}); the container changed after indexing: build the dataset again"
                                   ) from None
        wrong = np.flatnonzero(length != self.sizes[uniq])
        if wrong.size:
            bad = int(uniq[wrong[0]])
            raise FileChangedError(f"{self.paths[bad]!r}: its JSON record's text is {int(length[wrong[0]])} bytes, "
                                   f"{int(self.sizes[bad])} when indexed; the container changed after indexing: "
                                   f"build the dataset again")
        copy_ranges(out, data, offset[inv] + start, lengths, at)

    def _from_caches(self, cont: np.ndarray, start: np.ndarray, lengths: np.ndarray, out: np.ndarray,
                     at: np.ndarray) -> None:
        """Ranges of the decode caches of containers ``cont`` into ``out``, after checking that each container is
        still the version indexed (a byte of it is read: an object's ETag is checked on a response)."""
        used = distinct(cont)
        one = np.minimum(self.containers.sizes[used], 1)
        self.containers.read_ranges(used, np.zeros(used.size, dtype=np.int64), one, np.empty(used.size, np.uint8),
                                    np.cumsum(one) - one)
        for c, lo, n, q in zip(cont.tolist(), start.tolist(), lengths.tolist(), at.tolist()):
            out[q:q + n] = self._decoded(c)[lo:lo + n]

    def json_in_cache(self) -> np.ndarray:
        """For each container, whether its JSON records' lines are in its decode cache (a compressed container,
        which has no byte ranges) rather than in the container itself."""
        if self._in_cache is None:  # once (a name test per container)
            paths = self.containers.paths
            self._in_cache = np.fromiter((compression_of(p) is not None for p in paths), dtype=bool,
                                         count=len(paths))
        return self._in_cache

    def record_lines(self, ids: np.ndarray) -> list[bytes]:
        """The JSON record (its line, without the ``\\n``) of each document ``ids`` (jsonl only), read from the
        containers (from their decode caches for compressed ones) with their version checks."""
        if self.json_offset is None or self.json_length is None:
            return [b""] * len(ids)
        ids = np.asarray(ids, dtype=np.int64)
        lens = self.json_length[ids].astype(np.int64)
        at = np.zeros(ids.size, dtype=np.int64)
        if ids.size > 1:
            np.cumsum(lens[:-1], out=at[1:])
        out = np.empty(int(lens.sum()), dtype=np.uint8)
        cont, start = self.doc_container[ids].astype(np.int64), self.json_offset[ids].astype(np.int64)
        cached = self.json_in_cache()[cont]
        if not cached.all():
            plain = ~cached
            self._in_place(cont[plain], start[plain], lens[plain], out, at[plain])
        if cached.any():
            self._from_caches(cont[cached], start[cached], lens[cached], out, at[cached])
        raw = out.tobytes()
        return [raw[a:a + n] for a, n in zip(at.tolist(), lens.tolist())]

    def document_bytes(self, i: int, limit: int | None = None) -> bytes:
        """The bytes of document ``i`` (the first ``limit`` of them)."""
        n = int(self.sizes[i]) if limit is None else min(int(self.sizes[i]), limit)
        out = np.empty(n, dtype=np.uint8)
        self.read_ranges([i], [0], [n], out, [0])
        return out.tobytes()

    def describe(self, paths: Sequence[str], *, kinds: Sequence[str], verbose: bool = False,
                 chunk: int = 256) -> Iterator[tuple[str | None, str | None]]:
        """libmagic on each document's bytes (its first MiB), by the document's path."""
        from ..magic import import_magic  # noqa: PLC0415  (libmagic loads when a document is described)

        magic = import_magic()
        where = {p: k for k, p in enumerate(self.paths)}
        desc, mime = magic.Magic(), magic.Magic(mime=True)
        for p in paths:
            data = self.document_bytes(where[p], _MAGIC_HEAD)
            yield (desc.from_buffer(data) if "description" in kinds else None,
                   mime.from_buffer(data) if "mime" in kinds else None)

    def close(self) -> None:
        """Close what the containers' source keeps open (local containers' descriptors; shared with subsets)."""
        self.containers.close()

    def handoff(self) -> Handoff | None:
        """Records are rebuilt from their pickled arrays (the recipe), never reopened from paths alone."""
        return {"kind": "records"}

