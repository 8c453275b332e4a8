"""Rewriting a file for real while another thread of this process reads it, at a moment the test can see.

Used by the tests of "never a mixed answer" (the content pass, the raw reader). The writer does not guess
when the reader is busy: it watches the reader through ``/proc`` (the bytes the reader thread has read so far,
or the system call it is in), writes, sets the mtime back (``touch -r``: only
the ctime moves) and then looks again, so each attempt knows whether the write really landed while the
read was under way ("raced"). Linux only (``/proc``); the callers skip elsewhere.
"""

from __future__ import annotations

import os
import platform
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# the system call numbers of preadv and preadv2 (glibc may use either), for /proc/<pid>/task/<tid>/syscall
PREADV = {"x86_64": (295, 327), "aarch64": (69, 286)}.get(platform.machine())


@dataclass
class Attempt:
    """One read raced by one write: whether the write landed during the read, and what the read gave."""

    raced: bool = False
    seen: bool = False  # the reader was seen in the state the writer waits for (race_preadv: inside preadv)
    value: object = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


def _descriptor(path: str) -> int | None:
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == path:
                return int(name)
        except OSError:
            pass
    return None


def _in_syscall(tid: int, numbers: tuple[int, ...]) -> bool:
    """Whether thread ``tid`` is blocked inside one of these system calls (a thread running on a CPU shows as
    "running": only a read that waits for the disk is seen)."""
    try:
        with open(f"/proc/self/task/{tid}/syscall") as f:
            return f.read().split(" ", 1)[0] in {str(n) for n in numbers}
    except OSError:
        return False


def evict(path: str) -> None:
    """Drop the file's pages from the page cache (written back first), so that reading it waits for the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def evict_store(prefix) -> None:
    """Drop the pages of every file of the packed store at ``prefix`` (``prefix.*``) from the page cache."""
    prefix = Path(prefix)
    for path in prefix.parent.glob(prefix.name + ".*"):
        evict(str(path))


def overwrite_keeping_mtime(path: str, offset: int, data: bytes) -> None:
    """Write ``data`` at ``offset`` in place and set the mtime back to what it was (size unchanged)."""
    st = os.stat(path)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _start(read: Callable[[], object]) -> tuple[threading.Thread, Attempt]:
    attempt = Attempt()

    def run():
        try:
            attempt.value = read()
        except BaseException as e:  # noqa: BLE001  (the test inspects it)
            attempt.error = e
        finally:
            attempt.done.set()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, attempt


def _bytes_read(tid: int) -> int | None:
    """The bytes thread ``tid`` has read so far (``rchar``: every ``read``/``readv``/``preadv`` it made), or None
    once it is gone."""
    try:
        with open(f"/proc/self/task/{tid}/io") as f:
            return int(f.readline().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def race_sequential_read(path: str, read: Callable[[], object], data: bytes) -> Attempt:
    """Run ``read()`` (which reads ``path`` from the start, in order, with ``read``/``readv`` or ``preadv``, opening
    it once or once per piece) in a thread; once the bytes that thread has read are inside the first half of the
    file, overwrite ``len(data)`` bytes at 3/4 of it. Raced: the thread was alive just before the write, and after
    it had still read fewer bytes than that or had stopped (a reader that checks the file's version per piece stops
    at the next piece), so it had read old bytes and was bound to read new ones; a thread that ended with a value
    read on in the write's window, and is not counted (the count includes any other reads of the thread, so it can
    only overstate how far the read of ``path`` is)."""
    size = os.path.getsize(path)
    at = size * 3 // 4
    thread, attempt = _start(read)
    gone = False
    while thread.native_id is None:
        pass
    tid = thread.native_id
    while not attempt.done.is_set():
        pos = _bytes_read(tid)
        if not pos:
            continue
        if pos < size // 2:
            alive = not attempt.done.is_set()
            overwrite_keeping_mtime(path, at, data)
            after = _bytes_read(tid)  # None: the thread ended since (a reader that checks each piece stops at once)
            attempt.raced = alive and (after is None or after < at)
            gone = after is None
        break
    thread.join()
    if attempt.raced and gone and attempt.error is None:  # it read on past the patch in the write's window: no
        attempt.raced = False  # race to judge (the caller still checks that its value is one whole version)
    return attempt


def race_preadv(path: str, read: Callable[[], object], offset: int, data: bytes) -> Attempt:
    """Run ``read()`` in a thread; while that thread is inside ``preadv``, overwrite ``data`` at ``offset`` of
    ``path``. Raced: the thread was still inside ``preadv`` once the write was done. The file is evicted from
    the page cache first, so that the read waits for the disk (and shows in ``/proc``)."""
    if PREADV is None:
        raise RuntimeError(f"preadv's system call number on {platform.machine()} is not known")
    evict(path)
    thread, attempt = _start(read)
    while thread.native_id is None:
        pass
    tid = thread.native_id
    while not attempt.done.is_set():
        if _in_syscall(tid, PREADV) and _descriptor(path) is not None:
            attempt.seen = True
            overwrite_keeping_mtime(path, offset, data)
            attempt.raced = _in_syscall(tid, PREADV)
            break
    thread.join()
    return attempt
