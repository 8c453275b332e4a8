"""Local files as a :class:`~consumer.sources.base.ByteSource`: :class:`LocalFiles`.

Listing is :func:`~consumer.sources.corpus.stat_files` (one ``stat`` per file: size, change stamp, device and
inode). A read opens a file read-only (``O_RDONLY | O_CLOEXEC | O_NONBLOCK``: a FIFO put in a file's place must not
hang us) the first time, checks with one ``fstat`` that it is the version listed (size, change stamp
``max(mtime, ctime)`` — users cannot set the ctime back — and, when known, device and inode), reads with one
``preadv`` per range, checks with one more ``fstat`` that nothing wrote to it meanwhile (old and new halves are
never served) and keeps the descriptor open (:class:`~consumer.sources.kept_files.KeptFiles`: at most
:data:`~consumer.sources.kept_files.KEEP_OPEN`, least recently used closed first). A later read of a kept file
reads first and then compares one ``stat`` of its path with the snapshot taken when it was found unchanged: a
write in place, truncation, appending, a file renamed over it, removed or swapped for a link (and a write while the
read ran) all make them differ, and the full check (``fstat`` of the descriptor, ``stat`` of the path) says what
changed. Files are never written. Anything changed raises :class:`~consumer.errors.FileChangedError` naming the
file; its bytes are not served.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import FileChangedError
from .base import FEW_RANGES, ByteSource, Handoff, Ranges, StatFiles, check_few_ranges, check_ranges
from .corpus import probe_files, stat_files
from .kept_files import Kept, KeptFiles, path_snapshot
from .paths import PathList
from .version import FileVersion, change_stamp

__all__ = ["LocalFiles"]

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


class LocalFiles(ByteSource):
    """Files on a local (or shared, mounted) filesystem: ``paths`` with the ``sizes`` and change ``stamps``
    listed, and optionally ``ident`` (int64 ``[N, 2]``: device and inode; None when unknown, e.g. reopened from
    an index cache entry by another process)."""

    kind = "local files"

    def __init__(self, paths: Sequence[str], sizes: np.ndarray, stamps: np.ndarray,
                 ident: np.ndarray | None = None) -> None:
        self.paths = paths if isinstance(paths, PathList) else PathList.of(list(paths))
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.stamps = np.asarray(stamps, dtype=np.int64)
        self.ident = ident
        self._kept = KeptFiles()  # descriptors of files read, by file id (never pickled: reopened per process)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_kept"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._kept = KeptFiles()

    @property
    def kept(self) -> KeptFiles:
        """The descriptors of this source's files kept open between reads (this process's)."""
        return self._kept

    def close(self) -> None:
        """Close the descriptors kept open (a later read opens its files again)."""
        self._kept.close()

    @classmethod
    def listed(cls, paths: Sequence[str], classes: Sequence[str] | None = None,
               stat: StatFiles | None = None) -> LocalFiles:
        """Stat every file of ``paths`` (``classes``, one per path, only name a file's class in errors) with
        ``stat`` (default :func:`~consumer.sources.corpus.stat_files`); no file is opened yet (size-0 files
        excepted): :meth:`check_readable` does that when it is needed."""
        ident = np.zeros((len(paths), 2), dtype=np.int64)
        sizes, stamps = (stat or stat_files)(paths, None if classes is None else list(classes), identity=ident,
                                             check_open=np.zeros(len(paths), dtype=bool))
        return cls(paths, sizes, stamps, ident)

    def check_readable(self) -> None:
        """Open every file once (readability proven before a build spends time on it)."""
        probe_files(self.paths, self.sizes)

    def subset(self, ids: np.ndarray) -> LocalFiles:
        """The files ``ids``, in that order."""
        ids = np.asarray(ids, dtype=np.int64)
        return LocalFiles(PathList.of([self.paths[i] for i in ids.tolist()]), self.sizes[ids], self.stamps[ids],
                          None if self.ident is None else self.ident[ids])

    def with_paths(self, paths: Sequence[str]) -> LocalFiles:
        """The same files under ``paths`` (the same strings, e.g. a list that shares a corpus's blob)."""
        return LocalFiles(PathList.of(paths), self.sizes, self.stamps, self.ident)

    def describe(self, paths: Sequence[str], *, kinds: Sequence[str], verbose: bool = False,
                 chunk: int = 256) -> Iterator[tuple[str | None, str | None]]:
        """libmagic on each file by path (in threads; see :func:`~consumer.sources.magic.describe_files`)."""
        from .magic import describe_files  # noqa: PLC0415  (libmagic loads when a file is described)

        return describe_files(paths, kinds=kinds, verbose=verbose, chunk=chunk)

    def read_ranges(self, ids: Ranges, offsets: Ranges, lengths: Ranges, out: np.ndarray, at: Ranges) -> None:
        # long: the per-file cost of a raw fetch in one loop (locals, one comparison per check, no call per file)
        """See :meth:`ByteSource.read_ranges`: per file, its kept descriptor (else an open and one ``fstat``
        checked against the listing), one ``preadv`` per range (more for reads the kernel splits or cuts short),
        then one check that the file did not change (a new descriptor: ``fstat``; a kept one: ``stat`` of its
        path against its snapshot, see the module docstring); ranges of one file next to each other in the call
        share that check (a caller reading many ranges of few files sorts them by file)."""
        ident = self.ident
        if isinstance(ids, list) and len(ids) <= FEW_RANGES:  # a small batch: plain ints, no numpy round trip
            il, ol, nl, ql = ids, list(offsets), list(lengths), list(at)
            check_few_ranges(len(self.paths), il, ol, nl, out, ql, self.sizes)
            sizes, stamps = [int(self.sizes[i]) for i in il], [int(self.stamps[i]) for i in il]
            inos = [0] * len(il) if ident is None else [int(ident[i, 1]) for i in il]
        else:
            ids, offsets, lengths, at = (np.asarray(x, dtype=np.int64) for x in (ids, offsets, lengths, at))
            check_ranges(len(self.paths), ids, offsets, lengths, out, at, self.sizes)
            il, ol, nl, ql = ids.tolist(), offsets.tolist(), lengths.tolist(), at.tolist()
            sizes, stamps = self.sizes[ids].tolist(), self.stamps[ids].tolist()
            inos = [0] * ids.size if ident is None else ident[ids, 1].tolist()
        # an inode is compared as ``st_ino & mask != ino``: mask -1 (every bit) when the listing knows inodes,
        # 0 with ino 0 when it does not (reopened from an index cache entry), so that case stays off the slow path
        mask = 0 if ident is None else -1
        fstat, preadv, isreg = os.fstat, os.preadv, stat.S_ISREG
        kept = self._kept
        call, buffer = kept.call, kept.local.buffer
        view = out.data
        # the paths' bytes as stored (no decoding per file); decoded only to name a file in an error
        names = self.paths.take(il, raw=True)
        k, total = 0, len(il)
        token = kept.enter()
        try:
            while k < total:  # one run of ranges of the same file at a time
                i, path = il[k], names[k]
                e = kept.get(i)
                st = None
                if e is None:  # not kept: open it and check it is the version listed
                    fd = _open(path, kept, token)
                    try:
                        st = fstat(fd)
                        mt, ct, now = st.st_mtime_ns, st.st_ctime_ns, st.st_size
                        size, stamp = sizes[k], stamps[k]
                        # the version listed: size, change stamp max(mtime, ctime) (version.change_stamp), inode, a
                        # regular file
                        if now != size or (mt if mt > ct else ct) != stamp or st.st_ino & mask != inos[k] or \
                                not isreg(st.st_mode):
                            _check_same(os.fsdecode(path), st, size, stamp,
                                        None if ident is None else ident[i].tolist())
                    except BaseException:
                        os.close(fd)
                        raise
                    e = kept.add(i, fd, st)
                try:
                    fd = e.fd
                    while True:
                        q, lo, m = ql[k], ol[k], nl[k]
                        try:
                            got = preadv(fd, [view[q:q + m]], lo)
                        except OSError as err:
                            raise FileChangedError(f"cannot read {os.fsdecode(path)!r} (a regular file at build "
                                                   f"time): {err.strerror}") from None
                        if got != m:
                            _read_rest(fd, os.fsdecode(path), view[q:q + m], lo, got)
                        k += 1
                        if k == total or il[k] != i:
                            break
                    if st is not None:  # just opened: once more after the reads, a write while they ran is refused
                        after = fstat(fd)
                        if after.st_ctime_ns != ct or after.st_mtime_ns != mt or after.st_size != now:
                            _check_same(os.fsdecode(path), after, size, stamp, None, during=True)
                    elif e.snapshot is None or call(path, buffer) or buffer.raw != e.snapshot:
                        _check_kept(path, e, sizes[k - 1], stamps[k - 1])
                except FileChangedError:
                    kept.drop(i, e)
                    raise
        finally:
            kept.leave(token)

    def handoff(self) -> Handoff | None:
        """None: local files reopen from their paths, sizes and stamps alone."""
        return None


def _check_same(path: str, st: os.stat_result, size: int, stamp: int, ident: list[int] | None,
                during: bool = False) -> None:
    """The opened file must be the one listed: a regular file of the same :class:`FileVersion` (size, change
    stamp and, when known, device and inode); FileChangedError saying what differs otherwise. ``during``:
    checked after the read, so a change means the file was written while it was read."""
    if during:
        raise FileChangedError(f"{path!r} changed while it was read (size {st.st_size} bytes, indexed {size}; "
                               f"modified at {change_stamp(st)} ns, indexed {stamp} ns): "
                               "its bytes are not served; rebuild the dataset")
    mode = st.st_mode
    if not stat.S_ISREG(mode):
        kind = "Is a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
        raise FileChangedError(f"cannot read {path!r}: {kind} now; it was a regular file at build time "
                               "(replaced, or swapped for a link?)")
    now = FileVersion.of(st)
    if now.size != size:
        how = "shorter than at build time" if now.size < size else "longer than at build time (appended to?)"
        raise FileChangedError(f"{path!r} is {how}: size {now.size} bytes, indexed {size}")
    if ident is not None and ident[1] and (now.dev, now.ino) != tuple(ident):
        raise FileChangedError(f"{path!r} changed since the build: it is another file now (device/inode "
                               f"{now.dev}/{now.ino}, indexed {ident[0]}/{ident[1]}): replaced or swapped")
    if stamp and now.stamp != stamp:
        raise FileChangedError(f"{path!r} changed since the build: modified at {now.stamp} "
                               f"ns, indexed {stamp} ns (rewritten in place?); rebuild the dataset")


def _open(path: bytes, kept: KeptFiles, reading: int) -> int:
    """Open ``path`` for reading (O_RDONLY, O_CLOEXEC, O_NONBLOCK); when the process is out of descriptors, the
    kept ones are closed first (those no other read than ``reading``, the caller's, may use) and the open tried
    once more. FileChangedError when it cannot be opened."""
    try:
        return os.open(path, _OPEN_FLAGS)
    except OSError as e:
        if e.errno not in (errno.EMFILE, errno.ENFILE) or not len(kept):
            raise _cannot_open(path, e) from None
    kept.close(reading)
    try:
        return os.open(path, _OPEN_FLAGS)
    except OSError as e:
        raise _cannot_open(path, e) from None


def _cannot_open(path: bytes, e: OSError) -> FileChangedError:
    return FileChangedError(f"cannot open {os.fsdecode(path)!r} (it was readable at build time): {e.strerror}")


def _check_kept(path: bytes, e: Kept, size: int, stamp: int) -> None:
    """The full check of a kept descriptor after its read, when the path's ``stat`` differs from the snapshot (or
    none was taken yet): the descriptor's file must still be the version listed (``fstat``) and the path must
    still name it (``stat``: the same inode, a regular file); FileChangedError saying what changed
    otherwise. Unchanged (the access time moved, say): a new snapshot."""
    name = os.fsdecode(path)
    try:  # the path first: a file removed or replaced also moves the change time of the one still open
        now = os.stat(path)
    except OSError as err:
        raise FileChangedError(f"{name!r} changed since the build: it is no longer there ({err.strerror}): "
                               "removed or renamed; rebuild the dataset") from None
    if not stat.S_ISREG(now.st_mode):
        _check_same(name, now, size, stamp, None)
    # the inode alone: the kept descriptor holds the file, so its number cannot be given to another file meanwhile
    # (and some overlay file systems report another device for a path than for a descriptor of the same file)
    if now.st_ino != e.ino:
        raise FileChangedError(f"{name!r} changed since the build: it is another file now (device/inode "
                               f"{now.st_dev}/{now.st_ino}, read as {e.dev}/{e.ino}): replaced or swapped")
    st = os.fstat(e.fd)
    if st.st_size != size or change_stamp(st) != stamp:
        _check_same(name, st, size, stamp, None)
    e.snapshot = path_snapshot(path, st)


def _read_rest(fd: int, path: str, into: memoryview, offset: int, done: int) -> None:
    """Finish a read the kernel returned short after ``done`` bytes (reads over 2 GiB come in parts); a file
    that ends early raises FileChangedError."""
    n, got = len(into), done
    while done < n:
        if got == 0:
            raise FileChangedError(
                f"{path!r} is shorter than at build time: wanted bytes {offset}..{offset + n}, got {done}")
        try:
            got = os.preadv(fd, [into[done:]], offset + done)
        except OSError as e:
            raise FileChangedError(f"cannot read {path!r} (a regular file at build time): {e.strerror}") from None
        done += got
