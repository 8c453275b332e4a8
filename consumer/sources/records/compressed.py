"""Compressed containers (``.gz``, ``.zst``, ``.bz2``, ``.xz`` for lines, JSON records and tar): decompressed as a
stream while indexing (a local file, or an object behind a URL as its one pass of range requests arrives), in
pieces of :data:`~consumer.sources.records.container.SCAN_CHUNK` bytes (zstd: what 4 KiB of input give, at most
~170 MB even for a pathological run-length stream), so memory is bounded by one piece and the decompressor's
window. A compressed file cannot be read by range, so its documents are served from
the container's decode cache (the decompressed stream for lines and tar, the decoded texts for JSON records).

Every member of a concatenated gzip file, every stream of a multi-stream bzip2 or xz file and every frame of a zstd
file is read (zstd's skippable frames are skipped; windows up to :data:`MAX_ZSTD_WINDOW`, e.g. files written with
``--long=31``). A stream that expands past :func:`expansion_limit` of its compressed size is refused as a
decompression bomb (FormatError naming the file), and so is a damaged or truncated stream.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from ...errors import ConsumerError, FormatError, MissingDependencyError
from .container import ChunkStream

__all__ = ["COMPRESSED_SUFFIXES", "MAX_EXPANSION", "MIN_EXPANSION_BYTES", "MAX_ZSTD_WINDOW", "compression_of",
           "expansion_limit", "decompressed_chunks"]

COMPRESSED_SUFFIXES = (".gz", ".zst", ".bz2", ".xz")
MAX_EXPANSION = 200  # a stream may expand to at most 200x its compressed size ...
MIN_EXPANSION_BYTES = 1 << 26  # ... or 64 MiB, whichever is more; past that it is refused as a bomb
MAX_ZSTD_WINDOW = 1 << 31  # the largest zstd window accepted (2 GiB: zstd --long=31)


def compression_of(path: str) -> str | None:
    """The compression suffix of ``path`` (``".gz"``, ...), or None for a plain file."""
    low = path.lower()
    return next((s for s in COMPRESSED_SUFFIXES if low.endswith(s)), None)


def expansion_limit(compressed_size: int) -> int:
    """The most bytes a container of ``compressed_size`` compressed bytes may decompress to."""
    from . import compressed as limits  # noqa: PLC0415  (read at call time: tests lower the limits)

    return max(limits.MIN_EXPANSION_BYTES, limits.MAX_EXPANSION * int(compressed_size))


_ZSTD_INPUT = 1 << 12  # compressed bytes handed to zstd at a time (bounds one call's output, even for an RLE bomb)


class _Truncated(Exception):
    """A compressed stream ended inside a frame."""


def _zstd_pieces(raw: BinaryIO | ChunkStream) -> Iterator[bytes]:
    """Every frame of a zstd stream (skippable ones give nothing), a few KiB of input at a time; _Truncated when the
    file ends inside a frame (zstandard's stream reader would end quietly there)."""
    try:
        import zstandard  # noqa: PLC0415  (the one home of this dependency)
    except ImportError as e:
        raise MissingDependencyError(f"a .zst container needs zstandard (pip install zstandard): {e}") from e
    dctx = zstandard.ZstdDecompressor(max_window_size=MAX_ZSTD_WINDOW)
    obj, started = dctx.decompressobj(), False
    while data := raw.read(_ZSTD_INPUT):
        while data:
            started = True
            out = obj.decompress(data)
            if out:
                yield out
            if obj.eof:  # a frame ended: the rest of the input starts the next one
                data, obj, started = obj.unused_data, dctx.decompressobj(), False
            else:
                data = b""
    if started:
        raise _Truncated("the file ends inside a zstd frame")


def _pieces(kind: str, raw: Any, chunk: int) -> Iterator[bytes]:
    """The decompressed stream of ``raw`` in pieces (at most ``chunk`` bytes but for zstd's)."""
    if kind == ".zst":
        yield from _zstd_pieces(raw)
        return
    opener: Any = {".gz": lambda: gzip.GzipFile(fileobj=raw, mode="rb"), ".bz2": lambda: bz2.BZ2File(raw, mode="rb"),
                   ".xz": lambda: lzma.LZMAFile(raw, mode="rb")}[kind]
    with opener() as stream:
        while piece := stream.read(chunk):
            yield piece


def decompressed_chunks(path: str, local: str | BinaryIO | ChunkStream, compressed_size: int,
                        chunk: int) -> Iterator[bytes]:
    """The decompressed bytes of the container ``local`` (a file path, or a binary stream such as an object's
    range reads; named ``path`` in errors) in pieces of at most ``chunk`` bytes (zstd: what a few KiB of input
    give), refusing a stream past :func:`expansion_limit` of ``compressed_size``."""
    kind = compression_of(path) or ""
    limit = expansion_limit(compressed_size)
    total = 0
    with open(local, "rb") if isinstance(local, str) else contextlib.nullcontext(local) as raw:
        pieces = _pieces(kind, raw, chunk)
        while True:
            try:
                piece = next(pieces, None)
            except ConsumerError:  # the read under the stream failed (a changed object, the network): not damage
                raise
            except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError, _Truncated) as e:
                raise FormatError(f"{path!r}: damaged {kind} stream after {total} decompressed bytes: {e}") from None
            except Exception as e:  # noqa: BLE001  (zstandard.ZstdError derives from Exception only)
                if type(e).__name__ != "ZstdError":
                    raise
                raise FormatError(f"{path!r}: damaged {kind} stream after {total} decompressed bytes: {e}") from None
            if piece is None:
                return
            total += len(piece)
            if total > limit:
                raise FormatError(f"{path!r}: decompresses to more than {limit} bytes (the limit for "
                                  f"{compressed_size} compressed bytes): refused as a decompression bomb")
            yield piece
