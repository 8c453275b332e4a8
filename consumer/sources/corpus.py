"""Input forms F0–F3 and directories, normalised into one validated, frozen IR (:class:`Corpus`).

Accepted ``fps`` forms (``str`` and ``pathlib.Path`` paths alike):

- **F0** ``["a.bin", "b.bin"]``: one class, named ``"null"`` as in gperc;
- **F1** ``[{"a.bin": "cat"}, {"b.bin": "dog"}]``: one ``{path: class}`` pair per dict;
- **F2** ``{"a.bin": "cat", "b.bin": "dog"}``;
- **F3** ``{"cat": ["a.bin"], "dog": ["b.bin"]}``;
- **a directory**: each sub-folder is a class holding every file below it (image-folder layout);
  a directory without sub-folders is one class ``"null"``. Hidden entries (``.name``) are skipped.

Every form is checked element by element (not only the first, as gperc did). Paths become absolute
and normalised; classes are sorted by name and paths within a class by path, so the same files
give the same :class:`Corpus` whatever the form. The same path twice is an error, and so is a path with
a NUL byte; a directory scan refuses entries it cannot classify (a symlink loop, no permission) with an
:class:`InputError` naming them instead of skipping them.

:func:`stat_files` then checks every file: ``os.stat`` first, so missing files, directories, FIFOs,
devices and sockets are refused before anything could block; then one ``open`` (non-blocking, closed at
once) proves it is readable, for root too. One file, one label: the same file reached under two paths
(a symlink, a hard link) is refused by device and inode, naming both paths. A regular file that reports
size 0 is probed for one byte: procfs/sysfs files (``/proc/self/status``) report 0 but have content, and
are refused rather than read as empty.
"""

from __future__ import annotations

import os
import stat as stat_module
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator

from ..errors import InputError, short_repr
from ..util.fileio import check_path, stat_regular
from .paths import PathList
from .urls import expand_local, is_url, local_path_of
from .version import change_stamps

__all__ = ["DEFAULT_CLASS", "ClassFiles", "Corpus", "as_local_path", "corpus_of_walk", "normalise", "probe_files",
           "refuse_same_files", "stat_files"]

DEFAULT_CLASS = "null"
PathLike = (str, os.PathLike)


class ClassFiles(BaseModel):
    """One class of the corpus: its name and its files (absolute, sorted, unique), a :class:`PathList` (the
    classes of one corpus are slices of one blob: 10^7 paths take ~0.45 GB instead of ~1 GB of ``str``)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    name: str
    paths: PathList

    @field_validator("paths", mode="before")
    @classmethod
    def _packed(cls, v: Any) -> PathList:
        return PathList.of(v if isinstance(v, PathList) else list(v))


class Corpus(BaseModel):
    """The normalised corpus: classes sorted by name, each with its sorted absolute paths.

    ``form`` records which input form it came from (``F0``..``F3`` or ``dir``) for reporting only;
    it never changes anything downstream.
    """

    model_config = ConfigDict(frozen=True)
    classes: tuple[ClassFiles, ...]
    form: str

    @field_validator("classes")
    @classmethod
    def _ordered_and_unique(cls, v: tuple[ClassFiles, ...]) -> tuple[ClassFiles, ...]:
        names = [c.name for c in v]
        if names != sorted(names) or len(set(names)) != len(names):
            raise ValueError(f"classes must be unique and sorted, got {short_repr(names)}")
        return v

    @property
    def class_names(self) -> list[str]:
        """Class names in order."""
        return [c.name for c in self.classes]

    @property
    def n_files(self) -> int:
        """Total number of files."""
        return sum(len(c.paths) for c in self.classes)

    @classmethod
    def of(cls, names: list[str], paths: Sequence[str], doc_class: np.ndarray, form: str) -> Corpus:
        """The corpus of ``paths`` in corpus order, path ``i`` in class ``names[doc_class[i]]`` (``doc_class``
        non-decreasing); classes without a path are left out. One ``searchsorted``, no scan per class."""
        codes = np.asarray(doc_class)  # int32 or int64 as given: no widened copy of 10^7 codes
        bounds = np.searchsorted(codes, np.arange(len(names) + 1, dtype=codes.dtype))
        packed = PathList.of(paths)
        return cls(classes=tuple(ClassFiles(name=n, paths=packed[int(bounds[k]):int(bounds[k + 1])])
                                 for k, n in enumerate(names) if bounds[k + 1] > bounds[k]), form=form)

    def flat(self) -> tuple[PathList, list[int]]:
        """All paths in corpus order (one :class:`PathList`, sharing the classes' blob when they are slices of
        one, as every constructor here makes them) and the class index (position in ``classes``) of each."""
        joined: PathList | None = self.classes[0].paths if self.classes else None
        for c in self.classes[1:]:
            joined = joined.joined(c.paths) if joined is not None else None
        paths = joined if joined is not None else PathList.concat([c.paths for c in self.classes])
        cls: list[int] = []
        for i, c in enumerate(self.classes):
            cls.extend([i] * len(c.paths))
        return paths, cls


def _corpus(grouped: dict[str, list[str]], form: str) -> Corpus:
    """The corpus of ``{class: sorted paths}``: all paths packed into one :class:`PathList`, each class a slice
    of it; the lists are emptied (so their ``str`` objects can go)."""
    names = sorted(grouped)
    packed = PathList.concat([grouped[n] for n in names])
    classes, at = [], 0
    for name in names:
        n = len(grouped[name])
        classes.append(ClassFiles(name=name, paths=packed[at:at + n]))
        grouped[name].clear()
        at += n
    return Corpus(classes=tuple(classes), form=form)


def as_local_path(p: object, where: str) -> str:
    """``p`` (a path or a URL) as an absolute, normalised path (a ``file://`` URL as its local path; any other URL
    kept as given); InputError for what is not a path."""
    return _as_path(p, where)


def _as_path(p: object, where: str) -> str:
    if not isinstance(p, PathLike):
        raise InputError(f"{where}: expected a path (str or os.PathLike), got {short_repr(p)}")
    if is_url(p):
        local = local_path_of(str(p))
        if local is None:
            return str(p)  # an object-storage or HTTP URL: kept as given (listed and read through fsspec)
        p = local
    s = check_path(expand_local(p), where)
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    if not s:
        raise InputError(f"{where}: empty path ''")
    return os.path.normpath(os.path.abspath(s))


def _as_class(c: object, where: str) -> str:
    if not isinstance(c, str) or not c:
        raise InputError(f"{where}: class names must be non-empty str, got {short_repr(c)}")
    return c


def _walk_error(error: OSError) -> None:
    """``os.walk``'s ``onerror``: a folder that cannot be listed is an error, not a silently missing subtree."""
    raise InputError(f"fps: cannot list the directory {error.filename!r}: {error.strerror}")


def _scan_directory(root: str) -> dict[str, list[str]]:
    subdirs: list[os.DirEntry[str]] = []
    files: list[os.DirEntry[str]] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as e:
        raise InputError(f"fps: cannot list the directory {root!r}: {e.strerror}") from None
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            is_dir = entry.is_dir()
            if not is_dir and entry.is_symlink():
                os.stat(entry.path)  # a broken link or a symlink loop fails here, naming the entry below
        except OSError as e:
            raise InputError(f"fps: cannot read {entry.path!r} in the directory {root!r}: {e.strerror}") from None
        (subdirs if is_dir else files).append(entry)
    if not subdirs:
        return {DEFAULT_CLASS: [e.path for e in files]}
    if files:
        names = [e.name for e in files[:5]]
        raise InputError(
            f"fps: directory {root!r} mixes class folders with loose files {names}; "
            "move the files into a class folder or pass an explicit list")
    out: dict[str, list[str]] = {}
    for d in subdirs:
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(d.path, onerror=_walk_error, followlinks=False):
            dirnames[:] = sorted(n for n in dirnames if not n.startswith("."))
            prefix = dirpath + os.sep  # dirpath comes from walking a normalised absolute path
            found.extend(prefix + f for f in filenames if not f.startswith("."))
        out[d.name] = found
    return out


def _group(fps: object) -> tuple[dict[str, list[str]], str]:
    """Group any accepted form into ``{class: [paths]}`` (unsorted, unchecked) and name the form."""
    if isinstance(fps, PathLike):
        if is_url(fps) and local_path_of(str(fps)) is None:
            raise InputError(f"fps: a URL prefix is listed by the build (Consumer), not here: {fps!r}")
        root = _as_path(fps, "fps")
        if not os.path.isdir(root):
            raise InputError(f"fps: a single path must be a directory, got {os.fspath(fps)!r}")
        return _scan_directory(root), "dir"
    if isinstance(fps, (list, tuple)):
        if not fps:
            raise InputError("fps: empty list, no files given")
        if all(isinstance(x, PathLike) for x in fps):
            return {DEFAULT_CLASS: list(fps)}, "F0"
        if all(isinstance(x, dict) for x in fps):
            grouped: dict[str, list[str]] = {}
            for i, d in enumerate(fps):
                if len(d) != 1:
                    raise InputError(f"fps[{i}]: F1 items must be one {{path: class}} pair, got {short_repr(d)}")
                (p, c), = d.items()
                grouped.setdefault(_as_class(c, f"fps[{i}]"), []).append(p)
            return grouped, "F1"
        kinds = sorted({"path" if isinstance(x, PathLike) else "dict" if isinstance(x, dict) else type(x).__name__
                        for x in fps})
        raise InputError(
            f"fps: a list must hold only paths (F0) or only {{path: class}} dicts (F1), found a mix of {kinds}")
    if isinstance(fps, dict):
        if not fps:
            raise InputError("fps: empty dict, no files given")
        values = list(fps.values())
        if all(isinstance(v, (list, tuple)) for v in values):
            return {_as_class(c, "fps key"): list(v) for c, v in fps.items()}, "F3"
        if all(isinstance(v, str) for v in values):
            grouped = {}
            for p, c in fps.items():
                grouped.setdefault(_as_class(c, f"fps[{short_repr(p)}]"), []).append(p)
            return grouped, "F2"
        kinds = sorted({"list" if isinstance(v, (list, tuple)) else type(v).__name__ for v in values})
        raise InputError(
            "fps: a dict must map path -> class name (F2) or class name -> list of paths (F3), "
            f"found values of types {kinds}")
    raise InputError(
        f"fps must be a list, a dict or a directory path, got {type(fps).__name__}: {short_repr(fps)}")


def corpus_of_walk(grouped: dict[str, list[str]]) -> Corpus:
    """The corpus of one directory walk, ``{class: [paths]}``: its paths are absolute, normalised and unique
    already, so they are only sorted (each class list in place), then packed into one :class:`PathList` and the
    lists emptied: the walk's ``str`` objects go as soon as the caller drops them."""
    for name in sorted(grouped):
        if not grouped[name]:
            raise InputError(f"fps: class {name!r} has no files")
        grouped[name].sort()
    return _corpus(grouped, "dir")


def normalise(fps: object) -> Corpus:
    """Turn any accepted ``fps`` form into a validated :class:`Corpus` (see the module docstring)."""
    if isinstance(fps, Corpus):
        return fps
    grouped, form = _group(fps)
    if form == "dir":
        return corpus_of_walk(grouped)
    seen: dict[str, str] = {}
    checked: dict[str, list[str]] = {}
    for name in sorted(grouped):
        paths = []
        for i, p in enumerate(grouped[name]):
            ap = _as_path(p, f"fps (class {name!r}, item {i})")
            if ap in seen:
                raise InputError(
                    f"fps: file {ap!r} given twice (classes {seen[ap]!r} and {name!r}); each file must appear once")
            seen[ap] = name
            paths.append(ap)
        if not paths:
            raise InputError(f"fps: class {name!r} has no files")
        checked[name] = sorted(paths)
    del seen
    return _corpus(checked, form)


def stat_files(paths: Sequence[str], classes: list[str] | None = None, *, check_open: np.ndarray | None = None,
               identity: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sizes (bytes) and change stamps (ns) of ``paths``, refusing anything that is not a readable regular file.

    The change stamp is ``max(st_mtime_ns, st_ctime_ns)``: the change time cannot be set back by users
    (``touch -r`` restores an mtime, not a ctime), so a file rewritten in place with its size and mtime
    restored still gets a new stamp. ``identity`` (an int64 ``[N, 2]`` array, filled when given) receives
    each file's ``(device, inode)``, which the reader compares on every read.

    Per file: ``os.stat`` (a FIFO or a device is refused before anything could block on it), then one
    non-blocking ``open`` + ``close`` to prove readability (permission bits, ACLs, root without
    ``CAP_DAC_OVERRIDE``, root-squashed mounts alike). Refused with :class:`InputError` naming the
    path(s): the same file (device + inode) under two paths (``classes``, one name per path, only makes
    the message name the labels), and a file that reports size 0 yet yields a byte (procfs/sysfs).

    ``check_open`` (bool per path, default all True) limits the open to some files, e.g. those a catalog
    has not seen with the same stat before: the open roughly doubles a warm reopen on slow file systems.
    Files reporting size 0 are always opened and probed.
    """
    sizes = np.empty(len(paths), dtype=np.int64)
    mtimes = np.empty(len(paths), dtype=np.int64)
    if check_open is not None:
        check_open = np.asarray(check_open, dtype=bool)
        if check_open.shape != (len(paths),):
            raise InputError(f"check_open must hold one bool per path ({len(paths)}), got shape {check_open.shape}")
    ident = identity if identity is not None else np.empty((len(paths), 2), dtype=np.int64)
    ctimes = np.empty(len(paths), dtype=np.int64)
    stat_, is_regular = os.stat, stat_module.S_ISREG
    for i, path in enumerate(paths):
        try:  # the common case in a few calls; anything else gets stat_regular's error naming the path
            st = stat_(path)
            if not is_regular(st.st_mode):
                raise OSError
        except (OSError, ValueError, TypeError):
            st = stat_regular(path, "fps")
        if check_open is None or st.st_size == 0 or check_open[i]:
            _probe(path, st)
        sizes[i], mtimes[i], ctimes[i] = st.st_size, st.st_mtime_ns, st.st_ctime_ns
        ident[i, 0], ident[i, 1] = st.st_dev, st.st_ino
    change_stamps(mtimes, ctimes, out=mtimes)
    refuse_same_files(paths, classes, ident)
    return sizes, mtimes


def refuse_same_files(paths: Sequence[str], classes: list[str] | None, ident: np.ndarray) -> None:
    """InputError for the first path whose ``(device, inode)`` an earlier path has (inode 0: a file system
    without inode numbers, never compared); what :func:`stat_files` checks, for callers that stat in parts."""
    if len(ident) < 2:
        return
    keys = np.ascontiguousarray(ident).view(np.dtype([("dev", np.int64), ("ino", np.int64)])).ravel()
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    repeat = np.flatnonzero((ordered[1:] == ordered[:-1]) & (ordered["ino"][1:] != 0))
    if repeat.size:
        second = order[repeat + 1]
        at = int(np.argmin(second))  # the earliest path that repeats a file (as a scan in order finds it)
        dup = keys[int(second[at])]
        first = int(np.flatnonzero(keys == dup)[0])
        raise InputError(_same_file_message(paths, classes, first, int(second[at])))


def probe_files(paths: Sequence[str], sizes: np.ndarray) -> None:
    """Open every file once (readability, and a one-byte probe of files reporting size 0): what
    :func:`stat_files` does when ``check_open`` is left out, for callers that stat first and decide later
    (a build whose index cache hit needs no open: the files passed this when the entry was made)."""
    for path, size in zip(paths, sizes.tolist()):
        _probe(path, _SizeOnly(size))


class _SizeOnly:
    """The one field of a stat result :func:`_probe` reads."""

    def __init__(self, size: int):
        self.st_size = size


def _same_file_message(paths: Sequence[str], classes: list[str] | None, first: int, second: int) -> str:
    labels = f" (classes {classes[first]!r} and {classes[second]!r})" if classes is not None else ""
    return (f"fps: {paths[first]!r} and {paths[second]!r} are the same file (same device and inode: a symlink "
            f"or a hard link){labels}; one file must appear once, with one label")


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


def _probe(path: str, st: os.stat_result | _SizeOnly) -> None:
    """Open ``path`` once (readability); for a file reporting size 0, also read one byte."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except PermissionError:
        raise InputError(f"fps: {path!r} is not readable (permission denied)") from None
    except OSError as e:
        raise InputError(f"fps: cannot open {path!r}: {e.strerror}") from None
    try:
        if st.st_size == 0:
            try:
                data = os.read(fd, 1)
            except OSError as e:
                raise InputError(f"fps: cannot read {path!r}: {e.strerror}") from None
            if data:
                raise InputError(
                    f"fps: {path!r} reports size 0 but has content (a procfs/sysfs-like file whose size is not "
                    "known in advance); refused rather than read as empty")
    finally:
        os.close(fd)
