"""Containers behind URLs (objects of an :class:`~consumer.sources.objects.ObjectFiles` source) as the scanners see
them: :func:`object_container`.

- ``jsonl``, ``lines``, ``tar``: the object streamed once, in range requests of
  :data:`~consumer.sources.records.container.SCAN_CHUNK` bytes, each response checked against the ETag and size
  listed; documents are read later by range requests with the same checks.
- the same inside ``.gz``/``.zst``/``.bz2``/``.xz``: that one stream is decompressed while it arrives (with the bomb
  limit of local files, on the object's listed size) and the documents go to the decode cache.
- ``parquet``: a :class:`RangeFile` for pyarrow, which reads the footer (its last 64 KiB, and the metadata when it
  is longer) and then one row group at a time, only the column chunks named, adjacent chunks coalesced into one
  request (``pre_buffer``): memory is bounded by one row group of those columns.

Every range response of every kind carries the listed ETag (``If-Match``) and is checked, so an object rewritten
during the scan raises :class:`~consumer.errors.FileChangedError`; ``check()`` compares the ETag and size of a HEAD.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...errors import FileChangedError, InputError
from ..objects import ObjectFiles
from ..urls import normalise_etag
from .compressed import compression_of, decompressed_chunks
from .container import SCAN_CHUNK, ChunkStream, Container

__all__ = ["RangeFile", "object_container"]


class RangeFile(io.RawIOBase):
    """Object ``i`` of ``source`` as a read-only, seekable binary file: each ``read`` is one range request of
    exactly the bytes asked for (none past the end), checked against the ETag and size listed."""

    def __init__(self, source: ObjectFiles, i: int) -> None:
        super().__init__()
        self._source, self._ids = source, np.array([i], dtype=np.int64)
        self._size, self._pos = int(source.sizes[i]), 0

    def readable(self) -> bool:
        """Always (read-only)."""
        return True

    def seekable(self) -> bool:
        """Always: a seek is free (no request until the next read)."""
        return True

    def tell(self) -> int:
        """The position of the next read."""
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Move to ``offset`` from the start, the position or the end (``whence``); returns the new position."""
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}.get(whence)
        if base is None or base + offset < 0:
            raise InputError(f"seek: whence must be 0, 1 or 2 and the position >= 0, got offset={offset}, "
                             f"whence={whence}")
        self._pos = base + int(offset)
        return self._pos

    def read_buffer(self, n: int) -> memoryview:
        """Up to ``n`` bytes from the position in a new buffer (what pyarrow asks for: no copy into ``bytes``)."""
        out = np.empty(max(0, min(int(n), self._size - self._pos)), dtype=np.uint8)
        got = self.readinto(out)
        return out.data[:got]

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` from the position (fewer bytes at the end); the number of bytes read."""
        view = memoryview(buffer).cast("B")
        n = max(0, min(len(view), self._size - self._pos))
        if n:
            out = np.frombuffer(view, dtype=np.uint8, count=n)
            self._source.read_ranges(self._ids, np.array([self._pos], dtype=np.int64),
                                     np.array([n], dtype=np.int64), out, np.zeros(1, dtype=np.int64))
            self._pos += n
        return n


def _decompressed(source: ObjectFiles, i: int) -> Iterator[bytes]:
    """The decompressed stream of object ``i``, read once in checked range requests."""
    path = source.paths[i]
    yield from decompressed_chunks(path, ChunkStream(source.iter_chunks(i, SCAN_CHUNK)), int(source.sizes[i]),
                                   SCAN_CHUNK)


def object_container(source: ObjectFiles, i: int, kind: str) -> Container:
    """Object ``i`` of ``source`` as a container of ``kind`` (see the module docstring)."""
    path, size, etag = source.paths[i], int(source.sizes[i]), source.etags[i]

    def check() -> None:
        got_etag, got_size = source.reader.stat([path])[0]
        if got_size != size or (etag is not None and got_etag is not None and normalise_etag(got_etag) != etag):
            raise FileChangedError(f"{path!r} changed since it was listed (ETag {etag!r}, {size} bytes; now "
                                   f"{got_etag!r}, {got_size} bytes); build the dataset again")

    compression = compression_of(path)
    if kind == "parquet":
        if compression is not None:
            raise InputError(f"fps: {path!r} is a compressed file; Parquet compresses its pages itself (give the "
                             ".parquet file)")
        return Container(path=path, size=size, chunks=lambda: source.iter_chunks(i, SCAN_CHUNK), check=check,
                         ranged=lambda: RangeFile(source, i))
    if compression is not None:
        return Container(path=path, size=size, chunks=lambda: _decompressed(source, i), check=check, compressed=True)
    return Container(path=path, size=size, chunks=lambda: source.iter_chunks(i, SCAN_CHUNK), check=check)
