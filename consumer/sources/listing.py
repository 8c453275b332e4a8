"""One pass over a local directory corpus: paths, classes, sizes, change stamps and identities (:func:`scan_directory`).

The walk is ``os.scandir``: each file's ``stat`` comes from its ``DirEntry`` (one ``stat`` call, following a
symlink to what it names), and entries are visited in an order that makes the paths come out already sorted as
strings (a folder ``b`` is ordered as ``b/``), so nothing is sorted or stat'ed again afterwards. Sizes, stamps and
``(device, inode)`` pairs become numpy arrays and the paths one :class:`~consumer.sources.paths.PathList`.

What a real folder holds besides regular files (``on_bad_file``):

- ``"raise"`` (the default): the first broken symlink, symlink loop, special file (FIFO, socket, device) or folder
  that cannot be listed is an :class:`~consumer.errors.InputError` naming it and the ``on_bad_file="skip"``
  option. Readability is proven at the first read (libmagic, the reader's version check), not by an ``open``
  per file here.
- ``"skip"``: those are left out, and so is a file that cannot be opened (each file is opened once, as
  :func:`~consumer.sources.corpus.stat_files` does); :class:`BadFiles` counts them by reason and keeps a few
  examples.

A second name for a file already in the same class (a hard link, a symlink to it: the same device and inode) is an
alias: the first name by path is kept, the others are counted (:attr:`Listing.aliases`) and nothing is refused.
The same file under two classes stays refused (one file, one label). Explicit lists of paths do not come here:
they stay strict.
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
from dataclasses import dataclass, field
from stat import S_ISREG

import numpy as np

from ..errors import InputError
from .corpus import DEFAULT_CLASS, Corpus, as_local_path
from .paths import PathList
from .urls import is_url, local_path_of

__all__ = ["BAD_FILE_MODES", "BadFiles", "Listing", "check_bad_file_mode", "local_directory", "scan_directory"]

BAD_FILE_MODES = ("raise", "skip")
_EXAMPLES = 5  # bad files named per reason
_HINT = "pass on_bad_file='skip' (--skip-bad-files) to leave such files out"
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


@dataclass
class BadFiles:
    """The entries a scan left out: ``counts`` per reason and up to a few ``examples`` (path, reason)."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: list[tuple[str, str]] = field(default_factory=list)

    def add(self, path: str, reason: str) -> None:
        """Count ``path`` under ``reason`` (kept as an example while there are few of that reason)."""
        n = self.counts.get(reason, 0)
        self.counts[reason] = n + 1
        if n < _EXAMPLES:
            self.examples.append((path, reason))

    @property
    def total(self) -> int:
        """How many entries were left out."""
        return sum(self.counts.values())

    def summary(self) -> str:
        """One line: the total and the count of each reason, e.g. ``13 bad files skipped (broken symlink: 13)``."""
        reasons = ", ".join(f"{r}: {n}" for r, n in sorted(self.counts.items()))
        return f"{self.total} bad file(s) skipped ({reasons})"


@dataclass
class Listing:
    """A scanned directory corpus: the :class:`Corpus`, and per file (corpus order) its path, size, change stamp
    (``max(mtime, ctime)`` in ns) and ``(device, inode)``; what was left out (``bad``) and the ``aliases`` dropped;
    ``probed``: every file was opened once (``on_bad_file="skip"``)."""

    corpus: Corpus
    paths: PathList
    sizes: np.ndarray
    stamps: np.ndarray
    ident: np.ndarray
    bad: BadFiles
    aliases: int
    probed: bool

    def report(self) -> dict[str, object]:
        """What ``build_info`` records: ``skipped`` (counts by reason), ``skipped_examples``, ``aliases``."""
        return {"skipped": dict(self.bad.counts), "skipped_examples": [list(e) for e in self.bad.examples],
                "aliases": self.aliases}


class _Walk:
    """The accumulating state of one walk (lists of plain ints, turned into arrays once at the end)."""

    def __init__(self, skip: bool, root: str):
        self.skip, self.bad = skip, BadFiles()
        self.root, self.real_root = root, os.path.realpath(root)
        self.paths: list[str] = []
        self.sizes: list[int] = []
        self.mtimes: list[int] = []
        self.ctimes: list[int] = []
        self.devs: list[int] = []
        self.inos: list[int] = []

    def refuse(self, path: str, reason: str, detail: str | None) -> None:
        """Skip ``path`` (counted) or raise, naming the option that would skip it."""
        if self.skip:
            self.bad.add(path, reason)
            return
        raise InputError(f"fps: cannot use {path!r} found in the directory scan: {detail} ({reason}); {_HINT}")

    def file(self, entry: os.DirEntry[str]) -> None:
        """Add one non-directory entry (or refuse it)."""
        path = entry.path
        try:
            st = entry.stat()
        except OSError as e:
            if e.errno == errno.ELOOP:
                self.refuse(path, "symlink loop", e.strerror)
            elif e.errno == errno.ENOENT:
                self.refuse(path, "broken symlink", e.strerror)
            else:
                self.refuse(path, "unreadable", e.strerror)
            return
        if not stat_module.S_ISREG(st.st_mode):
            self.refuse(path, "special file", "not a regular file (a FIFO, socket or device)")
            return
        if (self.skip or st.st_size == 0) and not self._probe(path, st.st_size):
            return
        self.paths.append(path)
        self.sizes.append(st.st_size)
        self.mtimes.append(st.st_mtime_ns)
        self.ctimes.append(st.st_ctime_ns)
        self.devs.append(st.st_dev)
        self.inos.append(st.st_ino)

    def _probe(self, path: str, size: int) -> bool:
        """Open the file once (and read a byte of one reporting size 0: procfs/sysfs); False if it was skipped."""
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError as e:
            self.refuse(path, "unreadable", e.strerror)
            return False
        try:
            data = os.read(fd, 1) if size == 0 else b""
        except OSError as e:
            self.refuse(path, "unreadable", e.strerror)
            return False
        finally:
            os.close(fd)
        if data:
            self.refuse(path, "special file", "reports size 0 but has content (procfs/sysfs-like)")
            return False
        return True

    def files(self, entries: list[os.DirEntry[str]]) -> None:
        """Add a run of non-directory entries: in bulk (one list per field) when every one is a regular file of
        non-zero size that needs no open, else one at a time (:meth:`file`)."""
        if not self.skip:
            try:
                sts = [e.stat() for e in entries]
            except OSError:
                sts = []
            if sts and all(S_ISREG(st.st_mode) and st.st_size for st in sts):
                self.paths.extend([e.path for e in entries])
                self.sizes.extend([st.st_size for st in sts])
                self.mtimes.extend([st.st_mtime_ns for st in sts])
                self.ctimes.extend([st.st_ctime_ns for st in sts])
                self.devs.extend([st.st_dev for st in sts])
                self.inos.extend([st.st_ino for st in sts])
                return
        for e in entries:
            self.file(e)

    def walk(self, folder: str) -> None:
        """Every file below ``folder`` (hidden entries skipped; symlinks to folders are not followed), in path
        order: a folder ``b`` sorts as ``b/``, so its files come where their paths sort."""
        try:
            with os.scandir(folder) as it:
                entries = [e for e in it if e.name[0] != "."]
        except OSError as error:
            self.refuse(folder, "unreadable", f"cannot list the directory: {error.strerror}")
            return
        keyed = []
        for e in entries:
            try:
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                keyed.append((e.name + "/", e))
            elif e.is_symlink() and _is_dir_link(e.path):
                continue  # a link to a folder inside a class: not followed (as os.walk(followlinks=False))
            else:
                keyed.append((e.name, e))
        keyed.sort(key=_first)
        run: list[os.DirEntry[str]] = []
        for key, e in keyed:
            if key[-1] == "/":
                self.files(run)
                run = []
                self.walk(e.path)
            else:
                run.append(e)
        self.files(run)


def _first(pair: tuple[str, os.DirEntry[str]]) -> str:
    return pair[0]


def _is_dir_link(path: str) -> bool:
    try:
        return stat_module.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def check_bad_file_mode(on_bad_file: object) -> str:
    """``on_bad_file`` if it is ``"raise"`` or ``"skip"``; InputError otherwise."""
    if not isinstance(on_bad_file, str) or on_bad_file not in BAD_FILE_MODES:
        raise InputError(f"on_bad_file must be one of {list(BAD_FILE_MODES)}, got {on_bad_file!r}")
    return on_bad_file


def local_directory(fps: object) -> str | None:
    """The absolute, normalised path of ``fps`` when it names a local directory (a path or a ``file://`` URL);
    None for anything else (lists, dicts, files, object-storage URLs)."""
    if not isinstance(fps, (str, os.PathLike)):
        return None
    if is_url(fps) and local_path_of(str(fps)) is None:
        return None
    root = as_local_path(fps, "fps")
    return root if os.path.isdir(root) else None


def scan_directory(root: str, on_bad_file: str = "raise") -> Listing:
    """The corpus of the directory ``root`` (absolute, normalised) with every file's stat (see the module
    docstring): sub-folders are classes; a folder without sub-folders is the one class ``"null"``."""
    check_bad_file_mode(on_bad_file)
    state = _Walk(on_bad_file == "skip", root)
    try:
        with os.scandir(root) as it:
            top = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    except OSError as error:
        raise InputError(f"fps: cannot list the directory {root!r}: {error.strerror}") from None
    subdirs = [e for e in top if _entry_is_dir(e)]
    names: list[str] = []
    counts: list[int] = []
    if not subdirs:
        for e in top:
            state.file(e)
        names, counts = [DEFAULT_CLASS], [len(state.paths)]
    else:
        loose = []
        for e in top:
            if not _entry_is_dir(e):
                if _resolves(e):
                    loose.append(e.name)
                else:
                    state.file(e)  # a broken link or a loop beside the class folders: refused or skipped
        if loose:
            raise InputError(
                f"fps: directory {root!r} mixes class folders with loose files {loose[:5]}; "
                "move the files into a class folder or pass an explicit list")
        for d in subdirs:
            before = len(state.paths)
            state.walk(d.path)
            names.append(d.name)
            counts.append(len(state.paths) - before)
    return _listing(state, names, counts)


def _resolves(e: os.DirEntry[str]) -> bool:
    try:
        e.stat()
    except OSError:
        return False
    return True


def _entry_is_dir(e: os.DirEntry[str]) -> bool:
    try:
        return e.is_dir()
    except OSError:
        return False


def _listing(state: _Walk, names: list[str], counts: list[int]) -> Listing:
    """Arrays of the walk, aliases within a class dropped (first path kept), the same file across classes refused
    (or, when skipping, left out: see :func:`_cross_class`)."""
    cls = np.repeat(np.arange(len(names), dtype=np.int64), counts)
    sizes = np.array(state.sizes, dtype=np.int64)
    stamps = np.maximum(np.array(state.mtimes, dtype=np.int64), np.array(state.ctimes, dtype=np.int64))
    ident = np.empty((len(sizes), 2), dtype=np.int64)
    ident[:, 0] = np.array(state.devs, dtype=np.uint64).astype(np.int64)
    ident[:, 1] = np.array(state.inos, dtype=np.uint64).astype(np.int64)
    keep = _first_names(cls, ident)
    aliases = len(sizes) - int(keep.size)
    groups = _same_file_groups(ident[keep])
    if groups:
        keep = np.delete(keep, _cross_class(state, names, cls, keep, groups))
    paths: list[str] | PathList = state.paths
    if keep.size != len(sizes):
        paths = [state.paths[i] for i in keep.tolist()]
        cls, sizes, stamps, ident = cls[keep], sizes[keep], stamps[keep], ident[keep]
    packed = PathList.of(paths)
    corpus = Corpus.of(names, packed, cls, "dir")
    for name, n in zip(names, np.bincount(cls, minlength=len(names)).tolist()):
        if n == 0 and (not state.skip or not len(cls)):  # skipping: a class left without files is left out
            raise InputError(f"fps: class {name!r} has no files ({state.bad.summary()})")
    return Listing(corpus, packed, sizes, stamps, ident, state.bad, aliases, state.skip)


def _real_name(path: str, root: str, real_root: str) -> bool:
    """Whether ``path`` (below ``root``) reaches its file through no symlink (neither itself nor a folder on the
    way, such as a class folder that links to another one)."""
    return os.path.realpath(path) == real_root + path[len(root):]


def _same_file_groups(ident: np.ndarray) -> list[np.ndarray]:
    """Positions of the entries sharing one ``(device, inode)`` (inode 0 never compared), one array per file."""
    if len(ident) < 2:
        return []
    keys = np.ascontiguousarray(ident).view(np.dtype([("dev", np.int64), ("ino", np.int64)])).ravel()
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    same = (ordered[1:] == ordered[:-1]) & (ordered["ino"][1:] != 0)
    if not same.any():
        return []
    starts = np.flatnonzero(np.diff(np.concatenate([[0], same.astype(np.int8), [0]])) == 1)
    ends = np.flatnonzero(np.diff(np.concatenate([[0], same.astype(np.int8), [0]])) == -1)
    return [np.sort(order[a:b + 1]) for a, b in zip(starts.tolist(), ends.tolist())]


def _cross_class(state: _Walk, names: list[str], cls: np.ndarray, keep: np.ndarray,
                 groups: list[np.ndarray]) -> np.ndarray:
    """One file under names in several classes: refused (``"raise"``: one file, one label), or, when skipping,
    the names left out (positions into ``keep``): the symlinks that point into another class when the file's
    real names are all in one class, else every name (its label is ambiguous)."""
    if not state.skip:
        a, b = (int(keep[i]) for i in groups[0][:2])
        raise InputError(f"fps: {state.paths[a]!r} and {state.paths[b]!r} are the same file (same device and inode: "
                         f"a symlink or a hard link) (classes {names[cls[a]]!r} and {names[cls[b]]!r}); one file "
                         f"must appear once, with one label; {_HINT}")
    drop = []
    for group in groups:
        at = keep[group]
        real = {int(cls[i]) for i in at.tolist() if _real_name(state.paths[i], state.root, state.real_root)}
        for pos, i in zip(group.tolist(), at.tolist()):
            if len(real) == 1 and int(cls[i]) in real:
                continue
            drop.append(pos)
            state.bad.add(state.paths[i], "link into another class" if len(real) == 1 else
                          "same file in two classes")
    return np.array(drop, dtype=np.int64)


def _first_names(cls: np.ndarray, ident: np.ndarray) -> np.ndarray:
    """Indices (sorted) of the entries to keep: all but the later names of one file (device, inode) within one
    class; inode 0 (no inode numbers) is never compared."""
    n = len(cls)
    if n < 2:
        return np.arange(n)
    keys = np.empty(n, dtype=[("cls", np.int64), ("dev", np.int64), ("ino", np.int64)])
    keys["cls"], keys["dev"], keys["ino"] = cls, ident[:, 0], ident[:, 1]
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    repeat = np.zeros(n, dtype=bool)
    repeat[1:] = (ordered[1:] == ordered[:-1]) & (ordered["ino"][1:] != 0)
    if not repeat.any():
        return np.arange(n)
    drop = order[repeat]  # stable order: the first path of each file comes first and is kept
    keep = np.ones(n, dtype=bool)
    keep[drop] = False
    return np.flatnonzero(keep)
