"""The training loader: ``make_loader(ds, batch_size, ...)`` -> a resumable, shardable :class:`ConsumerLoader`.

Three parts, kept apart as torch's own data loading keeps them:

- **which ids**: :class:`consumer.training.plan.EpochPlan` (pure numpy) gives this rank's batches of every
  epoch (the same order as ``ds.create_batches`` + ``get_next_batch``); a tiny batch sampler hands them to
  torch's ``DataLoader`` as :class:`BatchRequest` s (the epoch, and the row width of a token-budget batch,
  travel with the ids, so workers need no shared state);
- **read**: :class:`BatchDataset` answers a whole request with one vectorised
  ``ds.fetch_numpy(ids, query, epoch=epoch)`` (torch calls its ``__getitems__``) and turns the
  columns into tensors once (:func:`consumer.fetch.collate.to_tensors`);
- **collate**: the identity, so the loader yields exactly the dicts ``ds[ids, query]`` gives
  (``[B, L]`` rows, never ``[B, 1, L]``).

Worker processes (``num_workers > 0``) hand batches over through a preallocated shared-memory ring
(:mod:`consumer.training.workers`: no allocation, no pickling per batch), or with ``transport="torch"`` through
torch's own ``DataLoader`` workers. Since an epoch's order is a pure function of the settings, the
loader's whole state is (epoch, batches delivered to the caller) plus fingerprints, in the one schema of
:mod:`consumer.training.state` (``ds.state_dict()`` writes it too): a batch counts
when the loader hands it over, never when a worker prefetches it, so a resumed run continues with the
next undelivered batch whatever ``num_workers`` either run used. torch is imported only when a loader is made.
"""

from __future__ import annotations

import warnings
import weakref
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import chain, islice
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError, short_repr
from ..fetch.collate import _torch, to_tensors
from ..fetch.columns import columns_of
from .plan import Balance, EpochPlan
from .requests import Batch, BatchDataset, BatchRequest, Dataset, PlanBatchSampler, Query, identity
from .state import (
    STATE_KIND,
    check_position,
    dataset_fingerprint,
    digest,
    make_state,
    order_settings,
    read_state,
    settings_diff,
)
from .workers import Columns, WorkerPool

__all__ = ["STATE_KIND", "BatchDataset", "BatchRequest", "ConsumerLoader", "Dataset", "Query", "make_loader"]

_RESERVED = ("batch_size", "shuffle", "sampler", "batch_sampler", "drop_last", "collate_fn", "dataset")
# the DataLoader options the shared-memory ring understands (any other one needs transport="torch")
_RING_OPTIONS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "multiprocessing_context",
                 "timeout", "worker_init_fn")


def _distributed() -> tuple[int, int] | None:
    """(rank, world_size) of an initialised default process group, else ``None``."""
    torch = _torch()
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank()), int(dist.get_world_size())
    return None


class ConsumerLoader:
    """A resumable, class-balanced, rank-sharded loader over a dataset (made by :func:`make_loader`).

    Epoch semantics: :attr:`epoch` is the epoch the next batch comes from. Iterating yields the
    remaining batches of the current epoch; once its last batch is delivered, :attr:`epoch` grows
    by one, so ``while loader.epoch < E: for batch in loader: ...`` trains ``E`` epochs.
    :meth:`set_epoch` restarts another epoch from its beginning and does nothing for the current
    one. ``len(loader)`` is the number of batches per epoch on this rank. Only the latest iterator
    is live: starting a new one, :meth:`set_epoch` to another epoch or :meth:`load_state_dict` ends
    the previous one.
    """

    def __init__(self, ds: Dataset, plan: EpochPlan, query: Query, torch_kwargs: dict[str, Any],
                 description: dict[str, object] | None = None, prefetch_threads: int = 0, transport: str = "ring"):
        torch = _torch()
        self.prefetch_threads = prefetch_threads  # in-process only: batches read ahead by background threads
        self.transport = transport  # with workers: "ring" (shared-memory slots) or "torch" (torch's own workers)
        self._options = torch_kwargs
        self._pool: WorkerPool[BatchRequest] | None = None
        self.dataset, self.plan, self.query = ds, plan, query
        self.epoch, self.position = 0, 0  # position: batches of self.epoch delivered to the caller
        self._generation = 0
        self._sampler = PlanBatchSampler(plan)
        self._loader = torch.utils.data.DataLoader(BatchDataset(ds, query), batch_sampler=self._sampler,
                                                   collate_fn=identity, **torch_kwargs)
        described = ds.get_dict() if description is None else description
        self._mask_settings = described.get("mask")
        self._dataset = dataset_fingerprint(described, mask=False)
        # what a 0.2 state holds: the dataset with its masking settings, and the settings without them
        self._fingerprint = digest({"dataset": dataset_fingerprint(described), "loader": self.settings()})

    # ----------------------------------------------------------------- sizes
    def __len__(self) -> int:
        return self.plan.batches_per_epoch

    @property
    def batch_size(self) -> int | None:
        """Samples per batch on this rank (the last batch of an epoch may be shorter unless ``drop_last``); with
        ``max_tokens``, the most samples of a batch (``None``: only the budget limits it)."""
        return self.plan.batch_size

    @property
    def num_workers(self) -> int:
        """Worker processes of the underlying ``DataLoader``."""
        return int(self._loader.num_workers)

    @property
    def torch_loader(self) -> Any:
        """The underlying ``torch.utils.data.DataLoader``."""
        return self._loader

    def settings(self) -> dict[str, object]:
        """The loader settings a state records: the plan's and the query. ``num_workers`` and torch options are
        not, and neither is the rank: every rank is at the same (epoch, batch) at every step, so one state
        (say rank 0's) resumes all ranks."""
        return {**order_settings(self.plan), "query": self.query}

    # ----------------------------------------------------------------- iteration
    def __iter__(self) -> Iterator[Batch]:
        self._generation += 1
        generation = self._generation
        if self.position >= self.plan.batches_per_epoch:  # only reachable through a hand-made state
            self.epoch, self.position = self.epoch + 1, 0
        self._sampler.epoch, self._sampler.start = self.epoch, self.position
        return self._run(generation)

    def _batches(self) -> Iterator[Batch]:
        """The remaining batches of the epoch: from the worker ring (or torch's workers), or in process.
        In process, torch's loader would only add a profiler record per batch, so the loader calls the
        sampler and ``__getitems__`` itself, pinning memory as torch would."""
        if self._loader.num_workers > 0 and self.transport == "torch":
            yield from self._loader
            return
        torch = _torch()
        accelerator = getattr(torch, "accelerator", None)
        pin = bool(self._loader.pin_memory) and (accelerator.is_available() if accelerator is not None
                                                 else torch.cuda.is_available())
        dataset = self._loader.dataset
        if self._loader.num_workers > 0:
            batches: Iterator[Batch] = map(to_tensors, self._ring(dataset))
        elif self.prefetch_threads > 0:
            batches = self._prefetched(dataset)
        else:
            batches = map(dataset.__getitems__, self._sampler)
        for batch in batches:
            yield {k: v.pin_memory() for k, v in batch.items()} if pin else batch

    def _ring(self, dataset: BatchDataset) -> Iterator[Columns]:
        """The batches as numpy columns from worker processes through a shared-memory ring
        (:class:`consumer.training.workers.WorkerPool`): one pool per pass, or one for the loader's life with
        ``persistent_workers``. A new pass ends the previous pass's pool."""
        requests = iter(self._sampler)
        first = next(requests, None)
        if first is None:
            return
        o = self._options
        persistent = bool(o.get("persistent_workers", False))
        pool = self._pool
        if pool is None or pool.closed or not persistent:
            if pool is not None:
                pool.close()
            probe = dataset.numpy(BatchRequest(first.epoch, first.ids[:1]))  # the columns' dtypes and row shapes
            pool = WorkerPool(dataset.numpy, probe, self.plan.max_rows, self.num_workers,
                              prefetch_factor=o.get("prefetch_factor") or 2, context=o.get("multiprocessing_context"),
                              worker_init_fn=o.get("worker_init_fn"), timeout=o.get("timeout", 0),
                              max_width=int(dataset.ds.seqlen) + 1)
            self._pool = pool
            if persistent:
                weakref.finalize(self, pool.close)
        try:
            yield from pool.run(chain([first], requests))
        finally:
            if not persistent:
                pool.close()

    def _prefetched(self, dataset: BatchDataset) -> Iterator[Batch]:
        """The batches in order, each read by a background thread while the caller works on the previous one
        (reads release the GIL: ``preadv`` and numpy copies). At most ``prefetch_threads + 1`` batches are read
        ahead; none of them counts as delivered until it is yielded, and an abandoned iterator cancels the rest."""
        requests = iter(self._sampler)
        pool = ThreadPoolExecutor(max_workers=self.prefetch_threads, thread_name_prefix="consumer-prefetch")
        try:
            pending = deque(pool.submit(dataset.__getitems__, r) for r in islice(requests, self.prefetch_threads + 1))
            while pending:
                batch = pending.popleft().result()
                for r in islice(requests, 1):
                    pending.append(pool.submit(dataset.__getitems__, r))
                yield batch
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, generation: int) -> Iterator[Batch]:
        n = self.plan.batches_per_epoch
        if generation != self._generation:  # superseded before its first batch: read nothing
            return
        for batch in self._batches():
            if generation != self._generation:  # set_epoch / load_state_dict / a newer iterator took over
                return
            self.position += 1
            if self.position >= n:
                self.epoch, self.position = self.epoch + 1, 0
            yield batch
            if generation != self._generation:
                return

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its first batch; nothing changes when it is already the current epoch
        (so calling it after :meth:`load_state_dict` does not rewind a resumed run)."""
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise InputError(f"epoch must be an int >= 0, got {short_repr(epoch)}")
        if int(epoch) != self.epoch:
            self._move_to(int(epoch), 0)

    def _move_to(self, epoch: int, position: int) -> None:
        """Serve from batch ``position`` of ``epoch`` on: a running iterator stops, and the epoch's batches are asked
        of the plan again (a resumed plan may be another object's)."""
        self.epoch, self.position = epoch, position
        self._sampler.forget()
        self._generation += 1

    # ----------------------------------------------------------------- resumption
    def state_dict(self) -> dict[str, object]:
        """A small JSON-able state (:mod:`consumer.training.state`): epoch, batches of it delivered to the caller,
        the settings and the dataset's fingerprint. ``ds.load_state_dict`` takes it too."""
        return make_state(self.plan, self.epoch, self.position, self._dataset,
                          {"query": self.query, "mask": self._mask_settings})

    def load_state_dict(self, state: object) -> None:
        """Continue exactly after the last batch a state counted: a :meth:`state_dict`, a ``ds.state_dict()`` or a
        0.2 loader's state (same dataset and settings; ``num_workers`` and other torch options may differ).
        Raises :class:`InputError` (a ``ValueError``) for a state of another dataset or other settings."""
        saved = read_state(state)
        if saved.origin == "cursor-0.2":
            raise InputError("state was saved by a 0.2 batch cursor: load it with ds.load_state_dict()")
        mine = {**self.settings(), "mask": self._mask_settings}
        same = (saved.fingerprint == self._fingerprint if saved.origin == "loader-0.2"
                else saved.dataset == digest(self._dataset) and not settings_diff(saved.settings, mine))
        if not same:
            diff = settings_diff(saved.settings, mine)
            what = (f"loader settings differ (state, this loader): {short_repr(diff, 300)}" if diff
                    else "the dataset differs (files, settings or counts)")
            raise InputError(f"state does not belong to this loader: {what}")
        self._move_to(*check_position(self.plan, saved))

    def __repr__(self) -> str:
        s = self.plan
        return (f"ConsumerLoader(batch_size={s.batch_size}, batches_per_epoch={s.batches_per_epoch}, "
                f"epoch={self.epoch}, position={self.position}, rank={s.rank}, world_size={s.world_size}, "
                f"balance={s.balance!r}, num_workers={self.num_workers})")


def make_loader(ds: Dataset, batch_size: int | None, *, query: Query | tuple[str, ...] = None, shuffle: bool = True,
                seed: int | None = None, drop_last: bool = False, num_workers: int = 0, balance: Balance = None,
                epoch_size: int | None = None, rank: int | None = None, world_size: int | None = None,
                max_tokens: int | None = None, required_batch_size_multiple: int = 1,
                prefetch_threads: int | None = None, transport: str | None = None,
                **torch_kwargs: Any) -> ConsumerLoader:
    """A :class:`ConsumerLoader` over ``ds``: batches of ``batch_size`` samples as dicts of tensors.

    Args:
        ds: the dataset (a :class:`~consumer.Consumer`).
        batch_size: samples per batch on each rank; with ``max_tokens``, the most samples of a batch
            (``None``: only the budget limits it).
        query: the columns (as in ``ds[sel, query]``); ``None`` uses the dataset's mode, as ``ds[sel]`` does.
        shuffle: a new order every epoch (a pure function of seed and epoch).
        seed: seed of the epoch orders; ``None`` means ``ds.seed``.
        drop_last: drop the final short step of an epoch instead of padding it by repeating samples.
        num_workers: worker processes reading batches (0: in the calling process).
        balance: ``None`` (natural), ``"uniform"``, a float alpha (``p_c ∝ n_c ** alpha``) or ``{class: weight}``.
        epoch_size: samples per epoch over all ranks (default ``len(ds)``).
        rank, world_size: this process's shard; default: from ``torch.distributed`` when it is
            initialised, else 0 and 1.
        max_tokens: a token budget per batch instead of a fixed size (fairseq's ``batch_by_size``, as
            ``ds.create_token_batches``): ``rows x longest row <= max_tokens``, rows only as wide as the batch's
            longest sample. Every sample once per epoch (no ``balance`` or ``epoch_size``).
        required_batch_size_multiple: with ``max_tokens``, a batch longer than this is cut down to a multiple.
        prefetch_threads: with ``num_workers=0``, background threads reading the next batches while the
            training step runs (default 0: each batch is read when it is asked for, the fastest delivery to a
            loop that does little per batch; 1 overlaps reading with a step that computes, since reads
            release the GIL and no batch is pickled or copied between processes).
        transport: with ``num_workers > 0``, how batches reach this process: ``"ring"`` (the default) writes
            them into preallocated shared-memory slots (no allocation, no pickling per batch); ``"torch"`` uses
            torch's own worker transport (needed for ``DataLoader`` options other than ``pin_memory``,
            ``persistent_workers``, ``prefetch_factor``, ``multiprocessing_context``, ``timeout`` and
            ``worker_init_fn``, which the ring takes too). ``None``: the ring unless such an option is given.
        **torch_kwargs: passed to ``torch.utils.data.DataLoader`` (``pin_memory``,
            ``persistent_workers``, ``prefetch_factor``, ``multiprocessing_context``, ``timeout``, ...).
    """
    o = loader_options(ds, query, num_workers, rank, world_size, prefetch_threads, transport, torch_kwargs)
    mask = o.description.get("mask")
    extra = int(bool(mask.get("add_cls"))) if isinstance(mask, dict) and max_tokens is not None else 0
    plan = EpochPlan(sample_class=ds.index.sample_class, classes=list(ds.classes), batch_size=batch_size,
                     seed=ds.seed if seed is None else seed, shuffle=shuffle, drop_last=drop_last, balance=balance,
                     epoch_size=epoch_size, rank=o.rank, world_size=o.world_size, lengths=ds.index.sample_tokens(),
                     max_tokens=max_tokens, multiple=required_batch_size_multiple, extra=extra)
    if o.num_workers > plan.batches_per_epoch:
        warnings.warn(f"num_workers={o.num_workers} but an epoch has only {plan.batches_per_epoch} batch(es) on "
                      f"this rank: {o.num_workers - plan.batches_per_epoch} worker(s) will have nothing to read",
                      stacklevel=2)
    return ConsumerLoader(ds, plan, o.query, {"num_workers": o.num_workers, **torch_kwargs}, o.description,
                          prefetch_threads=o.threads, transport=o.transport)


class LoaderOptions(NamedTuple):
    """The options every loader checks the same way (:func:`loader_options`)."""

    query: Query
    num_workers: int
    rank: int
    world_size: int
    threads: int
    transport: str
    description: dict[str, Any]


def loader_options(ds: Any, query: Any, num_workers: Any, rank: Any, world_size: Any, prefetch_threads: Any,
                   transport: Any, torch_kwargs: dict[str, Any], reserved: tuple[str, ...] = ()) -> LoaderOptions:
    """The checked options of a loader over ``ds`` (``make_loader``'s, and a mixture's loader's): the query (the
    dataset's mode when None, validated here and not in a worker), the worker count, this process's rank (from
    ``torch.distributed`` when neither is given), the prefetch threads, the transport and the dataset's
    ``get_dict()``. ``torch_kwargs`` naming an option the loader sets itself (or one of ``reserved``) are refused."""
    taken = [k for k in torch_kwargs if k in (*_RESERVED, *reserved)]
    if taken:
        raise InputError(f"the loader sets {taken} itself; got {short_repr({k: torch_kwargs[k] for k in taken})} "
                         "(use its own batch_size=, shuffle=, drop_last=, balance= or the dataset's weights)")
    if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)) or num_workers < 0:
        raise InputError(f"num_workers must be an int >= 0, got {short_repr(num_workers)}")
    if (rank is None) != (world_size is None):
        raise InputError(f"give both rank and world_size or neither, got rank={rank!r}, world_size={world_size!r}")
    if rank is None or world_size is None:
        rank, world_size = _distributed() or (0, 1)
    description = ds.get_dict()
    if query is None:
        mode = description.get("mode")  # the query ds[sel] uses when none is given
        query = mode if isinstance(mode, str) else None
    columns_of(query)  # validated here, not in a worker
    if isinstance(query, tuple):
        query = list(query)
    threads = 0 if prefetch_threads is None else prefetch_threads
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0:
        raise InputError(f"prefetch_threads must be an int >= 0 or None, got {short_repr(prefetch_threads)}")
    others = sorted(k for k in torch_kwargs if k not in _RING_OPTIONS)
    if transport is None:
        transport = "torch" if others else "ring"
    if transport not in ("ring", "torch"):
        raise InputError(f"transport must be 'ring', 'torch' or None, got {short_repr(transport)}")
    if transport == "ring" and others and num_workers > 0:
        raise InputError(f"transport='ring' does not take the DataLoader options {others}; pass transport='torch'")
    return LoaderOptions(query, int(num_workers), rank, world_size, int(threads), transport, description)
