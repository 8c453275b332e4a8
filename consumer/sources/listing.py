"""One pass over a local directory corpus: paths, classes, sizes, change stamps and identities (:func:`scan_directory`).

Each class folder is walked by :class:`~consumer.sources.walk.Walk` (``os.scandir`` through the folder's
descriptor: each file's ``stat`` comes from its ``DirEntry``, one ``fstatat`` following a symlink to what it names),
and entries are visited in an order that makes the paths come out already sorted as strings (a folder ``b`` is
ordered as ``b/``), so nothing is sorted or stat'ed again afterwards. Sizes, stamps and ``(device, inode)`` pairs
become numpy arrays and the paths one :class:`~consumer.sources.paths.PathList`.

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

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .aliases import cross_class, first_names, same_file_groups
from .corpus import DEFAULT_CLASS, Corpus, as_local_path
from .paths import PathList
from .urls import is_url, local_path_of
from .walk import BadFiles, Walk, WalkPart

__all__ = ["BAD_FILE_MODES", "Listing", "ScanPlan", "check_bad_file_mode", "local_directory", "merge_listing",
           "plan_scan", "scan_directory", "walk_part"]

BAD_FILE_MODES = ("raise", "skip")


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


def walk_part(folder: str, on_bad_file: str = "raise", part: int = 0, parts: int = 1) -> WalkPart:
    """Every file below the class folder ``folder`` (the walk of :func:`scan_directory`), as arrays: what a worker
    of a cluster build runs. ``part`` of ``parts``: the files below the ``part``-th of ``parts`` contiguous runs of
    the folder's sorted entries (each part lists the folder itself again: a directory's listing cannot be split,
    its entries' ``stat`` and sub-folders can); the parts in order are the whole walk."""
    if not 0 <= part < parts:
        raise InputError(f"part must be in [0, parts={parts}), got {part!r}")
    state = Walk(check_bad_file_mode(on_bad_file) == "skip", folder)
    state.walk(folder, part, parts)
    return state.part()


Walker = Callable[[list[str], str], Iterable[list[WalkPart]]]


def _walk_here(folders: list[str], on_bad_file: str) -> Iterator[list[WalkPart]]:
    return ([walk_part(f, on_bad_file)] for f in folders)


def scan_directory(root: str, on_bad_file: str = "raise", walker: Walker | None = None) -> Listing:
    """The corpus of the directory ``root`` (absolute, normalised) with every file's stat (see the module
    docstring): sub-folders are classes; a folder without sub-folders is the one class ``"null"``. ``walker``
    walks the class folders (``walker(folders, on_bad_file)``: per folder, in order, its :class:`WalkPart` s in
    walk order; e.g. on a cluster's workers, a flat root included); None: here, one after the other. The root
    itself is listed here."""
    if walker is not None:  # a flat root is walked on the walker too: nothing of it is kept here
        plan = plan_scan(root, on_bad_file)
        return merge_listing(plan.state, plan.names, list(walker(plan.folders, on_bad_file)))
    state = Walk(check_bad_file_mode(on_bad_file) == "skip", root)
    top = _top(root)
    if not any(_entry_is_dir(e) for e in top):  # its own walk state: the root's bad entries are the part's
        flat = Walk(state.skip, root)  # (counted once, at the merge)
        flat.files(top, root if root.endswith(os.sep) else root + os.sep)
        return merge_listing(state, [DEFAULT_CLASS], [[flat.part()]])
    subdirs = _class_folders(state, root, top)
    return merge_listing(state, [d.name for d in subdirs], list(_walk_here([d.path for d in subdirs], on_bad_file)))


@dataclass
class ScanPlan:
    """What a listing on a walker walks: the class ``names`` and their ``folders`` (the root itself, class
    ``"null"``, when it has no class folders), and the root's walk ``state`` (its own bad entries)."""

    state: Walk
    names: list[str]
    folders: list[str]


def plan_scan(root: str, on_bad_file: str = "raise") -> ScanPlan:
    """List the root of a directory corpus only (what the client of a cluster listing does): its class folders, or
    itself when it has none (checked in one pass that keeps no entry); loose files beside class folders refused,
    broken links there refused or counted as :func:`scan_directory` does. :func:`merge_listing` of its ``state``
    and ``names`` with the folders' walks is the listing."""
    state = Walk(check_bad_file_mode(on_bad_file) == "skip", root)
    if not _has_folders(root):
        return ScanPlan(state, [DEFAULT_CLASS], [root])
    subdirs = _class_folders(state, root, _top(root))
    return ScanPlan(state, [d.name for d in subdirs], [d.path for d in subdirs])


def _top(root: str) -> list[os.DirEntry[str]]:
    """The root's entries (hidden ones left out), sorted by name."""
    try:
        with os.scandir(root) as it:
            return sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    except OSError as error:
        raise InputError(f"fps: cannot list the directory {root!r}: {error.strerror}") from None


def _class_folders(state: Walk, root: str, top: list[os.DirEntry[str]]) -> list[os.DirEntry[str]]:
    """The class folders among the root's entries ``top``; loose files beside them refused, a broken link or a loop
    refused or counted in ``state``."""
    loose = []
    for e in top:
        if not _entry_is_dir(e):
            if _resolves(e):
                loose.append(e.name)
            else:
                state.file(e, e.path)  # a broken link or a loop beside the class folders: refused or skipped
    if loose:
        raise InputError(
            f"fps: directory {root!r} mixes class folders with loose files {loose[:5]}; "
            "move the files into a class folder or pass an explicit list")
    return [e for e in top if _entry_is_dir(e)]


def _has_folders(root: str) -> bool:
    """Whether ``root`` holds a (non-hidden) folder: one pass over its entries that keeps none of them (a flat
    folder of 10^6 files is listed here without holding its entries)."""
    try:
        with os.scandir(root) as it:
            return any(e.name[0] != "." and _entry_is_dir(e) for e in it)
    except OSError as error:
        raise InputError(f"fps: cannot list the directory {root!r}: {error.strerror}") from None


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


def _join(lists: list[PathList]) -> PathList:
    """The paths of ``lists`` in order, in one PathList (blobs joined, offsets shifted: no path decoded)."""
    lists = [p for p in lists if len(p)]
    if len(lists) < 2:
        return lists[0] if lists else PathList.of([])
    blobs: list[np.ndarray] = []
    ats, base = [np.zeros(1, dtype=np.int64)], 0
    for p in lists:
        o = p.offsets()
        blobs += [p.packed(), np.zeros(1, dtype=np.uint8)]
        ats.append(o[1:] + base)
        base += int(o[-1])
    return PathList(np.concatenate(blobs)[:-1], np.concatenate(ats))


def merge_listing(state: Walk, names: list[str], per_class: list[list[WalkPart]]) -> Listing:
    """The class folders' parts (and the root's bad entries, in ``state``) merged: arrays in walk order, aliases
    within a class dropped (first path kept), the same file across classes refused (or, when skipping, left out:
    see :func:`~consumer.sources.aliases.cross_class`)."""
    parts = [p for folder in per_class for p in folder]
    for part in parts:
        state.bad.merge(part.bad)
    counts = [sum(len(p.sizes) for p in folder) for folder in per_class]
    cls = np.repeat(np.arange(len(names), dtype=np.int64), counts)
    all_paths = _join([p.paths for p in parts])
    sizes = np.concatenate([np.zeros(0, dtype=np.int64), *(p.sizes for p in parts)])
    stamps = np.concatenate([np.zeros(0, dtype=np.int64), *(p.stamps for p in parts)])
    ident = np.concatenate([np.zeros((0, 2), dtype=np.int64), *(p.ident for p in parts)])
    keep = first_names(cls, ident)
    aliases = len(sizes) - int(keep.size)
    groups = same_file_groups(ident[keep])
    if groups:
        keep = np.delete(keep, cross_class(state.skip, state.bad.add, state.root, all_paths, names, cls, keep, groups))
    packed = all_paths
    if keep.size != len(sizes):
        packed = PathList.of(all_paths.take(keep))
        cls, sizes, stamps, ident = cls[keep], sizes[keep], stamps[keep], ident[keep]
    corpus = Corpus.of(names, packed, cls, "dir")
    for name, n in zip(names, np.bincount(cls, minlength=len(names)).tolist()):
        if n == 0 and (not state.skip or not len(cls)):  # skipping: a class left without files is left out
            raise InputError(f"fps: class {name!r} has no files ({state.bad.summary()})")
    return Listing(corpus, packed, sizes, stamps, ident, state.bad, aliases, state.skip)
