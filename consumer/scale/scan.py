"""The build's passes on an :class:`~consumer.scale.engines.Engine`: stat, probe, libmagic, content.

Each function cuts the files into tasks (:func:`~consumer.scale.engines.plan_tasks`), runs the matching
function of :mod:`consumer.scale.tasks` on the engine, and hands back what the local function would have
returned, in corpus order. :func:`describer` and :func:`content_computer` have the signatures of
:func:`~consumer.sources.magic.describe_files` and :func:`~consumer.catalog.content.compute_content`, so the
catalog (:meth:`~consumer.catalog.catalog.Catalog.sync`, ``ensure_content``) commits the results chunk by
chunk, in order, exactly as it commits local results: the same rows, whatever engine computed them.
:func:`complete_catalog` fills a dataset's libmagic and content columns on an engine before SQL needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import numpy as np

from ..catalog.content import READ_CHUNK, ContentStats
from ..errors import InputError
from ..sources.base import ByteSource
from ..sources.corpus import refuse_same_files
from ..sources.walk import WalkPart
from ..util.progress import progress_bar
from .engines import COSTS, Engine, plan_tasks
from .tasks import check_readable_task, content_task, describe_task, stat_task, walk_task

__all__ = ["MAX_WALK_SLICES", "walk_slices", "walker_on", "stat_on", "check_readable", "describer",
           "content_computer", "complete_catalog"]

MAX_WALK_SLICES = 8


def _slices(paths: Sequence[str], bounds: list[tuple[int, int]]) -> list[list[str]]:
    return [list(paths[a:b]) for a, b in bounds]


def walker_on(engine: Engine) -> Callable[[list[str], str], Iterator[list[WalkPart]]]:
    """A ``walker(folders, on_bad_file)`` for :func:`~consumer.sources.listing.scan_directory` that walks the class
    folders (or a flat root) on ``engine``, yielding per folder its parts in walk order: the client lists the root
    and merges the parts (arrays); every per-file ``stat`` runs on the workers. A folder is cut into
    :func:`walk_slices` tasks (contiguous runs of its sorted entries, each task listing the folder again: the
    listing of one directory cannot be split, the ``stat`` of its entries and its sub-folders can). A bad file
    raises as locally (the first in walk order: parts are taken in order)."""

    def walker(folders: list[str], on_bad_file: str) -> Iterator[list[WalkPart]]:
        k = walk_slices(len(folders), engine.slots)
        parts = engine.map(walk_task, [(f, on_bad_file, j, k) for f in folders for j in range(k)], label="walk")
        for _ in folders:
            yield [next(parts) for _ in range(k)]

    return walker


def walk_slices(folders: int, slots: int) -> int:
    """Tasks per folder of a cluster listing: ``slots // folders`` (so a flat folder or a few large classes use
    every worker thread), at least 1 and at most :data:`MAX_WALK_SLICES`. Each extra slice of a flat folder costs
    one more listing of its names (~30 % of its walk, measured: ``docs/scale-out.md``), so a slice per thread is
    the most that pays; with ``folders >= slots`` a folder is one task."""
    return max(1, min(MAX_WALK_SLICES, slots // max(1, folders)))


def stat_on(engine: Engine) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """A ``stat(paths, classes, identity=, check_open=)`` with the signature of
    :func:`~consumer.sources.corpus.stat_files` that stats on ``engine`` (what
    :func:`~consumer.sources.open.open_source` takes as ``stat``): sizes and change stamps; ``identity`` (int64
    ``[N, 2]``) receives ``(device, inode)``. The same file under two paths is refused across tasks as within one.
    ``check_open`` is accepted for the signature: the tasks open no file (size-0 files excepted), as the local
    listing before the index cache lookup."""

    def stat(paths: Sequence[str], classes: list[str] | None = None, *, identity: np.ndarray | None = None,
             check_open: Any = None) -> tuple[np.ndarray, np.ndarray]:
        n = len(paths)
        names = list(classes) if classes is not None else [""] * n
        sizes, mtimes = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        ident = identity if identity is not None else np.empty((n, 2), dtype=np.int64)
        bounds = plan_tasks(n, engine.slots, COSTS["stat"])
        tasks = [(list(paths[a:b]), names[a:b]) for a, b in bounds]
        for (a, b), (s, m, i) in zip(bounds, engine.map(stat_task, tasks, label="stat")):
            sizes[a:b], mtimes[a:b], ident[a:b] = s, m, i
        refuse_same_files(paths, names, ident)
        return sizes, mtimes

    return stat


def check_readable(engine: Engine, source: ByteSource) -> None:
    """:meth:`~consumer.sources.base.ByteSource.check_readable` on ``engine``, each task on its part of the source
    (the first unreadable file in corpus order raises, naming its path)."""
    bounds = plan_tasks(len(source), engine.slots, COSTS["probe"])
    parts = [(source.subset(np.arange(a, b, dtype=np.int64)),) for a, b in bounds]
    for _ in engine.map(check_readable_task, parts, label="probe"):
        pass


def describer(engine: Engine, source: ByteSource) -> Callable[..., Iterator[tuple[str | None, str | None]]]:
    """A ``describe(paths, kinds=, verbose=, chunk=)`` for :meth:`Catalog.sync` that runs ``source.describe`` on
    ``engine``, each task on its part of the source (local files by path; objects from a few byte ranges read by
    the worker, with the sizes and ETags of the client's one listing)."""
    where: dict[str, int] = {}

    def describe(todo: Sequence[str], *, kinds: Sequence[str] = ("description", "mime"), verbose: bool = False,
                 chunk: int = 0) -> Iterator[tuple[str | None, str | None]]:
        if not where:
            where.update((p, i) for i, p in enumerate(source.paths))
        ids = np.fromiter((where[p] for p in todo), dtype=np.int64, count=len(todo))
        bounds = plan_tasks(len(todo), engine.slots, COSTS["libmagic"])
        tasks = [(source.subset(ids[a:b]), tuple(kinds)) for a, b in bounds]
        bar = progress_bar(len(todo), verbose, f"libmagic ({engine.name})")
        try:
            for part in engine.map(describe_task, tasks, label="libmagic"):
                bar.update(len(part))
                yield from part
        finally:
            bar.close()

    return describe


def content_computer(engine: Engine, source: ByteSource) -> Callable[..., Generator[ContentStats, None, None]]:
    """A ``compute(paths, verbose=, workers=, chunk=)`` for :meth:`Catalog.ensure_content` on ``engine``: the files
    (paths of ``source``) read through ``source`` on the workers, each task a part of it (tasks sized by files
    only: the catalog passes the stale files, whose sizes it does not hand over)."""
    where: dict[str, int] = {}

    def compute(paths: Sequence[str], *, verbose: bool = False, workers: int | None = None,
                chunk: int = READ_CHUNK) -> Generator[ContentStats, None, None]:
        if not where:
            where.update((p, k) for k, p in enumerate(source.paths))
        ids = np.array([where[p] for p in paths], dtype=np.int64)
        bounds = plan_tasks(len(paths), engine.slots, COSTS["content"])
        bar = progress_bar(len(paths), verbose, f"content ({engine.name})")
        try:
            for part in engine.map(content_task, [(source.subset(ids[a:b]), chunk) for a, b in bounds],
                                   label="content"):
                bar.update(len(part))
                yield from part
        finally:
            bar.close()

    return compute


def _no_rows(engine: Engine, documents: Any) -> ByteSource:
    raise InputError(f"engine: the files of this dataset are {documents.source.kind}: they have no catalog rows to "
                     f"complete on an engine ({engine.name}); query it without one")


def complete_catalog(catalog: Any, documents: Any, engine: Engine, *, libmagic: bool = True, content: bool = True,
                     verbose: bool = False) -> dict[str, int]:
    """Fill the catalog columns the query engine computes on demand — libmagic's ``description`` and ``mime``,
    and the content columns — for every file of a dataset, on ``engine`` (``catalog``, ``documents``: a
    Consumer's ``ds.catalog`` and ``ds.documents``). The next ``ds.sql(...)`` then finds them computed and runs
    no pass of its own. Files already complete are skipped (as the query engine would). Returns
    ``{"libmagic": calls, "content": files read}``."""
    source = documents.source.choose(files=lambda source: source, store=lambda _: _no_rows(engine, documents))
    before = catalog.magic_calls
    if libmagic:
        catalog.sync(documents.paths, documents.doc_size, documents.doc_mtime, want=("description", "mime"),
                     verbose=verbose, describe=describer(engine, source))
    read = catalog.ensure_content(documents.paths, documents.doc_size, documents.doc_mtime, verbose=verbose,
                                  compute=content_computer(engine, source)) if content else 0
    return {"libmagic": catalog.magic_calls - before, "content": read}
