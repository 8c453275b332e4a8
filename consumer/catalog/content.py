"""The content pass: byte statistics of whole files, streamed in bounded memory.

One pass over a file's bytes gives, together, the statistics of :mod:`consumer.catalog.stats` (``sha256``,
``histogram``, ``entropy``, ``printable``, ``zeros``; defined there, with the histogram blob layout).

One read feeds everything. Memory is bounded: each worker reads through one reusable buffer of ``chunk``
bytes (1 MiB by default). A file under a quarter of ``chunk`` is read whole with one ``readv`` right after
the previous one in the buffer and hashed there; when the buffer is full, the bytes of all the files in it
are counted by one ``numpy.bincount`` (each byte keyed by its file, 256 files at a time) instead of one
call per file. A larger file is streamed ``chunk`` bytes at a time, each chunk fed to ``hashlib`` and
counted by :func:`~consumer.catalog.histogram.byte_histogram`. Nothing holds a whole file.

Files are spread over threads (or, on request, forked processes), a few files per task, results yielded
in input order (see :func:`compute_content` for what each costs).

A file is opened read-only and non-blocking (a FIFO cannot hang the pass) and refused unless it is a
regular file. When its size, mtime, change time or inode changes while it is read (one ``fstat`` before
the first read and one after the last), :class:`FileChangedError` is raised: the statistics always
describe one version of the file, never old and new halves, identified by the returned size and change
stamp ``max(mtime, ctime)`` (the stamp the catalog and the dataset key on: ``touch -r`` restores an
mtime, not a ctime).
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
from typing import Any

import numpy as np

from ..errors import InputError, short_repr
from ..sources.base import ByteSource
from ..sources.local import LocalFiles
from ..sources.version import change_stamp
from ..util.progress import progress_bar
from .histogram import byte_histogram
from .stats import (
    ContentStats,
    _columns,
    decode_histogram,
    encode_histogram,
    entropy_bits,
    printable_fraction,
    zeros_fraction,
)

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
_FILES_PER_TASK = 32  # files handed to a thread at a time: one future per task, not per file
_FILES_PER_PROCESS_TASK = 256  # files handed to a process at a time (one pickled message each way)
_PARALLEL_MIN_FILES = 2  # a few large files are worth two threads too
_FILE_KEYS = np.arange(256, dtype=np.uint16) << 8  # file j of a packed group counts its bytes at j*256 + byte
_FILE_KEYS.setflags(write=False)

def _check_chunk(chunk) -> int:
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < _MIN_CHUNK:
        raise InputError(f"chunk must be an int >= {_MIN_CHUNK} (bytes per read), got {short_repr(chunk)}")
    return int(chunk)


def content_stats(path: str, *, chunk: int = READ_CHUNK, buffer: np.ndarray | None = None) -> ContentStats:
    """The :class:`ContentStats` of one file, read ``chunk`` bytes at a time into ``buffer`` (a
    ``uint8`` array of at least ``chunk`` bytes, reused across calls; allocated when None).

    Raises :class:`InputError` when the path is missing, unreadable or not a regular file, and
    :class:`FileChangedError` when the file changes while it is read.
    """
    chunk = _check_chunk(chunk)
    if buffer is None or buffer.dtype != np.uint8 or buffer.size < chunk:
        buffer = np.empty(chunk, dtype=np.uint8)
    source = _listed([path])
    return _finish(source.paths, *_read_raw(source, [0], chunk, buffer))[0]


def _listed(paths: Sequence[str]) -> LocalFiles:
    """``paths`` as local files, each stat'ed once (InputError naming a path that is missing or not a regular
    file): the versions the pass then reads, or refuses with FileChangedError."""
    n = len(paths)
    sizes, stamps, ident = np.empty(n, np.int64), np.empty(n, np.int64), np.empty((n, 2), np.int64)
    for i, path in enumerate(paths):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise InputError(f"paths: file not found: {path!r}") from None
        except OSError as e:
            raise InputError(f"paths: cannot open {path!r}: {e.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"paths: {path!r} is not a regular file, refused")
        sizes[i], stamps[i], ident[i] = st.st_size, change_stamp(st), (st.st_dev, st.st_ino)
    return LocalFiles(paths, sizes, stamps, ident)


def _stream(source: ByteSource, i: int, chunk: int) -> tuple[str, np.ndarray]:
    """One streaming read of a large file through ``source``, ``chunk`` bytes at a time: (sha256 hex, counts)."""
    digest = hashlib.sha256()
    counts = np.zeros(256, dtype=np.int64)
    for piece in source.iter_chunks(i, chunk):
        digest.update(piece)
        counts += byte_histogram(np.frombuffer(piece, dtype=np.uint8))
    return digest.hexdigest(), counts


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


def _read_raw(source: ByteSource, ids: Sequence[int], chunk: int,
              buffer: np.ndarray) -> tuple[list[int], list[int], list[str], np.ndarray]:
    """Sizes, change stamps, sha256 hex digests and ``(k, 256)`` int64 byte counts of files ``ids`` of
    ``source``, read through ``buffer`` (at least ``chunk`` bytes).

    Files smaller than a quarter of ``chunk`` are read back to back into the buffer by one
    :meth:`~consumer.sources.base.ByteSource.read_ranges` call per bufferful (objects: every range in flight at
    once), hashed there, and their byte counts taken at once (:func:`_count_packed`). A larger file is streamed
    ``chunk`` bytes at a time (:meth:`~consumer.sources.base.ByteSource.iter_chunks`). The source checks every
    file is the version listed, before and after each read (FileChangedError otherwise): the statistics describe
    the listed size and stamp, returned as such.
    """
    k = len(ids)
    sizes, stamps = source.sizes[list(ids)].tolist(), source.stamps[list(ids)].tolist()
    digests = [""] * k
    hists = np.zeros((k, 256), dtype=np.int64)
    view = memoryview(buffer.data)
    small_max = chunk // 4
    rows: list[int] = []  # files in the buffer (positions in ids), their lengths and where they start
    lengths: list[int] = []
    starts: list[int] = []
    pos = 0
    sha256 = hashlib.sha256

    def flush() -> None:
        if rows:
            at = np.array(starts, dtype=np.int64)
            source.read_ranges(np.array([ids[j] for j in rows], dtype=np.int64), np.zeros(len(rows), np.int64),
                               np.array(lengths, dtype=np.int64), buffer, at)
            for j, a, n in zip(rows, starts, lengths):
                digests[j] = sha256(view[a:a + n]).hexdigest()
            _count_packed(buffer[:pos], rows, lengths, hists)
            rows.clear()
            lengths.clear()
            starts.clear()

    for j, i in enumerate(ids):
        size = sizes[j]
        if size < small_max:
            if pos + size > chunk:
                flush()
                pos = 0
            rows.append(j)
            lengths.append(size)
            starts.append(pos)
            pos += size
        else:
            flush()
            pos = 0
            digests[j], hists[j] = _stream(source, i, chunk)
    flush()
    return sizes, stamps, digests, hists


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


def _process_part(part: ByteSource, chunk: int) -> tuple:
    """:func:`_read_raw` of every file of ``part`` (a subset of the source) and the columns in a worker process;
    the counts sent back in 4 bytes each when they fit."""
    sizes, mtimes, digests, counts = _read_raw(part, range(len(part)), chunk, np.empty(chunk, dtype=np.uint8))
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
    """:class:`ContentStats` of each local path, in order: :func:`compute_source_content` over the paths stat'ed
    once (InputError naming a path that is missing or not a regular file), with the same arguments."""
    _check_args(chunk, files_per_task, workers, processes)
    return compute_source_content(_listed(paths), None, verbose=verbose, workers=workers, chunk=chunk,
                                  files_per_task=files_per_task, processes=processes)


def source_computer(source: ByteSource) -> Callable[..., Generator[ContentStats, None, None]]:
    """A ``compute(paths, verbose=, workers=, chunk=)`` for :meth:`Catalog.ensure_content
    <consumer.catalog.catalog.Catalog.ensure_content>` that reads the files of ``source`` (paths of it) through it:
    local files, or objects by ranges."""
    where: dict[str, int] = {}

    def compute(paths: Sequence[str], *, verbose: bool = False, workers: int | None = None,
                chunk: int = READ_CHUNK) -> Generator[ContentStats, None, None]:
        if not where:
            where.update((p, k) for k, p in enumerate(source.paths))
        ids = [where[p] for p in paths]
        return compute_source_content(source, ids, verbose=verbose, workers=workers, chunk=chunk)

    return compute


def _check_args(chunk: Any, files_per_task: Any, workers: Any, processes: Any) -> None:
    _check_chunk(chunk)
    if files_per_task is not None and (isinstance(files_per_task, bool) or not isinstance(files_per_task, int)
                                       or files_per_task < 1):
        raise InputError(f"files_per_task must be None or an int >= 1, got {short_repr(files_per_task)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InputError(f"workers must be None or an int >= 1, got {short_repr(workers)}")
    if processes not in (None, True, False):
        raise InputError(f"processes must be None, True or False, got {short_repr(processes)}")


def compute_source_content(source: ByteSource, ids: Sequence[int] | None = None, *, verbose: bool = False,
                           workers: int | None = None, chunk: int = READ_CHUNK, files_per_task: int | None = None,
                           processes: bool | None = None) -> Generator[ContentStats, None, None]:
    """:class:`ContentStats` of the files ``ids`` of ``source`` (None: all), in order (a generator, so a caller
    can store results while later files are still being read). Every byte comes from the source
    (:meth:`~consumer.sources.base.ByteSource.read_ranges` and :meth:`~consumer.sources.base.ByteSource.iter_chunks`),
    which checks each file is the version listed: a file that changed raises FileChangedError naming it.

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
    _check_args(chunk, files_per_task, workers, processes)
    chunk = int(chunk)
    ids = list(range(len(source))) if ids is None else list(ids)
    paths = source.paths
    n_workers = workers or os.cpu_count() or 1
    context = _fork_context() if processes and n_workers > 1 else None
    if processes and context is None and n_workers > 1:
        raise InputError("processes=True needs the 'fork' start method, which this platform does not have")
    per_task = files_per_task or (_FILES_PER_PROCESS_TASK if context is not None else _FILES_PER_TASK)
    # a few large files must still spread over the workers: at least ~4 tasks per worker when possible
    per_task = max(1, min(per_task, -(-len(ids) // (4 * n_workers))))
    parts = [ids[i:i + per_task] for i in range(0, len(ids), per_task)]
    bar = progress_bar(len(ids), verbose, "content")

    def names(part: list[int]) -> list[str]:
        return [paths[i] for i in part]

    try:
        if n_workers == 1 or len(ids) < _PARALLEL_MIN_FILES:
            buffer = np.empty(chunk, dtype=np.uint8)
            for part in parts:
                res = _finish(names(part), *_read_raw(source, part, chunk, buffer))
                bar.update(len(res))
                yield from res
            return
        if context is not None:
            hashlib.sha256(b"")  # OpenSSL's digest lookup done before the fork, never first in a child
            with ProcessPoolExecutor(max_workers=n_workers, mp_context=context) as procs:
                for part, raw in _in_order(
                        lambda part: procs.submit(_process_part, source.subset(np.array(part, np.int64)), chunk),
                        parts, n_workers):
                    res = _finish(names(part), *raw)
                    bar.update(len(res))
                    yield from res
            return
        local = threading.local()

        def run(part: list[int]) -> list[ContentStats]:
            buf = getattr(local, "buffer", None)
            if buf is None:
                buf = local.buffer = np.empty(chunk, dtype=np.uint8)
            return _finish(names(part), *_read_raw(source, part, chunk, buf))

        with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="consumer-content") as threads:
            for _, res in _in_order(lambda part: threads.submit(run, part), parts, n_workers):
                bar.update(len(res))
                yield from res
    finally:
        bar.close()


def _in_order(submit: Callable[[list[int]], Future], parts: list[list[int]],
              n_workers: int) -> Iterator[tuple[list[int], Any]]:
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
