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
give the same :class:`Corpus` whatever the form. The same file twice is an error.
:func:`stat_files` then checks the files with ``os.stat`` only (nothing is opened): missing files,
directories, FIFOs, devices, sockets and unreadable files are refused before anything could block.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator

from .errors import InputError, short_repr
from .fileio import stat_regular
from .remote import expand_local, is_url, local_path_of

__all__ = ["Corpus", "ClassFiles", "normalise", "stat_files", "DEFAULT_CLASS"]

DEFAULT_CLASS = "null"
PathLike = (str, os.PathLike)


class ClassFiles(BaseModel):
    """One class of the corpus: its name and its files (absolute, sorted, unique)."""

    model_config = ConfigDict(frozen=True)
    name: str
    paths: tuple[str, ...]


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

    def flat(self) -> tuple[list[str], list[int]]:
        """All paths in corpus order and the class index (position in ``classes``) of each."""
        paths: list[str] = []
        cls: list[int] = []
        for i, c in enumerate(self.classes):
            paths.extend(c.paths)
            cls.extend([i] * len(c.paths))
        return paths, cls


def _as_path(p: Any, where: str) -> str:
    if not isinstance(p, PathLike):
        raise InputError(f"{where}: expected a path (str or os.PathLike), got {short_repr(p)}")
    if is_url(p):
        local = local_path_of(p)
        if local is None:
            return p  # an object-storage or HTTP URL: kept as given (its listing and reads go through fsspec)
        p = local
    s = os.fspath(expand_local(p))
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    if not s:
        raise InputError(f"{where}: empty path ''")
    return os.path.normpath(os.path.abspath(s))


def _as_class(c: Any, where: str) -> str:
    if not isinstance(c, str) or not c:
        raise InputError(f"{where}: class names must be non-empty str, got {short_repr(c)}")
    return c


def _scan_directory(root: str) -> dict[str, list[str]]:
    subdirs, files = [], []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        (subdirs if entry.is_dir() else files).append(entry)
    if not subdirs:
        return {DEFAULT_CLASS: [e.path for e in files]}
    if files:
        names = [e.name for e in files[:5]]
        raise InputError(
            f"fps: directory {root!r} mixes class folders with loose files {names}; "
            "move the files into a class folder or pass an explicit list")
    out: dict[str, list[str]] = {}
    for d in subdirs:
        found = []
        for dirpath, dirnames, filenames in os.walk(d.path, followlinks=False):
            dirnames[:] = sorted(n for n in dirnames if not n.startswith("."))
            prefix = dirpath + os.sep  # dirpath comes from walking a normalised absolute path
            found.extend(prefix + f for f in filenames if not f.startswith("."))
        out[d.name] = found
    return out


def _group(fps: Any) -> tuple[dict[str, list[str]], str]:
    """Group any accepted form into ``{class: [paths]}`` (unsorted, unchecked) and name the form."""
    if isinstance(fps, PathLike):
        if is_url(fps) and local_path_of(fps) is None:
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


def normalise(fps: Any) -> Corpus:
    """Turn any accepted ``fps`` form into a validated :class:`Corpus` (see the module docstring)."""
    if isinstance(fps, Corpus):
        return fps
    grouped, form = _group(fps)
    if form == "dir":  # paths from one directory walk are absolute, normalised and unique already
        classes = []
        for name in sorted(grouped):
            if not grouped[name]:
                raise InputError(f"fps: class {name!r} has no files")
            classes.append(ClassFiles(name=name, paths=tuple(sorted(grouped[name]))))
        return Corpus(classes=tuple(classes), form=form)
    seen: dict[str, str] = {}
    classes = []
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
        classes.append(ClassFiles(name=name, paths=tuple(sorted(paths))))
    return Corpus(classes=tuple(classes), form=form)


def stat_files(paths: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Sizes (bytes) and mtimes (ns) of ``paths``, refusing anything that is not a readable regular file.

    Only ``os.stat`` is used, so a FIFO or a device is refused before anything could block on it.
    """
    sizes = np.empty(len(paths), dtype=np.int64)
    mtimes = np.empty(len(paths), dtype=np.int64)
    uid, groups = os.geteuid(), set(os.getgroups()) | {os.getegid()}
    for i, path in enumerate(paths):
        st = stat_regular(path, "fps")
        if not _readable(st, uid, groups):
            raise InputError(f"fps: {path!r} is not readable (permission denied)")
        sizes[i] = st.st_size
        mtimes[i] = st.st_mtime_ns
    return sizes, mtimes


def _readable(st: os.stat_result, uid: int, groups: set[int]) -> bool:
    """Read permission from the mode bits (no second system call per file; ACLs are not consulted)."""
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IRUSR)
    if st.st_gid in groups:
        return bool(st.st_mode & stat.S_IRGRP)
    return bool(st.st_mode & stat.S_IROTH)
