"""The executor seam: where the heavy passes of a build or a pack run (the one home of ``dask``).

An :class:`Engine` runs one function over a list of tasks and yields the results **in task order**;
nothing else of the package knows which engine it is. Two are provided:

- :class:`DaskEngine` — a ``dask.distributed.Client`` (a laptop ``LocalCluster``, a Slurm/PBS cluster
  started with dask-jobqueue, Kubernetes, ...): the scheduler gives retries, work stealing and the rerun
  of the tasks of a worker that died; this module only submits and collects;
- :class:`ExecutorEngine` — any :class:`concurrent.futures.Executor` (a process or thread pool): the
  same code path on one machine, without dask.

Another engine (Ray, a job queue, ...) plugs in by subclassing :class:`Engine` and implementing
:meth:`Engine.map`. :func:`resolve_engine` turns what a user passes as ``engine=`` into an engine:
``None`` (the local build, no engine), ``"dask"`` (the current default ``Client``), a ``Client``, an
``Executor`` or an :class:`Engine`.

dask is imported lazily, here only (``pip install "consumer[dask]"``).

**Task sizing** (:func:`plan_tasks`): a task is a contiguous run of files in corpus order. Its cost is
estimated as ``files * per_file + bytes * per_byte`` (per pass, see :data:`COSTS`); the corpus is cut
where the running cost crosses multiples of a target of ``max(MIN_TASK_SECONDS, total / (TASKS_PER_SLOT *
slots))``, capped at ``MAX_TASK_SECONDS``; a file worth the target alone is a task of its own, and a task
never holds more than ``MAX_TASK_FILES`` files. So a task is worth at least ~0.5 s of work (a dask task
costs about 1-5 ms of scheduling: under 1 %), there are about ``TASKS_PER_SLOT`` tasks per worker thread
for load balancing on large corpora, and a lost worker costs at most ~``MAX_TASK_SECONDS`` of rework per
task it held.
"""

from __future__ import annotations

import itertools
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError, MissingDependencyError, short_repr
from ..util.sets import distinct

__all__ = ["Engine", "DaskEngine", "ExecutorEngine", "resolve_engine", "plan_tasks", "Cost", "COSTS",
           "MIN_TASK_SECONDS", "MAX_TASK_SECONDS", "MAX_TASK_FILES", "TASKS_PER_SLOT", "import_distributed", "connect"]

MIN_TASK_SECONDS = 0.5
MAX_TASK_SECONDS = 60.0
MAX_TASK_FILES = 100_000
TASKS_PER_SLOT = 4


@dataclass(frozen=True)
class Cost:
    """Estimated seconds of one pass on one core: ``per_file`` (open, stat, libmagic) plus ``per_byte``."""

    per_file: float
    per_byte: float = 0.0


# measured on one core of the development machine (docs/benchmarks.md "Scale-out on Dask"); only ratios matter
COSTS = {
    "stat": Cost(20e-6),           # os.stat + one open/close
    "probe": Cost(10e-6),          # one open/close
    "libmagic": Cost(300e-6),      # libmagic reads the first kilobytes of a file
    "content": Cost(30e-6, 1e-9),  # sha256 + byte histogram: ~1 GB/s
    "pack": Cost(30e-6, 2e-9),     # open, read, widen to tokens, write a part file
}


def import_distributed() -> Any:
    """The ``distributed`` module, or MissingDependencyError naming the extra to install."""
    try:
        import distributed  # noqa: PLC0415  (the one home of this dependency)
    except ImportError as e:
        raise MissingDependencyError(f'engine: the Dask engine needs dask and distributed (pip install '
                                     f'"consumer[dask]"): {e}') from e
    return distributed


class Engine(ABC):
    """Where tasks run. ``slots``: how many tasks run at once (worker threads), for task sizing."""

    name = "engine"

    @property
    @abstractmethod
    def slots(self) -> int:
        """Tasks that run at the same time."""

    @abstractmethod
    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple], *, label: str) -> Iterator[Any]:
        """``fn(*task)`` for every task, yielded in task order as they finish (a generator). An exception of
        a task is raised here as it was raised there (its message names the file). Closing the generator
        (or an exception, ``KeyboardInterrupt`` included, while it is consumed) cancels what did not run.
        ``label`` names the tasks (dask keys, dashboards)."""


class DaskEngine(Engine):
    """Tasks on a ``dask.distributed.Client``'s cluster. ``retries``: how often the scheduler reruns a task
    that raised (a task whose worker died is rerun regardless, up to dask's
    ``distributed.scheduler.allowed-failures``)."""

    name = "dask"

    def __init__(self, client: Any, retries: int = 0):
        self.client, self.retries = client, int(retries)

    @property
    def slots(self) -> int:
        threads = self.client.nthreads()
        return max(1, sum(threads.values())) if threads else 1

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple], *, label: str) -> Iterator[Any]:
        token = secrets.token_hex(4)  # fresh keys: a rerun of the same pass never reuses old results
        futures = [self.client.submit(fn, *task, key=f"consumer-{label}-{token}-{i}", retries=self.retries,
                                      pure=False) for i, task in enumerate(tasks)]
        released = 0
        try:
            for future in futures:
                result = future.result()
                future.release()  # before handing the result out: an interrupt at the yield leaves nothing held
                released += 1
                yield result
        finally:  # normal end: nothing left; an error, Ctrl-C or an abandoned generator: cancel the rest
            if released < len(futures):
                self.client.cancel(futures[released:])


class ExecutorEngine(Engine):
    """Tasks on a :class:`concurrent.futures.Executor` (``slots``: its workers, default 1)."""

    name = "executor"

    def __init__(self, executor: Executor, slots: int | None = None):
        self.executor = executor
        self._slots = int(slots or getattr(executor, "_max_workers", 1) or 1)

    @property
    def slots(self) -> int:
        return self._slots

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple], *, label: str) -> Iterator[Any]:
        futures = [self.executor.submit(fn, *task) for task in tasks]
        try:
            for future in futures:
                yield future.result()
        finally:
            for f in futures:
                f.cancel()


def connect(address: str, name: str = "scheduler", timeout: float = 30.0) -> Any:
    """A ``distributed.Client`` connected to the scheduler at ``address`` (InputError naming ``name`` when none
    answers within ``timeout`` seconds)."""
    distributed = import_distributed()
    try:
        return distributed.Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as e:
        raise InputError(f"{name}: no Dask scheduler answers at {address!r}: {type(e).__name__}: {e}") from e


def _is_dask_client(engine: Any) -> bool:
    """True for a ``distributed.Client`` (checked without importing dask)."""
    return any(c.__module__.startswith("distributed") and c.__name__ == "Client" for c in type(engine).__mro__)


def resolve_engine(engine: Any, name: str = "engine") -> Engine | None:
    """The :class:`Engine` for ``engine``: None (run locally, no engine), ``"dask"`` (the current default
    ``distributed.Client``), a ``distributed.Client``, a :class:`concurrent.futures.Executor`, or an Engine."""
    if engine is None or isinstance(engine, Engine):
        return engine
    if isinstance(engine, str):
        if engine != "dask":
            raise InputError(f"{name} must be None, 'dask', a dask.distributed.Client, a concurrent.futures.Executor "
                             f"or a consumer Engine, got {short_repr(engine)}")
        distributed = import_distributed()
        try:
            client = distributed.default_client()
        except ValueError as e:
            raise InputError(f"{name}='dask' uses the current dask client, and there is none: create one first "
                             f"(dask.distributed.Client(address)) or pass it as {name}=client") from e
        return DaskEngine(client)
    if _is_dask_client(engine):
        return DaskEngine(engine)
    if isinstance(engine, Executor):
        return ExecutorEngine(engine)
    raise InputError(f"{name} must be None, 'dask', a dask.distributed.Client, a concurrent.futures.Executor or a "
                     f"consumer Engine, got {type(engine).__name__}: {short_repr(engine)}")


def plan_tasks(n_files: int, slots: int, cost: Cost, sizes: np.ndarray | None = None, *,
               min_seconds: float = MIN_TASK_SECONDS, max_seconds: float = MAX_TASK_SECONDS,
               max_files: int = MAX_TASK_FILES) -> list[tuple[int, int]]:
    """Cut files ``0..n_files`` (corpus order) into contiguous tasks ``[(start, stop), ...]`` by the rule of the
    module docstring: estimated cost ``files * cost.per_file + bytes * cost.per_byte`` (``sizes``: bytes per file,
    or None when not known yet), target ``clip(total / (TASKS_PER_SLOT * slots), min_seconds, max_seconds)``,
    at most ``max_files`` files a task; a file whose cost alone reaches the target is a task of its own. Every file
    is in exactly one task; no task is empty."""
    if n_files <= 0:
        return []
    per = np.full(n_files, cost.per_file, dtype=np.float64)
    if sizes is not None and cost.per_byte:
        per += np.asarray(sizes, dtype=np.float64) * cost.per_byte
    running = np.cumsum(per)
    total = float(running[-1])
    target = min(max(total / (TASKS_PER_SLOT * max(1, slots)), min_seconds), max_seconds)
    # task k ends at the first file whose running cost reaches (k + 1) * target
    marks = np.arange(1, int(np.ceil(total / target)) + 1, dtype=np.float64) * target
    ends = np.minimum(np.searchsorted(running, marks, side="left") + 1, n_files)
    heavy = np.flatnonzero(per >= target)  # a file worth a task alone gets one (its neighbours do not wait on it)
    ends = distinct(np.concatenate([ends, heavy, heavy + 1]))
    ends = ends[ends > 0]
    bounds = [0, *ends.tolist()]
    if bounds[-1] != n_files:
        bounds.append(n_files)
    out: list[tuple[int, int]] = []
    for a, b in itertools.pairwise(bounds):
        out.extend((s, min(s + max_files, b)) for s in range(a, b, max_files))
    return out
