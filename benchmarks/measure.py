"""Timing primitives shared by the driver and the peer processes (numpy only: they run in peer venvs too).

- :func:`time_batches`: seconds per batch of a fetch function over given id batches, plus the sha256
  of the rows of the first few batches (the driver compares them across systems);
- :func:`time_loader`: first-batch latency and batches/s of an iterable of batches;
- :func:`memcpy_seconds` and :func:`gather_floor_seconds`: the machine limits for one batch;
- :func:`median`, :func:`best_of`, :func:`timed` and :func:`row_digest`;
- :func:`io_read_bytes` and :func:`evict`: what a process read from the device, and cold files (the
  benchmark's own files only).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

__all__ = ["time_batches", "time_loader", "memcpy_seconds", "gather_floor_seconds", "median", "row_digest",
           "as_rows", "peak_rss_mb", "best_of", "gather_fetch", "io_read_bytes", "evict", "timed"]


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB: ``VmHWM`` of ``/proc/self/status`` (its own address space,
    unlike ``ru_maxrss``, which a process started by fork+exec inherits from its parent), else ``ru_maxrss``."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def median(values: Iterable[float]) -> float:
    """Median of the values (nan for none)."""
    v = [float(x) for x in values]
    return float(np.median(v)) if v else float("nan")


def best_of(fn, repeat: int) -> float:
    """Fastest of ``repeat`` timed calls (seconds)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def as_rows(batch: Any) -> np.ndarray:
    """The token rows of a batch as a C-contiguous int64 array: a numpy array, a torch tensor, or a dict
    holding one of them under ``input_array`` / ``input_ids`` / ``tokens``."""
    if isinstance(batch, dict):
        for key in ("input_array", "input_ids", "tokens"):
            if key in batch:
                batch = batch[key]
                break
        else:
            raise KeyError(f"batch has none of input_array/input_ids/tokens: keys {sorted(batch)}")
    if hasattr(batch, "numpy") and not isinstance(batch, np.ndarray):
        batch = batch.numpy()
    return np.ascontiguousarray(batch, dtype=np.int64)


def row_digest(rows: np.ndarray) -> str:
    """sha256 of the rows as C-contiguous int64 (the same rows give the same digest in every process)."""
    return hashlib.sha256(np.ascontiguousarray(rows, dtype=np.int64).tobytes()).hexdigest()


def time_batches(fetch: Callable[[np.ndarray], Any], batches: list[np.ndarray], check: int = 0,
                 warmup: int = 1) -> dict:
    """Call ``fetch(ids)`` for every batch; return seconds per batch, the digest of the rows of the first
    ``check`` batches (computed outside the timing) and the shape of the last batch's rows."""
    for ids in batches[:warmup]:
        fetch(ids)
    seconds, digests, shape = [], [], None
    for i, ids in enumerate(batches):
        t0 = time.perf_counter()
        out = fetch(ids)
        seconds.append(time.perf_counter() - t0)
        if i < check:
            rows = as_rows(out)
            shape = list(rows.shape)
            digests.append(row_digest(rows))
    return {"seconds": seconds, "digests": digests, "shape": shape}


def time_loader(make: Callable[[], Iterable], n_batches: int) -> dict:
    """Iterate ``make()`` for ``n_batches`` batches after the first: first-batch latency (worker start-up
    included), steady batches/s, and the shape of one batch's rows."""
    t0 = time.perf_counter()
    it = iter(make())
    first = next(it)
    t1 = time.perf_counter()
    shape = list(as_rows(first).shape)
    n = 0
    for _ in it:
        n += 1
        if n >= n_batches:
            break
    t2 = time.perf_counter()
    del it
    return {"first_batch_s": t1 - t0, "batches": n, "seconds": t2 - t1,
            "batches_per_s": n / (t2 - t1) if n else float("nan"), "shape": shape}


def memcpy_seconds(shape: tuple[int, int], dtype=np.int64, reps: int = 200) -> float:
    """Median seconds of ``np.copyto`` of one batch of ``shape`` (hot source): the bandwidth floor."""
    src = np.random.default_rng(0).integers(0, 60000, shape).astype(dtype)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return median(times)


def gather_floor_seconds(tokens: np.ndarray, batch: int, seqlen: int, reps: int = 200, seed: int = 1,
                         dtype=np.int64) -> float:
    """Median seconds to copy ``batch`` rows of ``seqlen`` tokens from random offsets of ``tokens`` (a
    memory-mapped store) into a preallocated batch of ``dtype``: the DRAM-gather floor of any reader."""
    dst = np.empty((batch, seqlen), dtype=dtype)
    span = max(int(tokens.size) - seqlen, 1)
    rng = np.random.default_rng(seed)
    times = []
    for _ in range(reps):
        offsets = rng.integers(0, span, batch).tolist()
        t0 = time.perf_counter()
        for r, s in enumerate(offsets):
            np.copyto(dst[r, :min(seqlen, tokens.size - s)], tokens[s:s + seqlen])
        times.append(time.perf_counter() - t0)
    return median(times)


def gather_fetch(tokens: np.ndarray, batch: int, seqlen: int, dtype: Any = np.int64) -> Callable[[Any], np.ndarray]:
    """The DRAM-gather floor as a fetch function: each call copies ``batch`` random ``seqlen``-token slices of
    ``tokens`` into one preallocated ``[batch, seqlen]`` array of ``dtype`` (the ids it is given are ignored)."""
    dst = np.empty((batch, seqlen), dtype=dtype)
    span = max(int(tokens.size) - seqlen, 1)
    rng = np.random.default_rng(1)

    def fetch(ids: Any) -> np.ndarray:
        for r, o in enumerate(rng.integers(0, span, batch).tolist()):
            np.copyto(dst[r], tokens[o:o + seqlen])
        return dst

    return fetch


def io_read_bytes() -> int:
    """Bytes this process has read from block devices so far (``read_bytes`` of ``/proc/self/io``; page-cache
    hits do not count); -1 where the kernel does not report it."""
    try:
        with open("/proc/self/io", encoding="ascii") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def evict(paths: Iterable[str]) -> int:
    """Drop the page-cache pages of these files only (``posix_fadvise(POSIX_FADV_DONTNEED)`` after an
    ``fdatasync``, so dirty pages go too); never the machine's other caches. Returns the bytes covered."""
    import os

    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return total


def timed(fn: Callable[[], Any], repeat: int = 1) -> dict:
    """Call ``fn`` ``repeat`` times: every duration in seconds, their median and minimum, and the last result."""
    seconds, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - t0)
    return {"seconds": seconds, "median_s": median(seconds), "best_s": min(seconds), "result": out}
