"""The shared-memory ring of the loader's worker pool: where each column of a batch goes in a slot, the views over
a slot, the segment, the slots' lifetimes, and the check of ``/dev/shm``'s free space (see
:mod:`consumer.training.workers` for how the pool uses them)."""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np

from ..errors import InputError, WorkerError
from ..fetch.layout import RAGGED_COLUMNS

__all__ = ["Columns", "Layout", "Shapes", "Segment", "Slots", "check_shared_memory", "ring_layout", "views"]

Columns = dict[str, np.ndarray]
"""A batch as numpy columns: column name -> array (``[B, ...]`` for the token rows)."""
Shapes = dict[str, tuple[int, ...]]
# a worker's answer: (seq, slot, shapes of the ring columns, the small columns, (exception, traceback) or None)
# (column, dtype, byte offset in a slot, capacity in bytes)
Layout = tuple[tuple[str, "np.dtype[Any]", int, int], ...]
_ALIGN = 64

def ring_layout(probe: Columns, max_rows: int, max_width: int = 0) -> tuple[Layout, int]:
    """Where each ``[B, ...]`` column of a batch goes in a slot (from a batch of one full-width row, ``probe``), and
    the slot size in bytes. A column of variable length (:data:`~consumer.fetch.layout.RAGGED_COLUMNS`:
    ``cu_seqlens``, at most one entry per token of the batch and one more) gets room for its longest. The other
    one-dimensional columns (class, sample id: one value per row) and scalars travel in the answer instead. Rows of
    ``[B, W]`` columns get room for ``max_width`` tokens when that is more than the probe's (the span query's rows
    vary in width from batch to batch, up to ``seqlen + 1``)."""
    layout, offset = [], 0
    width = max([arr.shape[1] for arr in probe.values() if arr.ndim >= 2] + [max_width, 1])
    for name, arr in probe.items():
        if name in RAGGED_COLUMNS and arr.ndim == 1:
            capacity = (max_rows * width + 1) * arr.itemsize
        elif arr.ndim < 2:
            continue
        elif arr.ndim == 2:
            capacity = max_rows * max(arr.shape[1], max_width) * arr.itemsize
        else:
            capacity = max_rows * arr[:1].nbytes
        layout.append((name, arr.dtype, offset, capacity))
        offset += -(-capacity // _ALIGN) * _ALIGN
    return tuple(layout), offset


def views(ring: np.ndarray, layout: Layout, slot_bytes: int, slot: int, shapes: Shapes) -> Columns:
    """The columns of a batch of column ``shapes`` in ``slot`` of ``ring`` (a uint8 array over the segment),
    as views."""
    out = {}
    for name, dtype, off, capacity in layout:
        shape = shapes[name]
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if n > capacity:
            raise WorkerError(f"column {name!r}: a batch of {shape} {dtype} needs {n} bytes, over the ring slot's "
                              f"{capacity}")
        start = slot * slot_bytes + off
        out[name] = ring[start:start + n].view(dtype).reshape(shape)
    return out


class Segment(SharedMemory):
    """A shared-memory segment whose mapping lives as long as any array over it (numpy keeps a reference to the
    memoryview, not a buffer export, so ``SharedMemory.close`` would unmap memory a caller's tensor still uses)."""

    def release(self) -> None:
        """Close the file descriptor and drop this object's references; the mapping is unmapped by the garbage
        collector once no array over it is left."""
        fd: int = getattr(self, "_fd", -1)
        self._fd = -1
        if fd >= 0:
            os.close(fd)
        self._buf = self._mmap = None


class Slots:
    """Free slots, and how many handed-out arrays still hold each slot (kept apart from the pool, so the
    finalizers of arrays a caller keeps do not keep the pool alive)."""

    def __init__(self, n: int):
        self.free: deque[int] = deque(range(n))
        self.live = [0] * n
        self._lock = threading.Lock()  # an array may die in another thread

    def hold(self, slot: int, arrays: list[np.ndarray]) -> None:
        """``slot`` is in use until every array of ``arrays`` (views over it) is garbage-collected."""
        if not arrays:
            self.free.append(slot)
            return
        self.live[slot] = len(arrays)
        for a in arrays:
            weakref.finalize(a, self.drop, slot)

    def drop(self, slot: int) -> None:
        """One array over ``slot`` died; the slot is free again with the last one."""
        with self._lock:
            self.live[slot] -= 1
            if self.live[slot] == 0:
                self.free.append(slot)


def check_shared_memory(n_slots: int, slot_bytes: int, num_workers: int, prefetch_factor: int) -> None:
    """Refuse a ring larger than the free space of ``/dev/shm`` (the segment is sparse: without this check a
    worker would die of SIGBUS at its first write, e.g. in a container with the default 64 MB)."""
    try:
        free = os.statvfs("/dev/shm")
    except OSError:  # no /dev/shm (not Linux): the platform's allocator reports its own errors
        return
    need, have = n_slots * slot_bytes, free.f_bavail * free.f_frsize
    if need > have:
        raise InputError(f"num_workers={num_workers}, prefetch_factor={prefetch_factor}: the loader's ring of "
                         f"{n_slots} batches needs {need} bytes of shared memory, but /dev/shm has {have} bytes "
                         "free; use fewer workers, a smaller prefetch_factor or batch, num_workers=0, or a larger "
                         "/dev/shm (docker run --shm-size=...)")
