"""Choosing the byte source, once: :func:`open_source`, :func:`reopen_source`, :func:`expand_fps`,
:func:`locate_store`.

This module is the only place that asks whether a path is a URL (webdataset's ``gopen`` model: one opener that
picks the implementation by the path's form). Everything above :mod:`consumer.sources` holds a
:class:`~consumer.sources.base.ByteSource` and uses what it offers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError, short_repr
from ..storage import Storage
from .base import ByteSource, Handoff, StatFiles
from .local import LocalFiles
from .paths import PathList
from .urls import class_layout, is_url, list_objects, local_path_of

__all__ = ["open_source", "reopen_source", "expand_fps", "locate_store", "StoreLocation", "check_root"]


def _may_hold_urls(paths: Sequence[str]) -> bool:
    """False when no path can be a URL: a packed path list without "://" in its bytes (searched a window at
    a time, no copy of the whole blob), saving a per-path check on large local corpora."""
    if not isinstance(paths, PathList):
        return True
    blob, step = paths.packed(), 1 << 24
    return any(b"://" in blob[i:i + step + 2].tobytes() for i in range(0, blob.size, step))


def expand_fps(fps: object, storage: Storage) -> object:
    """``fps`` as :func:`~consumer.sources.corpus.normalise` takes it: a bucket prefix (``s3://bucket/data/``)
    becomes ``{class: [urls]}`` from one listing (sub-prefixes are classes, like sub-directories); anything else is
    returned as it is."""
    if is_url(fps) and local_path_of(fps) is None:
        return class_layout(list_objects(fps, storage.options))
    return fps


def open_source(paths: Sequence[str], storage: Storage, *, classes: Sequence[str] | None = None,
                stat: StatFiles | None = None) -> ByteSource:
    """The source of ``paths`` (one kind per dataset): local files (stat'ed) or objects behind URLs (listed: sizes,
    times, ETags), with ``storage`` (options and read-through cache for URLs; local files take none).
    ``classes`` (one per path) only name a file's class in errors. ``stat`` (same
    signature as :func:`~consumer.sources.corpus.stat_files`) replaces the local ``stat`` of local files, e.g. by
    one that runs on a cluster's workers."""
    urls = [is_url(p) for p in paths] if _may_hold_urls(paths) else []
    if not any(urls):
        if not storage.local_only:
            raise InputError("storage_options / remote_cache are for URLs (s3://, https://, ...); fps holds local "
                             "paths")
        return LocalFiles.listed(paths, classes, stat=stat)
    if not all(urls):
        raise InputError(f"fps mixes URLs and local paths (e.g. {paths[urls.index(False)]!r}); build one dataset "
                         "per kind")
    from .objects import ObjectFiles  # noqa: PLC0415  (fsspec loads only for URLs)

    return ObjectFiles.listed(paths, storage)


def reopen_source(paths: PathList, sizes: np.ndarray, stamps: np.ndarray, handoff: Handoff | None,
                  storage: Storage) -> ByteSource:
    """The source another process opened (its :meth:`~consumer.sources.base.ByteSource.handoff`, None for local
    files), from the paths, sizes and stamps of an index cache entry: nothing is listed or stat'ed again."""
    kind = "local" if handoff is None else handoff.get("kind")
    if kind == "local":
        return LocalFiles(paths, sizes, stamps)
    if kind == "objects":
        from .objects import ObjectFiles  # noqa: PLC0415

        return ObjectFiles.reopened(paths, sizes, stamps, handoff or {}, storage)
    raise InputError(f"handoff: expected a source of local files or objects, got {short_repr(handoff)}")


@dataclass(frozen=True)
class StoreLocation:
    """Where a packed store's files are: ``kind`` ``"local"`` (``where`` a local prefix: files memory-mapped) or
    ``"objects"`` (``where`` a URL prefix: files read by ranges). The packed-store opener keeps one loader per
    kind in a registry."""

    kind: str
    where: Any


def locate_store(prefix: str | os.PathLike[str], storage: Storage) -> StoreLocation:
    """Where the packed store at ``prefix`` is: a local prefix (a path, or a ``file://`` URL), or objects (read by
    ranges with ``storage``). A local prefix takes no storage options."""
    local = local_path_of(prefix) if isinstance(prefix, str) and is_url(prefix) else prefix
    if local is None:
        return StoreLocation("objects", prefix)
    if not storage.local_only:
        raise InputError(f"storage_options / remote_cache are for stores at URLs (s3://, https://, ...); prefix "
                         f"is the local path {short_repr(prefix)}")
    return StoreLocation("local", local)


def check_root(path: str, name: str = "DIR", *, urls: bool = True) -> str:
    """``path`` if it is a directory (or, with ``urls``, a URL: listed later); otherwise an InputError naming
    ``name`` and saying "not found" or "not a directory" with the path."""
    if urls and is_url(path):
        return path
    if not os.path.exists(path):
        raise InputError(f"{name}: directory not found: {path}")
    if not os.path.isdir(path):
        raise InputError(f"{name}: not a directory: {path} (give a folder of files or of class folders)")
    return path
