"""Local container files indexed in parallel: a pool of worker processes across containers (:func:`local_engine`).

Scanning a JSONL or lines container is Python and numpy work that holds the GIL most of the time (the JSON decoder,
the per-record text pieces), so threads do not speed it up; processes do. A local build with no ``engine=`` and
several local containers holding at least :data:`PARALLEL_MIN_BYTES` in all indexes them on a
:class:`~concurrent.futures.ProcessPoolExecutor` of one process per usable core (at most one per container),
through the same :func:`~consumer.dataset.records.index_on` a cluster build uses: contiguous runs of containers per
task, results gathered in container order, so the index is the one a single process makes. Smaller corpora stay in
this process (starting the pool costs a few tenths of a second). Processes start by ``forkserver`` (``spawn`` where
there is none): never a ``fork`` of a process whose threads (DuckDB's, a loader's) could hold a lock.
``engine=`` overrides the choice: any executor, e.g. ``ThreadPoolExecutor(1)`` to index in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

import numpy as np

from ..scale.engines import Engine, ExecutorEngine
from ..sources.base import ByteSource
from ..sources.local import LocalFiles

__all__ = ["PARALLEL_MIN_BYTES", "pool_workers", "local_engine"]

PARALLEL_MIN_BYTES = 64 << 20
"""Containers holding fewer bytes in all are indexed in this process."""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def pool_workers(sizes: np.ndarray, cores: int | None = None, min_bytes: int = PARALLEL_MIN_BYTES) -> int:
    """How many processes index containers of ``sizes`` bytes: 1 (this process) below ``min_bytes`` in all or for
    one container, else one per core (``cores``: the usable cores), at most one per container."""
    n = int(np.asarray(sizes).size)
    if n < 2 or int(np.sum(sizes)) < min_bytes:
        return 1
    return max(1, min(n, _cores() if cores is None else int(cores)))


@contextmanager
def local_engine(source: ByteSource, min_bytes: int = PARALLEL_MIN_BYTES) -> Iterator[Engine | None]:
    """An engine of worker processes for indexing the containers of ``source`` (local files only), or None when
    they are better indexed in this process (:func:`pool_workers`). The pool is shut down on leaving."""
    workers = pool_workers(source.sizes, min_bytes=min_bytes) if isinstance(source, LocalFiles) else 1
    if workers < 2:
        yield None
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        yield ExecutorEngine(pool, workers)
