"""Descriptors of local files kept open between reads: :class:`KeptFiles`, and the snapshot check of a kept file.

A random batch touches a few dozen containers (JSONL shards, text files, tar archives); opening and closing each at
every read cost more than the reads themselves. :class:`~consumer.sources.local.LocalFiles` keeps the descriptor of
each file it read in a :class:`KeptFiles` (file id -> :class:`Kept`), least recently used first, at most
:attr:`KeptFiles.limit` of them (:data:`KEEP_OPEN`, and never more than a sixteenth of the process's
``RLIMIT_NOFILE``): a file read again is not opened again. Eviction, :meth:`KeptFiles.close` (``ds.close()``) and
garbage collection close them. The file a descriptor reads cannot change under it unnoticed:

- ``snapshot``: the ``struct stat`` of the file's **path** as bytes (libc's ``stat`` through ctypes, taken once
  the version was checked, see :func:`path_snapshot`). After each read of a kept descriptor, one ``stat`` of the
  path compared with it as bytes catches a write in place, truncation and appending (size, mtime, ctime), and a
  file replaced (renamed over), removed or swapped for a link (another inode, or no file): each
  differs and sends the reader to its full check (``os.fstat`` of the descriptor, ``os.stat`` of the path), which
  names what changed. Being made after the read, it also catches a write while the read ran.
- Threads: a descriptor evicted or closed is closed only once every read that was running at that moment has
  ended (:meth:`KeptFiles.enter` / :meth:`KeptFiles.leave`), so no descriptor is closed under a read in another
  thread (its number could be reused by another file).
- Processes: an entry belongs to the process that opened it. A forked child finds the parent's entries on its
  first read and drops them, closing each copy it inherited (when its descriptor still refers to the same file:
  the number may have been reused), then opens its own; a pickled source carries no descriptor
  (:class:`~consumer.sources.local.LocalFiles` makes an empty :class:`KeptFiles` when unpickled).
"""

from __future__ import annotations

import collections
import ctypes
import functools
import os
import sys
import threading
import weakref
from typing import Any

__all__ = ["KEEP_OPEN", "Kept", "KeptFiles", "keep_limit", "path_snapshot", "snapshot_call"]

KEEP_OPEN = 64  # descriptors a source keeps open at most (fewer under a low RLIMIT_NOFILE: see keep_limit)
_BUFFER_BYTES = 256  # above every ``struct stat`` (144 bytes on x86-64 glibc, 128 on arm64 Linux)


def keep_limit() -> int:
    """How many descriptors a source keeps: :data:`KEEP_OPEN`, at most a sixteenth of the soft ``RLIMIT_NOFILE``
    (so that a process holding a few datasets stays far from the limit), at least 1."""
    try:
        import resource  # noqa: PLC0415  (POSIX only)

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return KEEP_OPEN
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return KEEP_OPEN
    return max(1, min(KEEP_OPEN, soft // 16))


@functools.cache
def snapshot_call() -> Any:
    """libc's ``stat(const char *, struct stat *)`` through ctypes, or None where libc exports none (glibc before
    2.33 has only ``__xstat``; Windows): then every check of a kept file is the full one."""
    try:
        fn = ctypes.CDLL(None).stat
    except (AttributeError, OSError, TypeError):
        return None
    fn.restype = ctypes.c_int
    return fn


class _Buffer(threading.local):
    """A ``struct stat`` buffer per thread (with the GIL released during the call, two threads never fill one)."""

    def __init__(self) -> None:
        self.buffer = ctypes.create_string_buffer(_BUFFER_BYTES)


def _timespec(ns: int) -> bytes:
    order = sys.byteorder
    return (ns // 1_000_000_000).to_bytes(8, order, signed=True) + (ns % 1_000_000_000).to_bytes(8, order)


def path_snapshot(path: bytes, st: os.stat_result) -> bytes | None:
    """The ``struct stat`` of ``path`` as bytes, when it is the state ``st`` (an ``os.fstat`` of the kept
    descriptor, checked to be the version listed) describes: its inode, size, mtime and ctime are in it (the ctime
    moves at every change, so the same inode with the same ctime is the same state). None otherwise (the path is
    another file now, or changed meanwhile, or libc's ``stat`` is not to be had): no snapshot, the next read checks
    in full again."""
    call = snapshot_call()
    if call is None:
        return None
    buffer = ctypes.create_string_buffer(_BUFFER_BYTES)  # its own: zeroed, no other thread writes it
    if call(path, buffer):
        return None
    raw = buffer.raw
    order = sys.byteorder
    if st.st_ino.to_bytes(8, order) not in raw or st.st_size.to_bytes(8, order) not in raw or \
            _timespec(st.st_mtime_ns) not in raw or _timespec(st.st_ctime_ns) not in raw:
        return None
    return raw


class Kept:
    """One kept descriptor: ``fd``, the ``dev``/``ino`` of its file and the path's ``snapshot`` (None: not taken
    yet, the next read checks in full)."""

    __slots__ = ("fd", "dev", "ino", "snapshot")

    def __init__(self, fd: int, dev: int, ino: int) -> None:
        self.fd, self.dev, self.ino = fd, dev, ino
        self.snapshot: bytes | None = None


def _close_own(entries: list[Kept]) -> None:
    """Close the descriptors of ``entries``, each only while it still refers to its file: in a forked child, or
    after other code closed every descriptor, the number may have been given to another file."""
    for e in entries:
        try:
            st = os.fstat(e.fd)
            if (st.st_dev, st.st_ino) == (e.dev, e.ino):
                os.close(e.fd)
        except OSError:
            pass


def _finalize(state: dict[str, Any]) -> None:
    """Garbage collection of a :class:`KeptFiles`: close everything it holds (no read runs any more)."""
    _close_own([*state["entries"].values(), *(e for _, e in state["retired"])])
    state["entries"].clear()
    state["retired"].clear()


class KeptFiles:
    """Open descriptors of one source's files, by file id, least recently used first (see the module docstring).
    ``limit``: how many are kept (default :func:`keep_limit`).

    A read brackets its use with :meth:`enter` and :meth:`leave` (one lock each per call, not per file). An
    entry evicted, dropped or closed is *retired*: it leaves the table at once, and its descriptor is closed as
    soon as every read that was running when it was retired has left (a read that starts later cannot reach it),
    so no descriptor is closed under a read in another thread (its number could be reused by another file)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = keep_limit() if limit is None else max(1, int(limit))
        self.local = _Buffer()
        self.call = snapshot_call()
        self._lock = threading.Lock()
        self._epoch = 0  # retirements so far
        self._reads: dict[int, int] = {}  # running read -> the epoch it started in
        self._token = 0
        # what the finalizer needs, in one dict it holds (never this object): the table, LRU order (an OrderedDict:
        # moving an entry to the end is one atomic C call, so a hit needs no lock), the retired entries not closed
        # yet (with the epoch of their retirement) and the process that opened them
        self._state: dict[str, Any] = {"entries": collections.OrderedDict(), "retired": [], "pid": os.getpid()}
        self.entries: collections.OrderedDict[int, Kept] = self._state["entries"]
        weakref.finalize(self, _finalize, self._state)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def pid(self) -> int:
        """The process whose descriptors these are (a forked child adopts them at its first read)."""
        return int(self._state["pid"])

    def _adopt(self) -> None:
        """A forked child's first use: drop (and close) the entries it inherited; a fresh lock (the parent's may
        have been held by another thread at the fork)."""
        self._lock = threading.Lock()
        self._reads.clear()
        _finalize(self._state)
        self._state["pid"] = os.getpid()

    def enter(self) -> int:
        """A read starts: its token for :meth:`leave`."""
        if self._state["pid"] != os.getpid():
            self._adopt()
        with self._lock:
            self._token += 1
            self._reads[self._token] = self._epoch
            return self._token

    def leave(self, token: int) -> None:
        """The read ``token`` is done: close the retired descriptors no running read can hold any more."""
        with self._lock:
            del self._reads[token]
            closing = self._closable()
        for fd in closing:
            os.close(fd)

    def _closable(self, reading: int | None = None) -> list[int]:
        """(Under the lock.) Take the retired entries no running read can hold out of the list: their fds.
        ``reading``: the token of the caller's own read, which holds none of them now."""
        retired = self._state["retired"]
        if not retired:
            return []
        oldest = min((v for k, v in self._reads.items() if k != reading), default=self._epoch)
        closing = [e.fd for when, e in retired if when <= oldest]
        if closing:
            retired[:] = [(when, e) for when, e in retired if when > oldest]
        return closing

    def get(self, i: int) -> Kept | None:
        """The kept descriptor of file ``i`` (now the most recently used), or None; between :meth:`enter` and
        :meth:`leave` only."""
        entries = self.entries
        try:
            entries.move_to_end(i)
            return entries[i]
        except KeyError:  # not kept (or retired by another thread between the two calls)
            return None

    def add(self, i: int, fd: int, st: os.stat_result) -> Kept:
        """Keep ``fd`` (just opened, of file ``i``; ``st`` its ``fstat``); the least recently used entries beyond
        :attr:`limit` are retired."""
        e = Kept(fd, st.st_dev, st.st_ino)
        with self._lock:
            entries = self.entries
            old = entries.pop(i, None)  # another thread opened it meanwhile: the older entry goes
            if old is not None:
                self._retire(old)
            entries[i] = e
            while len(entries) > self.limit:
                self._retire(entries.popitem(last=False)[1])
        return e

    def _retire(self, e: Kept) -> None:
        self._epoch += 1
        self._state["retired"].append((self._epoch, e))

    def drop(self, i: int, e: Kept) -> None:
        """Forget ``e`` (file ``i``'s entry: the file changed); closed once no read can use it."""
        with self._lock:
            if self.entries.get(i) is e:
                del self.entries[i]
                self._retire(e)

    def close(self, reading: int | None = None) -> None:
        """Retire every kept descriptor: closed now, or by the last read still running; later reads open again.
        ``reading``: the token of the caller's read (between two files: it holds no entry), which does not keep
        them open (a read out of descriptors closes the kept ones and opens again)."""
        if self._state["pid"] != os.getpid():
            self._adopt()
            return
        with self._lock:
            for e in self.entries.values():
                self._retire(e)
            self.entries.clear()
            closing = self._closable(reading)
        for fd in closing:
            os.close(fd)
