"""Aliases in a directory scan (:mod:`consumer.sources.listing`): a second name for a file (the same device and
inode) within one class is dropped (the first path kept); the same file under two classes is refused, or, when
skipping bad files, left out."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from ..errors import InputError
from .paths import PathList

__all__ = ["cross_class", "first_names", "same_file_groups"]

_HINT = "pass on_bad_file='skip' (--skip-bad-files) to leave such files out"


def _real_name(path: str, root: str, real_root: str) -> bool:
    """Whether ``path`` (below ``root``) reaches its file through no symlink (neither itself nor a folder on the
    way, such as a class folder that links to another one)."""
    return os.path.realpath(path) == real_root + path[len(root):]


def same_file_groups(ident: np.ndarray) -> list[np.ndarray]:
    """Positions of the entries sharing one ``(device, inode)`` (inode 0 never compared), one array per file."""
    if len(ident) < 2:
        return []
    dev, ino = np.asarray(ident[:, 0], dtype=np.int64), np.asarray(ident[:, 1], dtype=np.int64)
    order = np.lexsort((ino, dev))  # stable, by device then inode (a sort of records would compare field by field)
    d, i = dev[order], ino[order]
    same = (d[1:] == d[:-1]) & (i[1:] == i[:-1]) & (i[1:] != 0)
    if not same.any():
        return []
    starts = np.flatnonzero(np.diff(np.concatenate([[0], same.astype(np.int8), [0]])) == 1)
    ends = np.flatnonzero(np.diff(np.concatenate([[0], same.astype(np.int8), [0]])) == -1)
    return [np.sort(order[a:b + 1]) for a, b in zip(starts.tolist(), ends.tolist())]


def cross_class(skip: bool, bad: Callable[[str, str], None], root: str, paths: PathList, names: list[str],
                cls: np.ndarray, keep: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """One file under names in several classes: refused (``"raise"``: one file, one label), or, when skipping,
    the names left out (positions into ``keep``): the symlinks that point into another class when the file's
    real names are all in one class, else every name (its label is ambiguous)."""
    if not skip:
        a, b = (int(keep[i]) for i in groups[0][:2])
        raise InputError(f"fps: {paths[a]!r} and {paths[b]!r} are the same file (same device and inode: "
                         f"a symlink or a hard link) (classes {names[cls[a]]!r} and {names[cls[b]]!r}); one file "
                         f"must appear once, with one label; {_HINT}")
    drop, real_root = [], os.path.realpath(root)
    for group in groups:
        at = keep[group]
        real = {int(cls[i]) for i in at.tolist() if _real_name(paths[i], root, real_root)}
        for pos, i in zip(group.tolist(), at.tolist()):
            if len(real) == 1 and int(cls[i]) in real:
                continue
            drop.append(pos)
            bad(paths[i], "link into another class" if len(real) == 1 else
                          "same file in two classes")
    return np.array(drop, dtype=np.int64)


def first_names(cls: np.ndarray, ident: np.ndarray) -> np.ndarray:
    """Indices (sorted) of the entries to keep: all but the later names of one file (device, inode) within one
    class; inode 0 (no inode numbers) is never compared."""
    n = len(cls)
    if n < 2:
        return np.arange(n)
    c = np.asarray(cls, dtype=np.int64)
    dev, ino = np.asarray(ident[:, 0], dtype=np.int64), np.asarray(ident[:, 1], dtype=np.int64)
    order = np.lexsort((ino, dev, c))  # stable, by class, device, inode
    c, dev, ino = c[order], dev[order], ino[order]
    repeat = np.zeros(n, dtype=bool)
    repeat[1:] = (c[1:] == c[:-1]) & (dev[1:] == dev[:-1]) & (ino[1:] == ino[:-1]) & (ino[1:] != 0)
    if not repeat.any():
        return np.arange(n)
    drop = order[repeat]  # stable order: the first path of each file comes first and is kept
    keep = np.ones(n, dtype=bool)
    keep[drop] = False
    return np.flatnonzero(keep)
