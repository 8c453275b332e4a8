"""Has anything about an open file changed since a snapshot? The kernel's ``struct stat`` compared as bytes.

``os.fstat`` builds a ``stat_result`` of some twenty Python objects per call (each time as a float and as a
nanosecond int made by big-int arithmetic): most of its ~0.7 µs here, against ~0.2 µs for the system call. A
caller that only asks "did anything change" — the one-row fetch plan (:mod:`consumer.fetch.one_row`), once per
call — can have libc's ``fstat`` fill a buffer instead and compare the buffer's bytes with a snapshot's. Every field
the kernel reports takes part (device, inode, link count, size, mtime and ctime to the nanosecond, ...), so the
comparison is at least as strict as comparing any of them, as :class:`~consumer.sources.version.FileVersion`
does; a field that moves without the data changing (the access time, at most once a day under ``relatime``)
only counts as a change, sending the caller once down its general path, which looks with ``os.fstat``.

The call is made through ``ctypes`` (which releases the GIL, as ``os.fstat`` does). Where libc exports no
``fstat`` (glibc before 2.33 has only ``__fxstat``; Windows) or the buffer it fills does not hold the file's inode
and size as ``os.fstat`` reports them, :meth:`StatSnapshot.take` returns None and the caller compares
``os.fstat`` results as before.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
from typing import Any

__all__ = ["StatSnapshot", "BUFFER_BYTES"]

BUFFER_BYTES = 256  # above every ``struct stat`` (144 bytes on x86-64 glibc and macOS, 128 on arm64 Linux)


@functools.cache
def _libc_fstat() -> Any:
    """libc's ``fstat(int, struct stat *)`` through ctypes, or None."""
    try:
        fn = ctypes.CDLL(None).fstat
    except (AttributeError, OSError, TypeError):  # no such symbol; no process namespace to look in (Windows)
        return None
    fn.restype = ctypes.c_int
    return fn


class _Buffer(threading.local):
    """A ``struct stat`` buffer per thread: two threads never fill the same buffer (with the GIL released during
    the call, a slower thread's older result could land over a newer one just before it is compared)."""

    def __init__(self) -> None:
        self.buffer = ctypes.create_string_buffer(BUFFER_BYTES)


class StatSnapshot:
    """The ``struct stat`` of one open file descriptor as bytes: :meth:`take` keeps one, :meth:`changed` compares.

    The hot use is inlined by callers: ``buffer = snap.local.buffer; snap.call(fd, buffer) or buffer.raw !=
    snapshot`` is True when the file changed (or ``fstat`` failed); ``local.buffer`` is the calling thread's own."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.call: Any = _libc_fstat() if fd >= 0 else None
        self.local = _Buffer()

    def take(self) -> bytes | None:
        """A snapshot of the file's ``struct stat`` now (None: not to be had here; compare ``os.fstat`` results)."""
        call = self.call
        if call is None:
            return None
        buffer = ctypes.create_string_buffer(BUFFER_BYTES)  # its own: zeroed, no other thread writes it
        if call(self.fd, buffer):
            return None
        raw = buffer.raw
        st = os.fstat(self.fd)
        order = sys.byteorder
        # the buffer is a struct stat of this file: its inode and size are in it as 8-byte ints
        if st.st_ino.to_bytes(8, order) not in raw or st.st_size.to_bytes(8, order) not in raw:
            return None
        return raw

    def changed(self, snapshot: bytes) -> bool:
        """Anything about the file differs from ``snapshot`` (or ``fstat`` failed)."""
        buffer = self.local.buffer
        return bool(self.call(self.fd, buffer)) or buffer.raw != snapshot
