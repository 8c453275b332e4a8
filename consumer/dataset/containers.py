"""Which files are the containers of a records build (:mod:`consumer.dataset.records`): ``fps`` in the forms
natural for containers (:func:`container_fps`), the containers listed (:func:`list_containers`: a folder's files of
the kind, by :data:`SUFFIXES`), and a built dataset's containers as ``get_dict`` lists them
(:func:`container_listing`)."""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np

from ..errors import InputError
from ..sources.corpus import normalise
from ..sources.local import LocalFiles
from ..sources.objects import ObjectFiles
from ..sources.open import expand_fps, open_source
from ..sources.paths import PathList
from ..sources.records import RecordFiles, RecordOptions
from ..sources.records.compressed import compression_of
from ..storage import Storage
from ..tokens.documents import DocumentTable

__all__ = ["SUFFIXES", "container_fps", "container_listing", "list_containers"]


SUFFIXES = {"jsonl": (".jsonl", ".ndjson"), "parquet": (".parquet", ".pq"), "tar": (".tar",)}
"""The names a container of each kind has in a folder (lines: any file)."""


def _of_kind(path: str, kind: str) -> bool:
    low = path.lower()
    suffix = compression_of(low)
    if suffix is not None:
        low = low[:-len(suffix)]
    return low.endswith(SUFFIXES[kind])


def container_listing(docs: DocumentTable, classes: list[str]) -> list[list] | None:
    """``[[path, size, class], ...]`` of the containers of a records dataset (the class of a container's first
    document; ``"null"`` for one without documents), or None when documents are files."""
    source: Any = docs.source
    if not isinstance(source, RecordFiles):
        return None
    cont = source.containers
    first = np.full(len(cont), -1, dtype=np.int64)
    first[source.doc_container[::-1]] = np.arange(source.doc_container.size - 1, -1, -1)
    return [[p, int(s), classes[int(docs.doc_class[f])] if f >= 0 else "null"]
            for p, s, f in zip(cont.paths, cont.sizes.tolist(), first.tolist())]


def container_fps(fps: Any) -> Any:
    """``fps`` as the corpus takes it, plus the two forms natural for containers: one container file
    (``"shard.jsonl"``) and a glob (``"shards/*.jsonl.gz"``, matches sorted), both as an F0 list."""
    if isinstance(fps, (str, os.PathLike)) and "://" not in os.fspath(fps):
        path = os.fspath(fps)
        if os.path.isfile(path):
            return [path]
        if not os.path.exists(path) and glob.has_magic(path):
            found = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
            if not found:
                raise InputError(f"fps: the pattern {path!r} matches no file")
            return found
    return fps


def list_containers(fps: Any, storage: Storage, options: RecordOptions) -> tuple[str, list[str], list[int], Any, int]:
    """The corpus form of ``fps``, its class names, each container's class, the containers' source (listed now:
    sizes, stamps) and how many files of a folder were not of the kind."""
    corpus = normalise(expand_fps(container_fps(fps), storage))
    folder_classes = corpus.class_names
    paths, cls_list = corpus.flat()
    ignored = 0
    if corpus.form == "dir" and options.documents in SUFFIXES:  # a folder: only the kind's files are containers
        keep = [i for i, p in enumerate(paths) if _of_kind(p, options.documents)]
        ignored = len(paths) - len(keep)
        if not keep:
            raise InputError(f"fps: the folder holds no {options.documents} file (names ending in "
                             f"{', '.join(SUFFIXES[options.documents])}, optionally compressed)")
        paths, cls_list = PathList.of(paths.take(keep)), [cls_list[i] for i in keep]
    source = open_source(paths, storage, classes=[folder_classes[c] for c in cls_list])
    if not isinstance(source, (LocalFiles, ObjectFiles)):
        raise InputError(f"documents={options.documents!r}: containers must be local files or objects behind "
                         f"URLs, got {source.kind} (e.g. {paths[0]!r})")
    source.check_readable()
    return corpus.form, folder_classes, list(cls_list), source, ignored
