"""Exact duplicates: groups of files with equal content (equal sha256), and a deduplication plan.

Corpus order is the order of ``file_id``: classes sorted by name, then paths sorted within a class.
The rule of :func:`dedupe_plan` is stable and simple: in every group of equal content, the file that
comes first in corpus order (the smallest class name, then the smallest path) is kept and every later
copy is dropped. So the result does not depend on the input form, on the catalog or on timing; a file
filed under two classes survives in the class whose name sorts first, and since the dropped copies
are gone before any selection, ``where()``, ``split()`` and loaders never see the same bytes twice and
a split cannot put one content on both sides.

Both functions take plain per-file lists (paths, class names, sha256 hex digests, sizes): the caller
gets the digests from the catalog (:meth:`consumer.catalog.catalog.Catalog.ensure_content`, then
:meth:`~consumer.catalog.catalog.Catalog.content_rows`). Grouping is one ``numpy.unique`` over the digests;
only files that have a copy become Python objects.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..errors import FileChangedError, InputError, short_repr

__all__ = ["DedupePlan", "DuplicateGroup", "DuplicateMember", "catalog_sha256s", "dedupe_plan", "find_duplicates"]

_HEX64 = re.compile(r"[0-9a-f]{64}")


class DuplicateMember(NamedTuple):
    """One file of a duplicate group: its index in the inputs (``file_id``), path and class."""

    file_id: int
    path: str
    cls: str


@dataclass(frozen=True)
class DuplicateGroup:
    """Files with equal content, in corpus order (the first one is the one a dedupe keeps)."""

    sha256: str
    size: int
    members: tuple[DuplicateMember, ...]

    @property
    def classes(self) -> list[str]:
        """The distinct classes of the members, sorted."""
        return sorted({m.cls for m in self.members})

    @property
    def cross_class(self) -> bool:
        """Whether the same content is filed under more than one class (label noise, split leakage)."""
        return len(self.classes) > 1

    def as_dict(self) -> dict:
        """JSON-able form: sha256, size, cross_class and the members as ``{file_id, path, class}``."""
        return {"sha256": self.sha256, "size": self.size, "cross_class": self.cross_class,
                "members": [{"file_id": m.file_id, "path": m.path, "class": m.cls} for m in self.members]}


@dataclass(frozen=True)
class DedupePlan:
    """What :func:`dedupe_plan` keeps and drops (file ids sorted ascending) and why."""

    keep: np.ndarray
    drop: np.ndarray
    groups: tuple[DuplicateGroup, ...]
    dropped_bytes: int

    @property
    def cross_class_groups(self) -> int:
        """Number of groups whose copies span several classes."""
        return sum(g.cross_class for g in self.groups)

    def report(self, include_dropped: bool = True) -> dict:
        """JSON-able summary: files kept and dropped, bytes dropped, groups, cross-class groups and
        (with ``include_dropped``) every dropped file with the path of the copy that was kept."""
        out: dict[str, object] = {"files": int(self.keep.size + self.drop.size), "kept": int(self.keep.size),
               "dropped_files": int(self.drop.size), "dropped_bytes": int(self.dropped_bytes),
               "groups": len(self.groups), "cross_class_groups": self.cross_class_groups}
        if include_dropped:
            out["dropped"] = [{"file_id": m.file_id, "path": m.path, "class": m.cls, "kept": g.members[0].path,
                               "kept_class": g.members[0].cls} for g in self.groups for m in g.members[1:]]
        return out


def catalog_sha256s(catalog, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray, *,
                    verbose: bool = False, compute: Any = None) -> list[str]:
    """The sha256 of every file, from ``catalog`` (a :class:`~consumer.catalog.catalog.Catalog`): the content
    pass runs first for the files that lack it (:meth:`~consumer.catalog.catalog.Catalog.ensure_content`, which
    raises :class:`~consumer.errors.FileChangedError` for a file whose size or mtime are no longer
    ``sizes`` / ``mtimes``); ``compute`` replaces the local content pass (see ``ensure_content``)."""
    catalog.ensure_content(paths, sizes, mtimes, verbose=verbose, compute=compute)
    rows = catalog.content_rows(paths, sizes, mtimes)
    missing = [p for p, r in zip(paths, rows) if r is None]
    if missing:  # another process stored a newer version of these files between the two calls
        raise FileChangedError(f"paths: {len(missing)} file(s) changed while their content was catalogued, "
                               f"e.g. {missing[0]!r}; rebuild the dataset")
    return [r[0] for r in rows]


def _check(paths: Sequence[str], classes: Sequence[str], sha256s: Sequence[str | None],
           sizes: Sequence[int] | np.ndarray | None) -> np.ndarray:
    n = len(paths)
    if len(classes) != n or len(sha256s) != n or (sizes is not None and len(sizes) != n):
        raise InputError(f"paths, classes, sha256s and sizes must have one entry per file ({n}), got "
                         f"{len(classes)} classes, {len(sha256s)} sha256s"
                         + ("" if sizes is None else f", {len(sizes)} sizes"))
    for i, h in enumerate(sha256s):
        if not isinstance(h, str) or not _HEX64.fullmatch(h):
            raise InputError(f"sha256s[{i}] (file {paths[i]!r}) must be a lower-case sha256 hex digest, "
                             f"got {short_repr(h)} (compute the content columns first)")
    return np.asarray(sizes if sizes is not None else np.zeros(n), dtype=np.int64)


def find_duplicates(paths: Sequence[str], classes: Sequence[str], sha256s: Sequence[str],
                    sizes: Sequence[int] | np.ndarray | None = None) -> list[DuplicateGroup]:
    """Groups of two or more files with the same sha256, each in corpus order (class name, then path),
    the groups ordered by their first member. ``file_id`` of a member is its index in the inputs.

    ``sizes`` (optional) only fills :attr:`DuplicateGroup.size` (0 when not given).
    """
    size_arr = _check(paths, classes, sha256s, sizes)
    if not len(paths):
        return []
    digests = np.asarray(sha256s, dtype="U64")
    _, inverse, counts = np.unique(digests, return_inverse=True, return_counts=True)
    in_group = np.flatnonzero(counts[inverse] > 1)
    if not in_group.size:
        return []
    cls_arr = np.asarray(classes, dtype=object)
    path_arr = np.asarray(paths, dtype=object)
    # corpus order within a group: class, then path (np.lexsort sorts by its last key first)
    order = in_group[np.lexsort((path_arr[in_group].astype(str), cls_arr[in_group].astype(str),
                                 inverse[in_group]))]
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    groups = []
    for part in np.split(order, bounds):
        ids = part.tolist()
        groups.append(DuplicateGroup(
            sha256=str(digests[ids[0]]), size=int(size_arr[ids[0]]),
            members=tuple(DuplicateMember(i, paths[i], classes[i]) for i in ids)))
    groups.sort(key=lambda g: (g.members[0].cls, g.members[0].path))
    return groups


def dedupe_plan(paths: Sequence[str], classes: Sequence[str], sha256s: Sequence[str],
                sizes: Sequence[int] | np.ndarray) -> DedupePlan:
    """Keep the first file of each group of equal content in corpus order (class name, then path) and
    drop the later copies (see the module docstring). Files without a copy are all kept."""
    size_arr = _check(paths, classes, sha256s, sizes)
    groups = tuple(find_duplicates(paths, classes, sha256s, size_arr))
    dropped = np.array(sorted(m.file_id for g in groups for m in g.members[1:]), dtype=np.int64)
    mask = np.ones(len(paths), dtype=bool)
    mask[dropped] = False
    return DedupePlan(keep=np.flatnonzero(mask).astype(np.int64), drop=dropped, groups=groups,
                      dropped_bytes=int(size_arr[dropped].sum()) if dropped.size else 0)
