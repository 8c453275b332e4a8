"""Local files as a :class:`~consumer.sources.base.ByteSource`: :class:`LocalFiles`.

Listing is :func:`~consumer.sources.corpus.stat_files` (one ``stat`` per file: size, change stamp, device and
inode); a read opens each file read-only (``O_RDONLY | O_CLOEXEC | O_NONBLOCK``: a FIFO put in a file's place
must not hang us) for the duration of one call, checks with one ``fstat`` that it is still the version listed
(size, change stamp ``max(mtime, ctime)`` — users cannot set the ctime back — and, when known, device and inode),
reads with one ``preadv`` per range, checks with one more ``fstat`` that nothing wrote to it meanwhile (old and
new halves are never served) and closes it. Files are never written. Anything else raises
:class:`~consumer.errors.FileChangedError` naming the file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence

import numpy as np

from ..errors import FileChangedError
from .base import FEW_RANGES, ByteSource, Handoff, Ranges, StatFiles, check_few_ranges, check_ranges
from .corpus import probe_files, stat_files
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
        """See :meth:`ByteSource.read_ranges`: per file open, one ``fstat`` checked against the listing, one
        ``preadv`` per range (more for reads the kernel splits or cuts short), one more ``fstat`` (a write while
        they ran), close; ranges of one file next to each other in the call share that open (a caller reading many
        ranges of few files sorts them by file). This loop is the per-file cost of a raw fetch, so it stays lean:
        locals, one comparison chain per ``fstat``, no call per file on the good path."""
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
        open_, fstat, preadv, close, flags, isreg = os.open, os.fstat, os.preadv, os.close, _OPEN_FLAGS, stat.S_ISREG
        view = out.data
        # the paths' bytes as stored (no decoding per file); decoded only to name a file in an error
        names = self.paths.take(il, raw=True)
        k, total = 0, len(il)
        while k < total:  # one run of ranges of the same file at a time
            i, path = il[k], names[k]
            try:
                fd = open_(path, flags)
            except OSError as e:
                raise FileChangedError(f"cannot open {os.fsdecode(path)!r} (it was readable at build time): "
                                       f"{e.strerror}") from None
            try:
                st = fstat(fd)
                mt, ct, now = st.st_mtime_ns, st.st_ctime_ns, st.st_size
                size, stamp = sizes[k], stamps[k]
                # the version listed: size, change stamp max(mtime, ctime) (version.change_stamp), inode, a file
                if now != size or (mt if mt > ct else ct) != stamp or st.st_ino & mask != inos[k] or \
                        not isreg(st.st_mode):
                    _check_same(os.fsdecode(path), st, size, stamp, None if ident is None else ident[i].tolist())
                while True:
                    q, lo, m = ql[k], ol[k], nl[k]
                    try:
                        got = preadv(fd, [view[q:q + m]], lo)
                    except OSError as e:
                        raise FileChangedError(f"cannot read {os.fsdecode(path)!r} (a regular file at build time): "
                                               f"{e.strerror}") from None
                    if got != m:
                        _read_rest(fd, os.fsdecode(path), view[q:q + m], lo, got)
                    k += 1
                    if k == total or il[k] != i:
                        break
                after = fstat(fd)  # once more after the reads: a write while they ran (old and new halves) is refused
                if after.st_ctime_ns != ct or after.st_mtime_ns != mt or after.st_size != now:
                    _check_same(os.fsdecode(path), after, size, stamp, None, during=True)
            finally:
                close(fd)

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
