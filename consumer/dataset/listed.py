"""Listing a dataset's files: a local directory in one ``os.scandir`` walk (:mod:`consumer.sources.listing`), any
other input form normalised and listed by its :class:`~consumer.sources.base.ByteSource`."""

from __future__ import annotations

import warnings
from typing import Any

from ..errors import ConsumerWarning
from ..scale import scan
from ..scale.engines import Engine
from ..sources.base import ByteSource
from ..sources.corpus import Corpus, normalise
from ..sources.listing import Listing, local_directory, scan_directory
from ..sources.local import LocalFiles
from ..sources.open import expand_fps, open_source
from ..storage import Storage

__all__ = ["list_corpus"]


def list_corpus(fps: Any, storage: Storage, engine: Engine | None,
                on_bad_file: str) -> tuple[Corpus, ByteSource, Listing | None]:
    """The corpus and its source: a local directory in one scan (:func:`scan_directory`, the stat of each file from
    the walk, a few µs per file; with ``engine``, each class folder walked on a worker and only the root listed
    and the parts merged here), anything else normalised and then listed by :func:`open_source`
    (stat on ``engine``'s workers when given)."""
    root = local_directory(fps) if storage.local_only else None
    if root is not None:
        listing = scan_directory(root, on_bad_file, None if engine is None else scan.walker_on(engine))
        if listing.bad.total:
            warnings.warn(f"fps: {listing.bad.summary()} in {root!r}; see build_info['skipped']", ConsumerWarning,
                          stacklevel=5)
        return listing.corpus, LocalFiles(listing.paths, listing.sizes, listing.stamps, listing.ident), listing
    corpus = normalise(expand_fps(fps, storage))
    classes = corpus.class_names
    paths, cls_list = corpus.flat()
    # no open per file yet (size-0 files excepted): a cache hit needs none, a miss checks them below
    source = open_source(paths, storage, classes=[classes[c] for c in cls_list],
                         stat=None if engine is None else scan.stat_on(engine))
    return corpus, source, None
