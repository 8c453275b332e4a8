"""The content pass: byte statistics of whole files, streamed in bounded memory.

One pass over a file's bytes gives, together:

- ``sha256``: hex digest of the whole content;
- ``histogram``: the 256 counts of each byte value (``numpy.uint64[256]``);
- ``entropy``: Shannon entropy of the byte histogram in bits per byte, ``-sum(p * log2 p)`` over the
  byte values that occur, between 0 (one repeated byte) and 8 (every value equally often);
- ``printable``: fraction of bytes in ``0x20..0x7E`` or one of ``\\t \\n \\x0b \\x0c \\r`` (9..13);
- ``zeros``: fraction of ``0x00`` bytes.

An empty file has the sha256 of ``b""``, an all-zero histogram and entropy, printable and zeros all
defined as ``0.0`` (there is no byte to take a fraction of).

Memory is bounded: a file is read in chunks of ``chunk`` bytes (1 MiB by default) into one reusable
buffer per thread and each chunk is fed to ``hashlib`` and ``numpy.bincount``; nothing holds a whole
file. Files are spread over a thread pool (``hashlib`` and ``numpy`` release the GIL on large
buffers, and reads release it too), a few files per task, with results yielded in input order.

A file is opened read-only and non-blocking (a FIFO cannot hang the pass) and refused unless it is a
regular file. When its size, mtime, change time or inode changes while it is read (one ``fstat`` before
the first read and one after the last), :class:`FileChangedError` is raised: the statistics always
describe one version of the file, never old and new halves, identified by the returned size and change
stamp ``max(mtime, ctime)`` (the stamp the catalog and the dataset key on: ``touch -r`` restores an
mtime, not a ctime).

Histogram blob (the catalog's ``histogram`` column and the argument of the SQL functions of
:mod:`consumer.query.functions`): 256 little-endian unsigned integers, count of byte 0 first, in the
narrowest width that holds the largest count; the width is given by the blob's length::

    512 bytes  -> 256 x uint16  (largest count < 65,536)
    1024 bytes -> 256 x uint32  (largest count < 4,294,967,296)
    2048 bytes -> 256 x uint64

:func:`encode_histogram` and :func:`decode_histogram` convert; the encoding of a histogram is unique.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
from collections import deque
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..errors import FileChangedError, InputError, short_repr
from ..util.progress import progress_bar

__all__ = [
    "CONTENT_COLUMNS",
    "READ_CHUNK",
    "ContentStats",
    "compute_content",
    "content_stats",
    "decode_histogram",
    "encode_histogram",
    "entropy_bits",
    "change_stamp",
    "named_content_columns",
    "printable_fraction",
    "zeros_fraction",
]

CONTENT_COLUMNS = ("sha256", "entropy", "printable", "zeros", "histogram")
READ_CHUNK = 1 << 20  # bytes per read
_MIN_CHUNK = 4096
_PAIR_MIN = 1 << 16  # from this many bytes on, count byte pairs (see _byte_counts)
_FILES_PER_TASK = 32  # files handed to a thread at a time: one future per task, not per file
_PARALLEL_MIN_FILES = 2  # a few large files are worth two threads too
_WIDTHS = ((np.dtype("<u2"), 0xFFFF), (np.dtype("<u4"), 0xFFFFFFFF), (np.dtype("<u8"), None))
_BY_LENGTH = {256 * dt.itemsize: dt for dt, _ in _WIDTHS}

PRINTABLE_BYTES = np.zeros(256, dtype=bool)
PRINTABLE_BYTES[0x20:0x7F] = True
PRINTABLE_BYTES[0x09:0x0E] = True  # \t \n \x0b \x0c \r
PRINTABLE_BYTES.setflags(write=False)


@dataclass(frozen=True)
class ContentStats:
    """The content statistics of one version of one file (see the module docstring).

    ``size`` is the number of bytes read and ``mtime_ns`` the file's change stamp ``max(mtime, ctime)``
    (ns) while it was read: the identity of the version the statistics describe. ``entropy``,
    ``printable`` and ``zeros`` are exactly what :func:`entropy_bits`, :func:`printable_fraction` and
    :func:`zeros_fraction` give for ``histogram``.
    """

    path: str
    size: int
    mtime_ns: int
    sha256: str
    histogram: np.ndarray
    entropy: float
    printable: float
    zeros: float

    def histogram_blob(self) -> bytes:
        """The histogram in the blob layout of the catalog (see :func:`encode_histogram`)."""
        return encode_histogram(self.histogram)


def _as_histogram(hist, what: str = "histogram") -> np.ndarray:
    h = np.asarray(hist)
    if h.shape != (256,) or h.dtype.kind not in "iu" or (h.dtype.kind == "i" and h.size and int(h.min()) < 0):
        raise InputError(f"{what} must be 256 non-negative integer counts, got {short_repr(hist)}")
    return h.astype(np.uint64, copy=False)


def _columns(hists: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entropy (bits per byte), printable and zeros fractions of a ``(k, 256)`` stack of histograms,
    vectorised. The one implementation behind every entropy and fraction in the package, so that a
    value computed per file, per batch or by an SQL function is the same float."""
    h = hists.astype(np.float64)  # exact: counts stay far below 2**53
    total = h.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)[:, None]
    p = h / safe
    occurs = p > 0
    terms = np.where(occurs, p * np.log2(np.where(occurs, p, 1.0)), 0.0)
    entropy = np.clip(-terms.sum(axis=1), 0.0, 8.0) + 0.0  # rounding never leaves [0, 8]; no -0.0
    printable = h[:, PRINTABLE_BYTES].sum(axis=1) / safe[:, 0]
    zeros = h[:, 0] / safe[:, 0]
    return entropy, printable, zeros


def entropy_bits(hist) -> float:
    """Shannon entropy in bits per byte of a 256-count byte histogram: ``-sum(p log2 p)`` over the
    values that occur, ``p = count / total``. 0.0 for an empty histogram."""
    return float(_columns(_as_histogram(hist)[None])[0][0])


def printable_fraction(hist) -> float:
    """Fraction of bytes in 0x20..0x7E or 9..13 (``\\t \\n \\x0b \\x0c \\r``); 0.0 for an empty histogram."""
    return float(_columns(_as_histogram(hist)[None])[1][0])


def zeros_fraction(hist) -> float:
    """Fraction of 0x00 bytes; 0.0 for an empty histogram."""
    return float(_columns(_as_histogram(hist)[None])[2][0])


def encode_histogram(hist) -> bytes:
    """256 counts as a blob: little-endian uint16, uint32 or uint64, the narrowest that fits."""
    h = _as_histogram(hist)
    top = int(h.max())
    for dtype, limit in _WIDTHS[:-1]:
        if top <= limit:
            return h.astype(dtype).tobytes()
    return h.astype(_WIDTHS[-1][0]).tobytes()


def decode_histogram(blob) -> np.ndarray:
    """The ``uint64[256]`` counts of a histogram blob (512, 1024 or 2048 bytes; see the module docstring)."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise InputError(f"histogram must be a blob of 512, 1024 or 2048 bytes, got {short_repr(blob)}")
    dtype = _BY_LENGTH.get(len(blob))
    if dtype is None:
        raise InputError(f"histogram must be a blob of 512, 1024 or 2048 bytes, got {len(blob)} bytes")
    return np.frombuffer(blob, dtype=dtype).astype(np.uint64)


def _check_chunk(chunk) -> int:
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < _MIN_CHUNK:
        raise InputError(f"chunk must be an int >= {_MIN_CHUNK} (bytes per read), got {short_repr(chunk)}")
    return int(chunk)


def _byte_counts(data: np.ndarray) -> np.ndarray:
    """The 256 byte counts (int64) of a uint8 array.

    Large inputs are counted as little-endian uint16 pairs into 65,536 bins, folded back (a byte
    value ``v`` occurs ``row v + column v`` times in the 256 x 256 pair table): half the increments of
    a plain ``bincount`` and fewer collisions on repeated bytes, about 1.5-2x faster on 1 MiB chunks.
    Small inputs use a plain ``bincount`` (the 65,536 bins would cost more than they save).
    """
    n = data.size
    if n < _PAIR_MIN:
        return np.bincount(data, minlength=256)
    even = n & ~1
    pairs = np.bincount(data[:even].view("<u2"), minlength=65536).reshape(256, 256)
    counts = pairs.sum(axis=0) + pairs.sum(axis=1)
    if even != n:
        counts[data[-1]] += 1
    return counts


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What must not change while a file is read: size, mtime, ctime (a rewrite with its mtime set back
    still moves it), and device/inode (a file renamed over it)."""
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_ino


def change_stamp(st: os.stat_result) -> int:
    """The change stamp of a file (ns): ``max(mtime, ctime)``, what the catalog and the dataset key on."""
    return max(st.st_mtime_ns, st.st_ctime_ns)


def content_stats(path: str, *, chunk: int = READ_CHUNK, buffer: np.ndarray | None = None) -> ContentStats:
    """The :class:`ContentStats` of one file, read ``chunk`` bytes at a time into ``buffer`` (a
    ``uint8`` array of at least ``chunk`` bytes, reused across calls; allocated when None).

    Raises :class:`InputError` when the path is missing, unreadable or not a regular file, and
    :class:`FileChangedError` when the file changes while it is read.
    """
    chunk = _check_chunk(chunk)
    if buffer is None or buffer.dtype != np.uint8 or buffer.size < chunk:
        buffer = np.empty(chunk, dtype=np.uint8)
    return _finish([_read(path, chunk, buffer)])[0]


def _read(path: str, chunk: int, buffer: np.ndarray) -> tuple[str, int, int, str, np.ndarray]:
    """One streaming read of a file: (path, bytes read, mtime_ns, sha256 hex, int64 histogram)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"paths: file not found: {path!r}") from None
    except OSError as e:
        raise InputError(f"paths: cannot open {path!r}: {e.strerror}") from None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise InputError(f"paths: {path!r} is not a regular file, refused")
        view = memoryview(buffer.data)[:chunk]  # the buffer protocol of the array itself
        digest = hashlib.sha256()
        counts = None
        total = 0
        while True:
            try:
                n = os.readv(fd, [view])
            except OSError as e:
                raise InputError(f"paths: cannot read {path!r}: {e.strerror}") from None
            if n == 0:
                break
            digest.update(view[:n])
            part = _byte_counts(buffer[:n])
            counts = part if counts is None else counts + part
            total += n
            if n < chunk and total == before.st_size:
                break  # a short read at the listed size is the end: no extra read to see EOF
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if _identity(before) != _identity(after) or total != after.st_size:
        raise FileChangedError(f"paths: {path!r} changed while its content was read "
                               f"(size {before.st_size} -> {after.st_size}, {total} bytes read)")
    if counts is None:
        counts = np.zeros(256, dtype=np.int64)
    return path, total, change_stamp(after), digest.hexdigest(), counts


def _finish(raw: list[tuple[str, int, int, str, np.ndarray]]) -> list[ContentStats]:
    """ContentStats of files read by :func:`_read`, the columns computed for all of them at once."""
    if not raw:
        return []
    hists = np.stack([r[4] for r in raw]).astype(np.uint64)
    ent, prn, zer = (a.tolist() for a in _columns(hists))
    return [ContentStats(path=p, size=n, mtime_ns=t, sha256=d, histogram=h, entropy=e, printable=q, zeros=z)
            for (p, n, t, d, _), h, e, q, z in zip(raw, hists, ent, prn, zer)]


def compute_content(paths: Sequence[str], *, verbose: bool = False, workers: int | None = None, chunk: int = READ_CHUNK,
                    files_per_task: int = _FILES_PER_TASK) -> Generator[ContentStats, None, None]:
    """:class:`ContentStats` of each path, in order (a generator, so a caller can store results while
    later files are still being read).

    Runs in ``workers`` threads (default: the number of cores), at most ``files_per_task`` files per
    task (fewer when there are few files, so that every thread gets work),
    with at most two tasks per thread in flight (memory stays bounded whatever the number of files),
    each thread reading through its own ``chunk``-byte buffer. One progress bar when ``verbose``.
    """
    chunk = _check_chunk(chunk)
    if isinstance(files_per_task, bool) or not isinstance(files_per_task, int) or files_per_task < 1:
        raise InputError(f"files_per_task must be an int >= 1, got {short_repr(files_per_task)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InputError(f"workers must be None or an int >= 1, got {short_repr(workers)}")
    local = threading.local()

    def run(part: Sequence[str]) -> list[ContentStats]:
        buf = getattr(local, "buffer", None)
        if buf is None:
            buf = local.buffer = np.empty(chunk, dtype=np.uint8)
        return _finish([_read(p, chunk, buf) for p in part])

    n_workers = workers or os.cpu_count() or 1
    # a few large files must still spread over the threads: at least ~4 tasks per thread when possible
    per_task = max(1, min(files_per_task, -(-len(paths) // (4 * n_workers))))
    parts = [paths[i:i + per_task] for i in range(0, len(paths), per_task)]
    bar = progress_bar(len(paths), verbose, "content")
    try:
        if n_workers == 1 or len(paths) < _PARALLEL_MIN_FILES:
            for part in parts:
                res = run(part)
                bar.update(len(res))
                yield from res
            return
        with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="consumer-content") as pool:
            pending: deque = deque()
            todo = iter(parts)
            try:
                for part in todo:
                    pending.append(pool.submit(run, part))
                    if len(pending) >= 2 * n_workers:
                        break
                while pending:
                    res = pending.popleft().result()
                    nxt = next(todo, None)
                    if nxt is not None:
                        pending.append(pool.submit(run, nxt))
                    bar.update(len(res))
                    yield from res
            finally:
                for f in pending:
                    f.cancel()
    finally:
        bar.close()


# --------------------------------------------------------------- which columns a statement names
_SQL_TOKEN = re.compile(
    r"--[^\n]*"                      # line comment
    r"|/\*.*?(?:\*/|\Z)"             # block comment
    r"|'(?:[^']|'')*'"               # string literal
    r'|"((?:[^"]|"")*)"'             # "quoted identifier"
    r"|`([^`]*)`"                    # `quoted identifier`
    r"|\[([^\]]*)\]"                 # [quoted identifier]
    r"|([A-Za-z_][A-Za-z0-9_$]*)",   # bare word
    re.DOTALL)


def named_content_columns(statement: str) -> frozenset[str]:
    """The content columns (:data:`CONTENT_COLUMNS`) a SQL statement names as identifiers, ignoring
    comments and string literals (case-insensitive, quoted identifiers included). ``*`` names none:
    ``SELECT *`` shows the content columns as they are, NULL where not yet computed."""
    if not isinstance(statement, str):
        raise InputError(f"statement must be a SQL string, got {short_repr(statement)}")
    wanted = set(CONTENT_COLUMNS)
    found = set()
    for m in _SQL_TOKEN.finditer(statement):
        name = next((g for g in m.groups() if g is not None), None)
        if name is not None and name.lower() in wanted:
            found.add(name.lower())
    return frozenset(found)
