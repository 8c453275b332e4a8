"""One container file as the scanners see it: :class:`Container` (its path, size, version-checked chunks and a
version check), and :func:`split_lines` (line boundaries of a byte stream by a numpy scan for 0x0A, no Python loop
per line)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import FormatError
from ...util.buffers import Scratch, byte_buffer

__all__ = ["Container", "ChunkStream", "SCAN_CHUNK", "StaleRawIndex", "append_piece", "indexed_lines", "line_spans"]

SCAN_CHUNK = 1 << 24  # bytes read (and scanned for newlines) at a time while indexing


@dataclass(frozen=True)
class Container:
    """``path`` (as the dataset names it), ``size`` (bytes, as listed), ``chunks()`` (the bytes in version-checked
    pieces), ``check()`` (FileChangedError unless still the version listed), ``local`` (a path to open directly
    for Parquet and tar headers, or None), ``compressed`` (``chunks()`` gives the decompressed stream, which has no
    byte ranges in the file: documents go to the decode cache), ``lines`` (an ``[n, 2]`` array of the
    ``(offset, length)`` of its lines from a raw index beside it, used instead of the newline scan, or None),
    ``ranged`` (for an object: a new seekable file reading it by checked range requests, which Parquet's footer
    and row groups are read through; else None), ``scratch`` (the scanning thread's reused buffers; by default
    the container's own)."""

    path: str
    size: int
    chunks: Callable[[], Iterator[Any]]
    check: Callable[[], None]
    local: str | None = None
    compressed: bool = False
    lines: np.ndarray | None = None
    ranged: Callable[[], Any] | None = None
    scratch: Scratch = field(default_factory=Scratch)

    def buffer(self, name: str, n: int) -> np.ndarray:
        """A uint8 scratch array of ``n`` bytes for this scan, kept in ``scratch`` (grown when a piece needs more)."""
        return self.scratch.get(name, n)


class StaleRawIndex(FormatError):
    """A raw index beside a container that does not match it (found while reading the container)."""


def append_piece(work: np.ndarray, n: int, piece: bytes | memoryview) -> np.ndarray:
    """``piece`` copied to ``work[1 + n:]`` (``work[1:1 + n]`` holds the bytes carried so far; one free byte stays
    on each side), ``work`` doubled first when it is too small; returns the buffer now holding them."""
    m = len(piece)
    if n + m + 2 > work.size:
        grown = byte_buffer(max(2 * work.size, n + m + 2))
        grown[1:1 + n] = work[1:1 + n]
        work = grown
    work[1 + n:1 + n + m] = np.frombuffer(piece, dtype=np.uint8)
    return work


def indexed_lines(container: Container) -> Iterator[tuple[np.ndarray, int, np.ndarray, np.ndarray]]:
    """The lines ``container.lines`` names, a chunk at a time, in the layout of the JSONL scanner: ``(work, base,
    starts, ends)`` where line ``k`` is ``work[1 + starts[k]:1 + ends[k]]`` and starts at byte ``base + starts[k]``.
    Each line must end at a ``\n`` (or at the end of the file): else :class:`StaleRawIndex`. Bytes outside every
    line (lines the index left out) are passed over."""
    entries = container.lines if container.lines is not None else np.zeros((0, 2), np.int64)
    starts_all = entries[:, 0]
    ends_all = entries[:, 0] + entries[:, 1]
    work = byte_buffer(SCAN_CHUNK + 2)
    n, base, j = 0, 0, 0  # work[1:1 + n] holds the container's bytes from base on; j: the next line
    for piece in container.chunks():
        m = len(piece)
        work = append_piece(work, n, piece)
        n += m
        done = j + int(np.searchsorted(ends_all[j:], base + n, side="left"))  # lines whose \n is held
        if done > j:
            starts, ends = starts_all[j:done] - base, ends_all[j:done] - base
            if not bool(np.all(work[1 + ends] == 10)):
                raise StaleRawIndex(f"{container.path!r}: a line of its raw index does not end at a newline")
            yield work, base, starts, ends
            cut = int(ends[-1]) + 1
            work[1:1 + n - cut] = work[1 + cut:1 + n].copy()
            base, n, j = base + cut, n - cut, done
    if j < len(entries) and int(ends_all[j]) == base + n and j == len(entries) - 1:  # a last line without \n
        yield work, base, starts_all[j:] - base, ends_all[j:] - base
        j += 1
    if j < len(entries):
        raise StaleRawIndex(f"{container.path!r}: its raw index names lines past the end of the file")


def line_spans(container: Container) -> Iterator[tuple[memoryview, int, np.ndarray, np.ndarray]]:
    """Complete lines of ``container`` a chunk at a time: ``(buffer, base, starts, ends)``, where line ``k`` is
    ``buffer[starts[k] - base:ends[k] - base]`` (excluding the ``\\n``; a final line without one included) and
    ``starts``/``ends`` are byte offsets in the container. Only 0x0A ends a line (never U+2028, NEL or a lone
    CR). A line longer than one chunk is carried over whole (its bytes are held until it ends)."""
    carry = b""
    base = 0  # container offset of carry[0]
    for piece in container.chunks():
        buf = carry + bytes(piece) if carry else bytes(piece)
        arr = np.frombuffer(buf, dtype=np.uint8)
        nl = np.flatnonzero(arr == 10)
        if nl.size:
            starts = np.empty(nl.size, dtype=np.int64)
            starts[0] = 0
            starts[1:] = nl[:-1] + 1
            yield memoryview(buf), base, starts + base, nl.astype(np.int64) + base
            cut = int(nl[-1]) + 1
            carry = buf[cut:]
            base += cut
        else:
            carry = buf
    if carry:
        yield memoryview(carry), base, np.array([base], dtype=np.int64), np.array([base + len(carry)], np.int64)


class ChunkStream:
    """A read-only, forward-only file object over ``pieces`` (e.g. ``container.chunks()``: what :mod:`tarfile`'s
    stream mode and the decompressors read): the bytes in one pass, never seeking back. ``keep``: how many bytes
    before the current piece stay held for :meth:`held` (0: none)."""

    def __init__(self, pieces: Iterator[Any], keep: int = 0) -> None:
        self._pieces = pieces
        self._buf, self._pos = b"", 0  # the current piece and the next byte of it to give
        self._keep, self._kept, self._start = keep, b"", 0  # bytes held before the piece, where the piece starts

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all that are left when ``n`` < 0); fewer only at the end."""
        parts: list[bytes] = []
        want = n
        while want != 0:
            if self._pos >= len(self._buf):
                piece = next(self._pieces, None)
                if piece is None:
                    break
                if self._keep:
                    self._kept = (self._kept + self._buf[-self._keep:])[-self._keep:]
                self._start += len(self._buf)
                self._buf, self._pos = bytes(piece), 0
            take = len(self._buf) - self._pos if want < 0 else min(want, len(self._buf) - self._pos)
            parts.append(self._buf[self._pos:self._pos + take])
            self._pos += take
            if want > 0:
                want -= take
        return b"".join(parts)

    def held(self, at: int, n: int) -> bytes | None:
        """The bytes read from offset ``at`` on, at most ``n``; None when some of them are no longer held (more than
        ``keep`` bytes before the current piece)."""
        lo = self._start - len(self._kept)
        if at < lo:
            return None
        if at >= self._start:
            return self._buf[at - self._start:min(at - self._start + n, self._pos)]
        return (self._kept + self._buf[:self._pos])[at - lo:at - lo + n]
