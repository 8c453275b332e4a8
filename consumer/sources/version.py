"""The version of a file: :class:`FileVersion` and :func:`change_stamp`, the one definition of "the file changed".

A file's version is its size, its change stamp ``max(mtime, ctime)`` in nanoseconds (users cannot set a change
time back: ``touch -r`` restores an mtime, not a ctime, so a file rewritten in place with its size and mtime restored
still gets a new stamp) and, where the file system has them, its device and inode (a file renamed over another is
another file). The listing records it (:func:`~consumer.sources.corpus.stat_files`), the reader checks it around
every read (:mod:`consumer.sources.local`), the content pass reads through the reader, and a packed store's lean
fetch path compares its data file's version between calls (:mod:`consumer.fetch.packed_rows`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["FileVersion", "change_stamp", "change_stamps", "versions_identity"]


def change_stamp(st: os.stat_result) -> int:
    """The change stamp of a file (ns): ``max(mtime, ctime)``, what the catalog and the dataset key on."""
    mt, ct = st.st_mtime_ns, st.st_ctime_ns
    return mt if mt > ct else ct


def change_stamps(mtimes: np.ndarray, ctimes: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`change_stamp` of many files at once (int64 ns arrays; ``out`` may be ``mtimes``)."""
    stamps: np.ndarray = np.maximum(mtimes, ctimes, out=out)
    return stamps


@dataclass(frozen=True)
class FileVersion:
    """One version of one file: ``size`` (bytes), ``stamp`` (:func:`change_stamp`, ns), ``dev`` and ``ino``
    (0: unknown, never compared)."""

    size: int
    stamp: int
    dev: int = 0
    ino: int = 0

    @classmethod
    def of(cls, st: os.stat_result) -> FileVersion:
        """The version an ``os.stat`` / ``os.fstat`` result describes."""
        return cls(st.st_size, change_stamp(st), st.st_dev, st.st_ino)

    def differs(self, other: FileVersion) -> str | None:
        """None when ``other`` is this version (device/inode compared only when both know them), else a few
        words saying what differs (for an error message)."""
        if other.size != self.size:
            return f"size {other.size} bytes, indexed {self.size}"
        if self.ino and other.ino and (other.dev, other.ino) != (self.dev, self.ino):
            return f"device/inode {other.dev}/{other.ino}, indexed {self.dev}/{self.ino}"
        if other.stamp != self.stamp:
            return f"modified at {other.stamp} ns, indexed {self.stamp} ns"
        return None


def versions_identity(facts: dict[str, Any], files: Iterable[str | os.PathLike[str]]) -> str:
    """What names one version of a set of files (a packed store's): sha256 of ``facts`` (a store's sidecar, or what
    opening it depends on) and of each file's :class:`FileVersion` (None for a missing file). Any write to one of
    the files moves its change stamp, so files written since have another identity."""
    versions: list[list[int] | None] = []
    for path in files:
        try:
            v = FileVersion.of(os.stat(path))
        except FileNotFoundError:
            versions.append(None)
            continue
        versions.append([v.size, v.stamp, v.dev, v.ino])
    text = json.dumps({"facts": facts, "files": versions}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
