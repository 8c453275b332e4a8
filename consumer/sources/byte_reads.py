"""Checked reads of local files for the byte predicates of SQL (``head``, ``tail``, ``bytes_at``, ``contains``, ...).

Two functions, the one seam between SQL and the bytes (a :class:`~consumer.sources.base.ByteSource` can serve
them later): :func:`read_span` returns up to ``n`` bytes of a file from ``offset``; :func:`iter_file` streams a
whole file in chunks of bounded size through one reused buffer. Both open the file read-only and
non-blocking, and check it is the version the dataset indexed, as the raw reader does
(:mod:`consumer.fetch.reader`): a regular file of the recorded ``size`` whose change stamp
``max(mtime_ns, ctime_ns)`` equals the recorded ``stamp`` (0: unknown, not checked), before the read and again
after it; anything else raises :class:`~consumer.errors.FileChangedError` naming the file. A changed file is
never served.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

from ..errors import FileChangedError

__all__ = ["STREAM_CHUNK", "check_file", "iter_file", "read_span"]

STREAM_CHUNK = 1 << 20  # bytes per read of iter_file
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _check(path: str, st: os.stat_result, size: int, stamp: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise FileChangedError(f"{path!r} is not a regular file any more (it was one when indexed)")
    if st.st_size != size:
        raise FileChangedError(f"{path!r} changed since it was indexed: size {st.st_size} bytes, indexed {size}")
    now = max(st.st_mtime_ns, st.st_ctime_ns)
    if stamp and now != stamp:
        raise FileChangedError(f"{path!r} changed since it was indexed: modified at {now} ns, indexed {stamp} ns "
                               "(rewritten in place?); rebuild the dataset")


def check_file(path: str, size: int, stamp: int) -> None:
    """FileChangedError unless ``path`` is still the indexed version (for a read that stopped early)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise FileChangedError(f"cannot stat {path!r} (it was readable when indexed): {e.strerror}") from None
    _check(path, st, size, stamp)


def _open(path: str) -> int:
    try:
        return os.open(path, _FLAGS)
    except OSError as e:
        raise FileChangedError(f"cannot open {path!r} (it was readable when indexed): {e.strerror}") from None


def read_span(path: str, offset: int, n: int, size: int, stamp: int) -> bytes:
    """Bytes ``[offset, offset + n)`` of the file (fewer at its end; none past it), checked to be the indexed
    version (``size`` bytes, change stamp ``stamp``) before and after the read."""
    fd = _open(path)
    try:
        _check(path, os.fstat(fd), size, stamp)
        n = max(0, min(n, size - offset))
        data = os.pread(fd, n, offset) if n else b""
        _check(path, os.fstat(fd), size, stamp)
    finally:
        os.close(fd)
    if len(data) != n:
        raise FileChangedError(f"{path!r} changed while it was read: {len(data)} of {n} bytes at {offset}")
    return data


def iter_file(path: str, size: int, stamp: int, chunk: int = STREAM_CHUNK) -> Iterator[memoryview]:
    """The whole file in pieces of at most ``chunk`` bytes, read into one reused buffer (consume each piece
    before asking for the next), checked to be the indexed version before the first read and after the last."""
    fd = _open(path)
    try:
        _check(path, os.fstat(fd), size, stamp)
        buf = bytearray(max(1, min(chunk, size)))
        view = memoryview(buf)
        done = 0
        while done < size:
            got = os.preadv(fd, [view[:min(len(buf), size - done)]], done)
            if got == 0:
                raise FileChangedError(f"{path!r} changed while it was read: ended at {done} of {size} bytes")
            yield view[:got]
            done += got
        _check(path, os.fstat(fd), size, stamp)
    finally:
        os.close(fd)
