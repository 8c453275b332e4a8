"""What a worker runs: one function per pass, over one task's files (a contiguous run in corpus order).

Plain functions of plain arguments (lists of paths, numpy arrays), importable on any worker that has
``consumer`` installed; each calls the very function the local build calls (:func:`~consumer.sources.corpus
.stat_files`, :func:`~consumer.sources.corpus.probe_files`, :func:`~consumer.sources.magic.describe_files`,
:func:`~consumer.catalog.content.compute_content`), so a file gives the same values, and a failing file the
same error naming its path, wherever it runs. One thread per task: the engine runs as many tasks at once as
the cluster has worker threads. Nothing here writes to the catalog or the cache: the client commits.
"""

from __future__ import annotations

import numpy as np

from ..catalog.content import READ_CHUNK, ContentStats, compute_content
from ..sources.corpus import probe_files, stat_files
from ..sources.magic import describe_files

__all__ = ["stat_task", "probe_task", "describe_task", "describe_objects_task", "content_task"]


def stat_task(paths: list[str], classes: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sizes, change stamps, identity [N, 2])`` of ``paths`` as :func:`stat_files` gives them (no open per file,
    size-0 files excepted, as the local build before its index cache lookup)."""
    identity = np.zeros((len(paths), 2), dtype=np.int64)
    sizes, mtimes = stat_files(paths, classes, identity=identity, check_open=np.zeros(len(paths), dtype=bool))
    return sizes, mtimes, identity


def probe_task(paths: list[str], sizes: np.ndarray) -> int:
    """Open every file once (:func:`probe_files`); returns how many."""
    probe_files(paths, sizes)
    return len(paths)


def describe_task(paths: list[str], kinds: tuple[str, ...]) -> list[tuple[str | None, str | None]]:
    """libmagic's ``(description, mime)`` of each path (:func:`describe_files`, one thread)."""
    return list(describe_files(paths, kinds=kinds, workers=1))


def describe_objects_task(urls: list[str], sizes: list[int], etags: list[str | None], storage_options: dict | None,
                          kinds: tuple[str, ...]) -> list[tuple[str | None, str | None]]:
    """libmagic's ``(description, mime)`` of objects at URLs from a few byte ranges each, read by this worker
    (:func:`~consumer.sources.object_magic.iter_describe_prefixes`, the local build's function; the listing's
    sizes and ETags: a changed object raises FileChangedError)."""
    from ..sources.object_magic import iter_describe_prefixes  # noqa: PLC0415  (fsspec loads only for URLs)

    return list(iter_describe_prefixes(urls, sizes, etags, storage_options, kinds=kinds))


def content_task(paths: list[str], chunk: int = READ_CHUNK) -> list[ContentStats]:
    """The content statistics of each path (:func:`compute_content`, one thread)."""
    return list(compute_content(paths, workers=1, chunk=chunk))
