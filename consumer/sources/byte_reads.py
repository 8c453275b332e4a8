"""Checked reads for the byte predicates of SQL (``head``, ``tail``, ``bytes_at``, ``contains``, ...).

Three functions over a dataset's :class:`~consumer.sources.base.ByteSource` (its ``source``), the one seam between
SQL and the bytes: :func:`read_span` returns up to ``n`` bytes of file ``i`` from ``offset``; :func:`iter_file`
streams a whole file in chunks of bounded size; :func:`check_file` proves a file is still the version listed (for
a stream that stopped early). Every read is the source's :meth:`~consumer.sources.base.ByteSource.read_ranges`,
which checks the file is the version the dataset indexed (for local files: a regular file of the recorded size
and change stamp ``max(mtime_ns, ctime_ns)``, and device/inode when known) before reading, and again after the
last read of a file here: anything else raises :class:`~consumer.errors.FileChangedError` naming the file. A
changed file is never served.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor

import numpy as np

from .base import CHUNK_BYTES, ByteSource

__all__ = ["STREAM_CHUNK", "check_file", "iter_file", "read_span", "read_spans"]

STREAM_CHUNK = CHUNK_BYTES  # bytes per read of iter_file

_ONE = np.zeros(1, dtype=np.int64)


def read_span(source: ByteSource, i: int, offset: int, n: int) -> bytes:
    """Bytes ``[offset, offset + n)`` of file ``i`` (fewer at its end; none past it), checked to be the indexed
    version before and after the read."""
    size = int(source.sizes[i])
    offset = min(max(0, offset), size)
    n = max(0, min(n, size - offset))
    out = np.empty(max(n, 1), dtype=np.uint8)
    source.read_ranges(np.array([i], dtype=np.int64), np.array([offset], dtype=np.int64),
                       np.array([n], dtype=np.int64), out, _ONE)
    return out[:n].tobytes()


def read_spans(source: ByteSource, ids: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
               parts: int = 1, pool: Executor | None = None) -> list[bytes]:
    """``read_span`` of many files at once: the ranges clamped to each file, read into one buffer by
    ``source.read_ranges`` (checked before and after), in ``parts`` slices handed to ``pool.map`` when given."""
    ids = np.asarray(ids, dtype=np.int64)
    sizes = source.sizes[ids]
    offsets = np.minimum(np.maximum(np.asarray(offsets, dtype=np.int64), 0), sizes)
    lengths = np.maximum(np.minimum(np.asarray(lengths, dtype=np.int64), sizes - offsets), 0)
    at = np.zeros(ids.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=at[1:])
    out = np.empty(max(int(lengths.sum()), 1), dtype=np.uint8)
    cuts = np.linspace(0, ids.size, max(1, min(parts, ids.size)) + 1).astype(np.int64)

    def read(k: int) -> None:
        a, b = int(cuts[k]), int(cuts[k + 1])
        source.read_ranges(ids[a:b], offsets[a:b], lengths[a:b], out, at[a:b])

    if pool is not None and cuts.size > 2:
        list(pool.map(read, range(cuts.size - 1)))
    else:
        for k in range(cuts.size - 1):
            read(k)
    ends = (at + lengths).tolist()
    return [out[a:e].tobytes() for a, e in zip(at.tolist(), ends)]


def check_file(source: ByteSource, i: int) -> None:
    """FileChangedError unless file ``i`` is still the indexed version (a read of no byte, checked)."""
    read_span(source, i, 0, 0)


def iter_file(source: ByteSource, i: int, chunk: int = STREAM_CHUNK) -> Iterator[memoryview]:
    """The whole of file ``i`` in pieces of at most ``chunk`` bytes (one buffer reused: consume each piece before
    asking for the next), checked to be the indexed version (:meth:`ByteSource.iter_chunks`)."""
    yield from source.iter_chunks(i, chunk)
