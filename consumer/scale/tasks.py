"""What a worker runs: one function per pass, over one task's files (a contiguous run in corpus order).

Plain functions of plain arguments (lists of paths, numpy arrays, the task's part of the dataset's
:class:`~consumer.sources.base.ByteSource`), importable on any worker that has ``consumer`` installed; each calls
the very function the local build calls (:func:`~consumer.sources.corpus.stat_files`,
:meth:`~consumer.sources.base.ByteSource.check_readable`, :meth:`~consumer.sources.base.ByteSource.describe`,
:func:`~consumer.catalog.content.compute_content`), so a file gives the same values, and a failing file the
same error naming its path, wherever it runs. One thread per task: the engine runs as many tasks at once as
the cluster has worker threads. Nothing here writes to the catalog or the cache: the client commits.
"""

from __future__ import annotations

import numpy as np

from ..catalog.content import READ_CHUNK, ContentStats, compute_source_content
from ..sources.base import ByteSource
from ..sources.corpus import stat_files
from ..sources.listing import walk_part
from ..sources.walk import WalkPart

__all__ = ["walk_task", "stat_task", "check_readable_task", "describe_task", "content_task"]


def walk_task(folder: str, on_bad_file: str, part: int = 0, parts: int = 1) -> WalkPart:
    """The files below one class folder, or below the ``part``-th of ``parts`` runs of its sorted entries
    (:func:`~consumer.sources.listing.walk_part`, the local scan's walk): paths (one blob and offsets), sizes,
    stamps, ``(device, inode)`` and the bad files it left out."""
    return walk_part(folder, on_bad_file, part, parts)


def stat_task(paths: list[str], classes: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sizes, change stamps, identity [N, 2])`` of ``paths`` as :func:`stat_files` gives them (no open per file,
    size-0 files excepted, as the local build before its index cache lookup)."""
    identity = np.zeros((len(paths), 2), dtype=np.int64)
    sizes, mtimes = stat_files(paths, classes, identity=identity, check_open=np.zeros(len(paths), dtype=bool))
    return sizes, mtimes, identity


def check_readable_task(source: ByteSource) -> int:
    """Prove every file of this part of the source readable (:meth:`ByteSource.check_readable`); how many."""
    source.check_readable()
    return len(source)


def describe_task(source: ByteSource, kinds: tuple[str, ...]) -> list[tuple[str | None, str | None]]:
    """libmagic's ``(description, mime)`` of every file of this part of the source, in order
    (:meth:`ByteSource.describe`, the local build's own call: by path for local files, from a few byte ranges
    read by this worker for objects, whose listed sizes and ETags travel with the part)."""
    return list(source.describe(list(source.paths), kinds=kinds))


def content_task(part: ByteSource, chunk: int = READ_CHUNK) -> list[ContentStats]:
    """The content statistics of every file of this part of the source (:func:`compute_source_content`, one
    thread), read through it: local files on a file system every worker mounts, or objects by ranges."""
    return list(compute_source_content(part, workers=1, chunk=chunk))
