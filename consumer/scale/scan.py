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
from ..sources.corpus import refuse_same_files
from ..util.progress import progress_bar
from .engines import COSTS, Engine, plan_tasks
from .tasks import content_task, describe_objects_task, describe_task, probe_task, stat_task

__all__ = ["stat_paths", "probe_paths", "describer", "object_describer", "content_computer", "complete_catalog"]


def _slices(paths: Sequence[str], bounds: list[tuple[int, int]]) -> list[list[str]]:
    return [list(paths[a:b]) for a, b in bounds]


def stat_paths(engine: Engine, paths: Sequence[str], classes: list[str], identity: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~consumer.sources.corpus.stat_files` of ``paths`` (one class name per path) on ``engine``:
    sizes and change stamps; ``identity`` (int64 ``[N, 2]``) receives ``(device, inode)``. The same file
    under two paths is refused across tasks as within one."""
    n = len(paths)
    sizes, mtimes = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    ident = identity if identity is not None else np.empty((n, 2), dtype=np.int64)
    bounds = plan_tasks(n, engine.slots, COSTS["stat"])
    tasks = [(list(paths[a:b]), classes[a:b]) for a, b in bounds]
    for (a, b), (s, m, i) in zip(bounds, engine.map(stat_task, tasks, label="stat")):
        sizes[a:b], mtimes[a:b], ident[a:b] = s, m, i
    refuse_same_files(paths, classes, ident)
    return sizes, mtimes


def probe_paths(engine: Engine, paths: Sequence[str], sizes: np.ndarray) -> None:
    """:func:`~consumer.sources.corpus.probe_files` on ``engine`` (the first unreadable file in corpus order
    raises, naming its path)."""
    bounds = plan_tasks(len(paths), engine.slots, COSTS["probe"])
    for _ in engine.map(probe_task, [(list(paths[a:b]), sizes[a:b]) for a, b in bounds], label="probe"):
        pass


def describer(engine: Engine) -> Callable[..., Iterator[tuple[str | None, str | None]]]:
    """A ``describe(paths, kinds=, verbose=, chunk=)`` for :meth:`Catalog.sync` that runs libmagic on ``engine``."""

    def describe(paths: Sequence[str], *, kinds: Sequence[str] = ("description", "mime"), verbose: bool = False,
                 chunk: int = 0) -> Iterator[tuple[str | None, str | None]]:
        bounds = plan_tasks(len(paths), engine.slots, COSTS["libmagic"])
        bar = progress_bar(len(paths), verbose, f"libmagic ({engine.name})")
        try:
            for part in engine.map(describe_task, [(p, tuple(kinds)) for p in _slices(paths, bounds)],
                                   label="libmagic"):
                bar.update(len(part))
                yield from part
        finally:
            bar.close()

    return describe


def object_describer(engine: Engine, urls: Sequence[str], sizes: Any, etags: Sequence[str | None],
                     storage_options: dict | None) -> Callable[..., Iterator[tuple[str | None, str | None]]]:
    """The ``describe`` of objects at URLs (what :func:`~consumer.sources.object_magic.describer` is locally):
    each worker reads a few byte ranges of its objects with ``storage_options``; sizes and ETags come from the
    client's one listing."""
    facts = {u: (int(s), e) for u, s, e in zip(urls, np.asarray(sizes).tolist(), etags)}

    def describe(todo: Sequence[str], *, kinds: Sequence[str] = ("description", "mime"), verbose: bool = False,
                 chunk: int = 0) -> Iterator[tuple[str | None, str | None]]:
        bounds = plan_tasks(len(todo), engine.slots, COSTS["libmagic"])
        tasks = [(part, [facts[u][0] for u in part], [facts[u][1] for u in part], storage_options, tuple(kinds))
                 for part in _slices(todo, bounds)]
        bar = progress_bar(len(todo), verbose, f"libmagic ({engine.name})")
        try:
            for described in engine.map(describe_objects_task, tasks, label="libmagic"):
                bar.update(len(described))
                yield from described
        finally:
            bar.close()

    return describe


def content_computer(engine: Engine) -> Callable[..., Generator[ContentStats, None, None]]:
    """A ``compute(paths, verbose=, workers=, chunk=)`` for :meth:`Catalog.ensure_content` on ``engine``
    (tasks sized by files only: the catalog passes the stale files, whose sizes it does not hand over)."""

    def compute(paths: Sequence[str], *, verbose: bool = False, workers: int | None = None,
                chunk: int = READ_CHUNK) -> Generator[ContentStats, None, None]:
        bounds = plan_tasks(len(paths), engine.slots, COSTS["content"])
        bar = progress_bar(len(paths), verbose, f"content ({engine.name})")
        try:
            for part in engine.map(content_task, [(p, chunk) for p in _slices(paths, bounds)], label="content"):
                bar.update(len(part))
                yield from part
        finally:
            bar.close()

    return compute


def complete_catalog(catalog: Any, documents: Any, engine: Engine, *, libmagic: bool = True, content: bool = True,
                     verbose: bool = False) -> dict[str, int]:
    """Fill the catalog columns the query engine computes on demand — libmagic's ``description`` and ``mime``,
    and the content columns — for every file of a dataset, on ``engine`` (``catalog``, ``documents``: a
    Consumer's ``ds.catalog`` and ``ds.documents``). The next ``ds.sql(...)`` then finds them computed and runs
    no pass of its own. Files already complete are skipped (as the query engine would). Returns
    ``{"libmagic": calls, "content": files read}``."""
    if documents.packed is not None or documents.remote is not None:
        raise InputError(f"engine: the catalog of a dataset over a packed store or URLs is not completed on an engine "
                         f"({engine.name}); query it without one")
    before = catalog.magic_calls
    if libmagic:
        catalog.sync(documents.paths, documents.doc_size, documents.doc_mtime, want=("description", "mime"),
                     verbose=verbose, describe=describer(engine))
    read = catalog.ensure_content(documents.paths, documents.doc_size, documents.doc_mtime, verbose=verbose,
                                  compute=content_computer(engine)) if content else 0
    return {"libmagic": catalog.magic_calls - before, "content": read}
