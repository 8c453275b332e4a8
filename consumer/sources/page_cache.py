"""Reading a memory-mapped store without the kernel's read-ahead: rows, not megabytes, from the device.

A page fault on a memory map makes the kernel read ahead around the faulting page (about 2 MiB on Linux). For a
store that fits in memory that is prefetching: the epoch reads those pages anyway, and they stay. For a store
bigger than the memory the page cache can use, it is waste: a random 32 KiB row costs ~2 MiB of device reads
(50x), and the pages read ahead are evicted before any batch wants them. The same holds for a store that was
verified and then evicted (a second epoch over a huge store in one long process), and for stores packed before
chunk sums, whose first touch is a page fault too.

:class:`RowAdvice` reads such a store the other way: before a batch's rows are copied out of the map, it tells
the kernel exactly which byte ranges are wanted (``posix_fadvise(POSIX_FADV_WILLNEED)`` per range). The kernel
starts reading all of them at once, without read-ahead, and the copies then find their pages in the page cache.
Measured on an 800 MB store evicted with ``posix_fadvise(POSIX_FADV_DONTNEED)`` (20 random rows of 32 KiB per
batch, 2-core VM): plain faults 16-32 ms per batch at 50x read amplification, ``os.pread`` of each row 1.7 ms at
0.99x, advice then copy 0.7-0.8 ms at 0.99x (the reads run concurrently; ``pread`` waits for each in turn).
``madvise(MADV_RANDOM)`` on the map also reads 0.99x but takes 10 ms (one synchronous 4 KiB read per page).

On a store already in memory the advice costs a system call per row for nothing, so it is used only when
:func:`wants_readahead` says the store does not fit: ``readahead=None`` (the default of
:meth:`Consumer.from_packed <consumer.Consumer.from_packed>`) compares the store's token bytes with
:func:`page_cache_bytes`; ``True`` / ``False`` force either way (``False``: a store on a network file system,
where every byte read ahead is bandwidth).
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["RowAdvice", "page_cache_bytes", "wants_readahead"]

_FADVISE = getattr(os, "posix_fadvise", None)  # not on macOS or Windows: there the advice is skipped
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def _meminfo_available(path: str = "/proc/meminfo") -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_limit(paths: tuple[str, ...] = _CGROUP_LIMITS) -> int | None:
    for path in paths:
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # "max" (v2) or a huge sentinel (v1) mean no limit
            return int(text)
    return None


def page_cache_bytes() -> int:
    """About how many bytes of file pages this process can keep in memory: the smaller of ``MemAvailable``
    (``/proc/meminfo``) and the memory limit of its control group (cgroup v2 ``memory.max`` or v1
    ``memory.limit_in_bytes``), which counts the page cache too; the physical memory where neither is readable."""
    found = [v for v in (_meminfo_available(), _cgroup_limit()) if v is not None]
    if found:
        return min(found)
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: assume it fits (read-ahead on, the kernel's default)


def wants_readahead(data_bytes: int, setting: bool | None, available: int | None = None) -> bool:
    """Whether a local store of ``data_bytes`` token bytes is read through plain page faults (the kernel's
    read-ahead): ``setting`` when given, else whether it fits in ``available`` (default :func:`page_cache_bytes`)."""
    if setting is not None:
        return bool(setting)
    return int(data_bytes) <= (page_cache_bytes() if available is None else int(available))


class RowAdvice:
    """``posix_fadvise(WILLNEED)`` of token ranges of ``data_file`` (tokens of ``itemsize`` bytes from byte
    ``data_offset``). The file opens at the first advice in each process; a pickled copy opens its own."""

    def __init__(self, data_file: str, itemsize: int, data_offset: int = 0) -> None:
        self.data_file, self.itemsize, self.data_offset = data_file, int(itemsize), int(data_offset)
        self._fd, self._pid = -1, -1

    def advise(self, src: np.ndarray, cnt: np.ndarray) -> None:
        """Ask the kernel to start reading tokens ``[src[r], src[r] + cnt[r])`` for every non-empty range ``r``
        (returns at once; the reads run while the caller goes on). Errors of the advice are ignored: it is a
        hint, and the copy that follows reads the pages anyway."""
        advise = _FADVISE
        fd = self._fd if self._pid == os.getpid() else self._open()
        if fd < 0 or advise is None:
            return
        w, off, need = self.itemsize, self.data_offset, os.POSIX_FADV_WILLNEED
        for s, c in zip(src.tolist(), cnt.tolist()):
            if c > 0:
                try:
                    advise(fd, off + s * w, c * w, need)
                except OSError:
                    return

    def _open(self) -> int:
        try:
            self._fd = os.open(self.data_file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            self._fd = -1
        self._pid = os.getpid()
        return self._fd

    def close(self) -> None:
        """Close this process's descriptor (a later advice opens it again)."""
        if self._fd >= 0 and self._pid == os.getpid():
            os.close(self._fd)
        self._fd, self._pid = -1, -1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass

    def __getstate__(self) -> dict[str, object]:
        return {"data_file": self.data_file, "itemsize": self.itemsize, "data_offset": self.data_offset}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.data_file, self.itemsize, self.data_offset = str(state["data_file"]), int(str(state["itemsize"])), \
            int(str(state["data_offset"]))
        self._fd, self._pid = -1, -1
