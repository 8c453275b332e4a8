"""Advisory locks between processes (and between objects of one process) that share a cache directory.

:class:`RangeLocks` locks numbered slots of one lock file: slot ``k`` is byte ``k`` of the file, locked
with Linux's open-file-description locks (``F_OFD_SETLK``). Unlike ``lockf``/POSIX record locks they
belong to the open file, not to the process: two :class:`RangeLocks` of one process exclude each other,
and closing another descriptor of the same file releases nothing. Every lock is released by the kernel
when its holder's descriptor closes, the holder process dying included: a crashed worker never leaves a
slot locked. Where OFD locks are missing (not Linux), every slot is the whole file locked with
``flock`` (correct, less parallel).

Slots name units of work (:func:`slot_of` maps any key to one of ``2**20`` slots): a process that wants
to compute something a sibling may be computing takes its slot first. :meth:`RangeLocks.try_lock` never
waits (the caller does other work first and comes back); :meth:`RangeLocks.wait_lock` waits; a caller
never waits while it holds slots, so two callers cannot wait on each other.

A lock file that cannot be created or locked (a read-only cache directory, a file system without
locks) makes a :class:`RangeLocks` that grants every slot at once (:attr:`RangeLocks.shared` is False):
each process then works alone, as it would without this module.
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from ..errors import InputError

__all__ = ["SLOTS", "RangeLocks", "claimed", "in_use", "slot_of"]

SLOTS = 1 << 20
_FLOCK = "hhqqi"  # struct flock on 64-bit Linux: l_type, l_whence, l_start, l_len, l_pid
_OFD = sys.platform.startswith("linux") and struct.calcsize("q") == 8 and hasattr(os, "O_CLOEXEC")


def slot_of(key: bytes | str) -> int:
    """The slot (``0 <= slot < SLOTS``) of a key: the first bytes of its BLAKE2b digest."""
    data = key.encode("utf-8", "surrogateescape") if isinstance(key, str) else key
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") % SLOTS


class RangeLocks:
    """Exclusive locks on numbered slots of the lock file ``path`` (see the module docstring)."""

    def __init__(self, path: str | None):
        self.path = path
        self._fd: int | None = None
        self._held: set[int] = set()
        try:
            import fcntl  # noqa: F401, PLC0415  (POSIX only: without it every slot is granted at once)
        except ImportError:
            path = None
        if path is not None:
            try:
                self._fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
            except OSError:
                self._fd = None

    @property
    def shared(self) -> bool:
        """Whether the slots really exclude other processes (False: every slot is granted at once)."""
        return self._fd is not None

    def _fcntl(self, slot: int, wait: bool, kind: int) -> bool:
        import fcntl  # noqa: PLC0415  (POSIX only; not imported where no lock file is used)

        assert self._fd is not None
        if not _OFD:  # slot is -1 here: the whole file
            op = (fcntl.LOCK_UN if kind == fcntl.F_UNLCK else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB)
            try:
                fcntl.flock(self._fd, op)
                return True
            except BlockingIOError:
                return False
        whole = slot < 0
        request = struct.pack(_FLOCK, kind, os.SEEK_SET, 0 if whole else slot, 0 if whole else 1, 0)
        try:
            fcntl.fcntl(self._fd, fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK, request)
            return True
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise

    def try_lock(self, slots: Iterable[int]) -> set[int]:
        """Lock every slot of ``slots`` that no one else holds, without waiting; returns those now held
        (slots this object already holds included)."""
        import fcntl  # noqa: PLC0415

        wanted = set(slots)
        if self._fd is None or not wanted:
            return wanted
        if not _OFD:  # flock: one lock, the whole file, stands for every slot
            if not self._held:
                try:
                    if not self._fcntl(-1, False, fcntl.F_WRLCK):
                        return set()
                except OSError:  # no lock support here (e.g. some network file systems): work alone
                    self._give_up()
                    return wanted
            self._held |= wanted
            return wanted
        got = wanted & self._held
        for slot in sorted(wanted - self._held):
            try:
                ok = self._fcntl(slot, False, fcntl.F_WRLCK)
            except OSError:  # no lock support here (e.g. some network file systems): work alone
                self._give_up()
                return wanted
            if ok:
                self._held.add(slot)
                got.add(slot)
        return got

    def wait_lock(self, slot: int) -> None:
        """Lock ``slot``, waiting for its holder to release it. Only called while holding no slot."""
        import fcntl  # noqa: PLC0415

        if self._fd is None or slot in self._held:
            return
        try:
            self._fcntl(slot if _OFD else -1, True, fcntl.F_WRLCK)
        except OSError:
            self._give_up()
            return
        self._held.add(slot)

    def release(self) -> None:
        """Release every slot held (one call for the whole file)."""
        import fcntl  # noqa: PLC0415

        if self._fd is None or not self._held:
            return
        try:
            self._fcntl(-1, False, fcntl.F_UNLCK)
        except OSError:
            self._give_up()
        self._held.clear()

    @contextmanager
    def holding(self, slot: int) -> Iterator[None]:
        """Hold ``slot`` for the ``with`` block, waiting for it first."""
        self.wait_lock(slot)
        try:
            yield
        finally:
            self.release()

    def _give_up(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._held.clear()

    def close(self) -> None:
        """Release everything and close the lock file."""
        self._give_up()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass


def claimed(locks: RangeLocks, slots: Sequence[int], window: int, work: Callable[[list[int]], object]) -> None:
    """Call ``work(part)`` on every item (``part`` holds positions into ``slots``, at most ``window`` of them)
    while holding the slot of each item of ``part``, so that no other holder works on them at the same time.

    Items whose slot another process holds are put off, not waited for: the other items are done first,
    then the caller waits for one put-off slot at a time (holding nothing) and does every put-off item whose
    slot it can take by then. ``work`` must check again whether an item still needs doing: its holder may
    have done it meanwhile. Slots are released after each part, also when ``work`` raises.
    """
    if window < 1:
        raise InputError(f"window must be an int >= 1, got {window!r}")
    put_off: list[int] = []
    for start in range(0, len(slots), window):
        part = list(range(start, min(start + window, len(slots))))
        try:
            got = locks.try_lock({slots[i] for i in part})
            mine = [i for i in part if slots[i] in got]
            put_off.extend(i for i in part if slots[i] not in got)
            if mine:
                work(mine)
        finally:
            locks.release()
    while put_off:
        try:
            locks.wait_lock(slots[put_off[0]])
            got = locks.try_lock({slots[i] for i in put_off[:window]})
            mine = [i for i in put_off[:window] if slots[i] in got]
            done = set(mine)
            put_off = [i for i in put_off if i not in done]
            work(mine)
        finally:
            locks.release()


def in_use(path: str) -> bool:
    """Whether another holder has a slot of the existing lock file ``path`` locked now (``consumer cache clear``
    leaves such a file alone). A file that is missing or cannot be locked counts as unused."""
    if not os.path.isfile(path):
        return False
    locks = RangeLocks(path)
    try:
        if locks._fd is None:
            return False
        import fcntl  # noqa: PLC0415

        try:
            free = locks._fcntl(-1, False, fcntl.F_WRLCK)
        except OSError:  # no lock support here: no one can hold it either
            return False
        if free:
            locks._fcntl(-1, False, fcntl.F_UNLCK)
        return not free
    finally:
        locks.close()

