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

One read feeds everything. Memory is bounded: each worker reads through one reusable buffer of ``chunk``
bytes (1 MiB by default). A file under a quarter of ``chunk`` is read whole with one ``readv`` right after
the previous one in the buffer and hashed there; when the buffer is full, the bytes of all the files in it
are counted by one ``numpy.bincount`` (each byte keyed by its file, 256 files at a time) instead of one
call per file. A larger file is streamed ``chunk`` bytes at a time, each chunk fed to ``hashlib`` and
counted as byte pairs. Nothing holds a whole file.

Files are spread over threads (or, on request, forked processes), a few files per task, results yielded
in input order (see :func:`compute_content` for what each costs).

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
import multiprocessing
import os
import re
import stat
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FileChangedError, InputError, short_repr
from ..util.progress import progress_bar
from .histogram import byte_histogram

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
_FILES_PER_PROCESS_TASK = 256  # files handed to a process at a time (one pickled message each way)
_PARALLEL_MIN_FILES = 2  # a few large files are worth two threads too
_WIDTHS = ((np.dtype("<u2"), 0xFFFF), (np.dtype("<u4"), 0xFFFFFFFF), (np.dtype("<u8"), None))
_BY_LENGTH = {256 * dt.itemsize: dt for dt, _ in _WIDTHS}
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_FILE_KEYS = np.arange(256, dtype=np.uint16) << 8  # file j of a packed group counts its bytes at j*256 + byte
_FILE_KEYS.setflags(write=False)

PRINTABLE_BYTES = np.zeros(256, dtype=bool)
PRINTABLE_BYTES[0x20:0x7F] = True
PRINTABLE_BYTES[0x09:0x0E] = True  # \t \n \x0b \x0c \r
PRINTABLE_BYTES.setflags(write=False)
_PRINTABLE_ONES = PRINTABLE_BYTES.astype(np.uint64)
_PRINTABLE_ONES.setflags(write=False)


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
    h = hists.astype(np.float64)  # exact: counts stay far below 2**53, so every sum of counts is exact too
    total = h.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)
    p = h
    p /= safe[:, None]  # in place: h is a fresh array
    terms = np.log2(p, out=np.zeros_like(p), where=p > 0)  # log2 p where a value occurs, 0 elsewhere
    terms *= p  # p log2 p; 0 * 0 = 0.0 where a value does not occur
    entropy = np.clip(-terms.sum(axis=1), 0.0, 8.0) + 0.0  # rounding never leaves [0, 8]; no -0.0
    printable = (hists @ _PRINTABLE_ONES).astype(np.float64) / safe  # an integer count: exact in any order
    zeros = hists[:, 0].astype(np.float64) / safe
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
    return _read_part([path], chunk, buffer)[0]


def _open(path: str) -> int:
    try:
        return os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise InputError(f"paths: file not found: {path!r}") from None
    except OSError as e:
        raise InputError(f"paths: cannot open {path!r}: {e.strerror}") from None


def _readv(fd: int, view: memoryview, path: str) -> int:
    try:
        return os.readv(fd, [view])
    except OSError as e:
        raise InputError(f"paths: cannot read {path!r}: {e.strerror}") from None


def _read_whole(fd: int, view: memoryview, size: int, path: str, n: int | None = None) -> int:
    """Read a file of listed ``size`` into ``view`` (``size + 1`` bytes long, so that a file grown since it
    was listed reads as longer); the number of bytes read. ``n``: bytes already read into the start of
    ``view`` (None: none yet). One ``readv`` in the usual case: a read that returns the listed size is the
    end, no extra read to see EOF."""
    if n is None:
        n = _readv(fd, view, path)
    while 0 < n < size:  # a short read before the listed end: keep reading (or see EOF: the file shrank)
        r = _readv(fd, view[n:], path)
        if r == 0:
            break
        n += r
    return n


def _stream(fd: int, chunk: int, buffer: np.ndarray, size: int, path: str) -> tuple[int, str, np.ndarray]:
    """One streaming read of a large file, ``chunk`` bytes at a time: (bytes read, sha256 hex, counts)."""
    view = memoryview(buffer.data)[:chunk]  # the buffer protocol of the array itself
    digest = hashlib.sha256()
    counts = np.zeros(256, dtype=np.int64)
    total = 0
    while True:
        n = _readv(fd, view, path)
        if n == 0:
            break
        digest.update(view[:n])
        counts += byte_histogram(buffer[:n])
        total += n
        if n < chunk and total == size:
            break  # a short read at the listed size is the end: no extra read to see EOF
    return total, digest.hexdigest(), counts


def _count_packed(data: np.ndarray, rows: list[int], lengths: list[int], hists: np.ndarray) -> None:
    """Byte counts of files laid back to back in ``data`` (``lengths[j]`` bytes of file ``rows[j]``) into
    ``hists[rows]``: up to 256 files at a time, each byte keyed ``file << 8 | byte`` (uint16) and all of
    them counted by one ``bincount``, instead of one call per file."""
    pos = 0
    for g in range(0, len(rows), 256):
        lens = lengths[g:g + 256]
        k, n = len(lens), sum(lens)
        keys = np.repeat(_FILE_KEYS[:k], lens)
        keys |= data[pos:pos + n]
        hists[rows[g:g + 256]] = np.bincount(keys, minlength=k << 8).reshape(k, 256)
        pos += n


def _read_part(paths: Sequence[str], chunk: int, buffer: np.ndarray) -> list[ContentStats]:
    """The :class:`ContentStats` of ``paths``, read through ``buffer`` (at least ``chunk`` bytes)."""
    return _finish(paths, *_read_raw(paths, chunk, buffer))


def _read_raw(paths: Sequence[str], chunk: int,
              buffer: np.ndarray) -> tuple[list[int], list[int], list[str], np.ndarray]:
    """Sizes, mtimes, sha256 hex digests and ``(k, 256)`` int64 byte counts of ``paths``, read through
    ``buffer`` (at least ``chunk`` bytes).

    A file smaller than a quarter of ``chunk`` is read whole, in one ``readv``, right after the previous
    one in the buffer, and hashed there; the byte counts of all the files in the buffer are taken at once
    when it is full (:func:`_count_packed`). A larger file is streamed ``chunk`` bytes at a time. Each
    file's size and mtime are taken before and after its read; a difference is a change while it was read.
    """
    k = len(paths)
    sizes, mtimes, digests = [0] * k, [0] * k, [""] * k
    hists = np.zeros((k, 256), dtype=np.int64)
    view = memoryview(buffer.data)
    small_max = chunk // 4
    rows: list[int] = []  # files in the buffer whose bytes are not counted yet, and their lengths
    lengths: list[int] = []
    pos = 0
    sha256, open_, fstat, readv, close, is_regular = \
        hashlib.sha256, os.open, os.fstat, os.readv, os.close, stat.S_ISREG  # locals: this loop is the hot path
    for i, path in enumerate(paths):
        try:
            fd = open_(path, _OPEN_FLAGS)
        except OSError:
            fd = _open(path)  # raises the InputError naming the path (or opens it, if it just appeared)
        try:
            before = fstat(fd)
            size = before.st_size
            if not is_regular(before.st_mode):
                raise InputError(f"paths: {path!r} is not a regular file, refused")
            if size < small_max:
                if pos + size >= chunk:
                    _count_packed(buffer[:pos], rows, lengths, hists)
                    rows, lengths, pos = [], [], 0
                try:  # one read in the usual case: size + 1 bytes asked, the listed size returned
                    total = readv(fd, [view[pos:pos + size + 1]])
                except OSError:  # read again where the error names the path (or the retry succeeds)
                    total = _read_whole(fd, view[pos:pos + size + 1], size, path)
                if 0 < total < size:  # a short read before the listed end: read on (or see that the file shrank)
                    total = _read_whole(fd, view[pos:pos + size + 1], size, path, total)
                digests[i] = sha256(view[pos:pos + total]).hexdigest()
                rows.append(i)
                lengths.append(total)
                pos += total
            else:
                if rows:  # the files waiting in the buffer are counted: it is free for a streamed file
                    _count_packed(buffer[:pos], rows, lengths, hists)
                    rows, lengths, pos = [], [], 0
                total, digests[i], hists[i] = _stream(fd, chunk, buffer, size, path)
            after = fstat(fd)
        finally:
            close(fd)
        if total != size or _identity(after) != _identity(before):  # written, renamed over or resized meanwhile
            raise FileChangedError(f"paths: {path!r} changed while its content was read "
                                   f"(size {before.st_size} -> {after.st_size}, {total} bytes read)")
        sizes[i], mtimes[i] = total, change_stamp(after)
    if rows:
        _count_packed(buffer[:pos], rows, lengths, hists)
    return sizes, mtimes, digests, hists


def _finish(paths: Sequence[str], sizes: list[int], mtimes: list[int], digests: list[str],
            counts: np.ndarray, columns: tuple[list[float], list[float], list[float]] | None = None
            ) -> list[ContentStats]:
    """ContentStats of files read by :func:`_read_raw`, the columns computed for all of them at once
    (unless given: a worker process computes them)."""
    if not len(paths):
        return []
    hists = counts.astype(np.uint64)
    ent, prn, zer = columns if columns is not None else (a.tolist() for a in _columns(hists))
    new, out = object.__new__, []
    for p, n, t, d, h, e, q, z in zip(paths, sizes, mtimes, digests, hists, ent, prn, zer):
        st = new(ContentStats)  # the fields set at once: a frozen dataclass's __init__ sets them one by one
        st.__dict__.update(path=p, size=n, mtime_ns=t, sha256=d, histogram=h, entropy=e, printable=q, zeros=z)
        out.append(st)
    return out


def _process_part(paths: Sequence[str], chunk: int) -> tuple:
    """:func:`_read_raw` and the columns in a worker process; the counts sent back in 4 bytes each when
    they fit."""
    sizes, mtimes, digests, counts = _read_raw(paths, chunk, np.empty(chunk, dtype=np.uint8))
    columns = tuple(a.tolist() for a in _columns(counts))
    return sizes, mtimes, digests, counts.astype(np.uint32) if max(sizes, default=0) <= 0xFFFFFFFF else counts, columns


def _fork_context():
    """The ``fork`` multiprocessing context, or None where the platform has none."""
    try:
        return multiprocessing.get_context("fork")
    except ValueError:
        return None


def compute_content(paths: Sequence[str], *, verbose: bool = False, workers: int | None = None, chunk: int = READ_CHUNK,
                    files_per_task: int | None = None,
                    processes: bool | None = None) -> Generator[ContentStats, None, None]:
    """:class:`ContentStats` of each path, in order (a generator, so a caller can store results while
    later files are still being read).

    Runs in ``workers`` threads or processes (default: the number of cores), at most ``files_per_task``
    files per task (default 32 for threads, 256 for processes; fewer when there are few files, so that
    every worker gets work), with at most two tasks per worker in flight (memory stays bounded whatever
    the number of files), each worker reading through its own ``chunk``-byte buffer. One progress bar
    when ``verbose``.

    ``processes``: ``True`` runs the reads in worker processes forked for this pass (the ``fork`` start
    method; refused where the platform has none), ``False`` or ``None`` (default) in threads. Threads
    share the GIL, which hashing small files (under 2 KiB), counting bytes (``numpy.bincount``) and the
    per-file Python work all hold, so on small files threads do about one core's work; processes escape
    it but each pass pays a fork of the calling process (more the larger it is: a process that imported
    torch pays tens of milliseconds) and sends every file's counts back through a pipe. Measured on 2
    cores (``docs/benchmarks.md``, *Content pass*), processes lose below ~10,000 small files and only tie
    at 20,000, hence threads by default; ``processes=True`` is for many cores and very many files. The
    results are the same either way.
    """
    chunk = _check_chunk(chunk)
    if files_per_task is not None and (isinstance(files_per_task, bool) or not isinstance(files_per_task, int)
                                       or files_per_task < 1):
        raise InputError(f"files_per_task must be None or an int >= 1, got {short_repr(files_per_task)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InputError(f"workers must be None or an int >= 1, got {short_repr(workers)}")
    if processes not in (None, True, False):
        raise InputError(f"processes must be None, True or False, got {short_repr(processes)}")
    n_workers = workers or os.cpu_count() or 1
    context = _fork_context() if processes and n_workers > 1 else None
    if processes and context is None and n_workers > 1:
        raise InputError("processes=True needs the 'fork' start method, which this platform does not have")
    per_task = files_per_task or (_FILES_PER_PROCESS_TASK if context is not None else _FILES_PER_TASK)
    # a few large files must still spread over the workers: at least ~4 tasks per worker when possible
    per_task = max(1, min(per_task, -(-len(paths) // (4 * n_workers))))
    parts = [paths[i:i + per_task] for i in range(0, len(paths), per_task)]
    bar = progress_bar(len(paths), verbose, "content")
    try:
        if n_workers == 1 or len(paths) < _PARALLEL_MIN_FILES:
            buffer = np.empty(chunk, dtype=np.uint8)
            for part in parts:
                res = _read_part(part, chunk, buffer)
                bar.update(len(res))
                yield from res
            return
        if context is not None:
            hashlib.sha256(b"")  # OpenSSL's digest lookup done before the fork, never first in a child
            with ProcessPoolExecutor(max_workers=n_workers, mp_context=context) as procs:
                for part, raw in _in_order(lambda part: procs.submit(_process_part, part, chunk), parts,
                                           n_workers):
                    res = _finish(part, *raw)
                    bar.update(len(res))
                    yield from res
            return
        local = threading.local()

        def run(part: Sequence[str]) -> list[ContentStats]:
            buf = getattr(local, "buffer", None)
            if buf is None:
                buf = local.buffer = np.empty(chunk, dtype=np.uint8)
            return _read_part(part, chunk, buf)

        with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="consumer-content") as threads:
            for _, res in _in_order(lambda part: threads.submit(run, part), parts, n_workers):
                bar.update(len(res))
                yield from res
    finally:
        bar.close()


def _in_order(submit: Callable[[Sequence[str]], Future], parts: list[Sequence[str]],
              n_workers: int) -> Iterator[tuple[Sequence[str], Any]]:
    """``(part, result)`` of each part in order, with at most two tasks per worker in flight; tasks not
    started yet are cancelled when the caller stops early or a task fails."""
    pending: deque = deque()
    todo = iter(parts)
    try:
        for part in todo:
            pending.append((part, submit(part)))
            if len(pending) >= 2 * n_workers:
                break
        while pending:
            part, fut = pending.popleft()
            res = fut.result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append((nxt, submit(nxt)))
            yield part, res
    finally:
        for _, f in pending:
            f.cancel()


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
