"""The systems measured in the driver's own process, behind one interface, and the peer proxies.

A *system* answers ``fetch_times(batches, check)`` (see :func:`benchmarks.measure.time_batches`) and,
when it has one, ``loader_times(batch_size, workers, n_batches, seed)``. In-process systems:
``consumer`` (``ds.fetch`` from raw files or a packed store), the naive readers, and the torch
``DataLoader`` transport ceiling (a memcpy-only dataset). :class:`PeerSystem` forwards to a peer process.

Only ``consumer``'s public API is used: ``Consumer``, ``len(ds)``, ``ds.fetch``, ``ds.pack``,
``Consumer.from_packed``, ``ds.documents.doc_len`` and ``ds.index`` (to describe samples to the peers),
``ds.dataloader`` when this version has it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from .measure import time_batches, time_loader
from .peers.storeio import Plan

__all__ = ["plan_of", "make_batches", "LocalSystem", "PeerSystem", "consumer_loader", "transport_loader",
           "fetch_loader", "has_out_dtype"]


def plan_of(ds) -> Plan:
    """The samples of a ``consumer`` dataset (diff-truncate or class-grouped concat, one store document per
    file in corpus order) as contiguous token ranges of its packed store: the plan the peers serve."""
    idx = ds.index
    doc_off = np.zeros(len(ds.documents.doc_len) + 1, dtype=np.int64)
    np.cumsum(ds.documents.doc_len, out=doc_off[1:])
    first = idx.seg_ptr[:-1]
    start = doc_off[idx.seg_doc[first]] + idx.seg_start[first]
    return Plan(start, idx.sample_tokens(), ds.seqlen, ds.vocab.pad)


def make_batches(n_samples: int, batch_size: int, n_batches: int, seed: int) -> list[np.ndarray]:
    """``n_batches`` batches of sample ids cut from consecutive seeded permutations of ``range(n_samples)``
    (the same batches for every system of a workload)."""
    rng = np.random.default_rng([seed, batch_size, n_samples])
    need = batch_size * n_batches
    stream = np.concatenate([rng.permutation(n_samples) for _ in range(-(-need // n_samples))])
    return [stream[i * batch_size:(i + 1) * batch_size].astype(np.int64) for i in range(n_batches)]


class LocalSystem:
    """A system running in this process: ``fetch(ids)`` returns rows (array, tensor or dict); optional loader."""

    def __init__(self, label: str, fetch: Callable[[np.ndarray], Any] | None, check: bool = True,
                 loader: Callable[[int, int, int], Any] | None = None, note: str = ""):
        self.label, self._fetch, self.check, self._loader, self.note = label, fetch, check, loader, note

    @property
    def has_fetch(self) -> bool:
        """Whether the system serves random batches of ids."""
        return self._fetch is not None

    @property
    def has_loader(self) -> bool:
        """Whether the system has a loader to measure."""
        return self._loader is not None

    def fetch_times(self, batches: list[np.ndarray], check: int) -> dict:
        """Timed fetch of every batch (see :func:`benchmarks.measure.time_batches`)."""
        return time_batches(self._fetch, batches, check=check if self.check else 0)

    def loader_times(self, batch_size: int, workers: int, n_batches: int, seed: int) -> dict:
        """Timed iteration of the system's loader."""
        return time_loader(lambda: self._loader(batch_size, workers, seed), n_batches)


class PeerSystem:
    """A system served by a peer process (``peer``: a started :class:`~benchmarks.peers.PeerProcess`)."""

    def __init__(self, label: str, peer, key: str, variant: str, check: bool = True, loader: bool = True,
                 fresh_loader: Callable[[], Any] | None = None, note: str = "", warmup: int = 1):
        self.label, self.peer, self.key, self.variant, self.check = label, peer, key, variant, check
        self.warmup = warmup
        self._loader, self._fresh, self.note = loader, fresh_loader, note
        self.has_fetch = True

    @property
    def has_loader(self) -> bool:
        """Whether the peer's loader is measured for this variant."""
        return self._loader

    def fetch_times(self, batches: list[np.ndarray], check: int) -> dict:
        """Timed fetch in the peer process."""
        return self.peer.call("fetch", key=self.key, variant=self.variant, batches=[b.tolist() for b in batches],
                              check=check if self.check else 0, warmup=self.warmup)

    def loader_times(self, batch_size: int, workers: int, n_batches: int, seed: int) -> dict:
        """Timed loader iteration in the peer process (in a fresh one when the peer needs it)."""
        req = {"key": self.key, "variant": self.variant, "batch_size": batch_size, "workers": workers,
               "n_batches": n_batches, "seed": seed}
        if self._fresh is None:
            return self.peer.call("loader", **req)
        peer = self._fresh()
        try:
            return peer.call("loader", **req)
        finally:
            peer.close()


def has_out_dtype(ds) -> bool:
    """Whether this version's ``fetch_numpy`` accepts ``out_dtype``."""
    try:
        return "out_dtype" in inspect.signature(ds.fetch_numpy).parameters
    except (TypeError, ValueError):
        return False


class _BatchDataset:
    """A map-style dataset whose items are whole batches (``__getitem__(list of ids)``), for torch's
    ``DataLoader(batch_size=None, sampler=BatchSampler(...))``: no per-sample collation."""

    def __init__(self, n: int, make: Callable[[list], Any]):
        self.n, self.make = n, make

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, ids):
        return self.make(ids)


class _Memcpy:
    """One memcpy of a preallocated source into a fresh tensor: the cheapest possible batch."""

    def __init__(self, batch_size: int, seqlen: int):
        self.src = np.random.default_rng(0).integers(0, 65536, (batch_size, seqlen))

    def __call__(self, ids):
        import torch

        return torch.from_numpy(self.src.copy())


class _Fetch:
    """``ds.fetch(ids)["input_array"]`` as a batch maker (picklable as long as the dataset is)."""

    def __init__(self, ds):
        self.ds = ds

    def __call__(self, ids):
        return self.ds.fetch(np.asarray(ids, dtype=np.int64))["input_array"]


def _batch_loader(n: int, make, batch_size: int, workers: int, seed: int):
    import torch
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler

    sampler = BatchSampler(RandomSampler(range(n), generator=torch.Generator().manual_seed(seed)), batch_size,
                           drop_last=True)
    return DataLoader(_BatchDataset(n, make), batch_size=None, sampler=sampler, num_workers=workers)


def transport_loader(n: int, seqlen: int) -> Callable[[int, int, int], Any]:
    """Loader factory of the transport ceiling: each batch is one memcpy, through torch's DataLoader."""
    return lambda b, w, s: _batch_loader(n, _Memcpy(b, seqlen), b, w, s)


def fetch_loader(ds) -> Callable[[int, int, int], Any]:
    """Loader factory composing ``ds.fetch`` with torch's DataLoader and a batch sampler (what a user can
    write today with the public API)."""
    return lambda b, w, s: _batch_loader(len(ds), _Fetch(ds), b, w, s)


def consumer_loader(ds, copy: bool = False, **options: Any) -> Callable[[int, int, int], Any] | None:
    """Loader factory of ``ds.dataloader(batch_size, num_workers=w, **options)``, or None when this version has
    none (or does not take ``options``). ``copy``: every batch copied into fresh tensors in the loop (what a
    transport that recycles its buffers would cost if it copied out each batch)."""
    if not hasattr(ds, "dataloader"):
        return None
    if options and not all(k in inspect.signature(_make_loader_of(ds)).parameters for k in options):
        return None
    if copy:  # numpy's single-threaded copy: torch's intra-op threads would contend with the workers for the cores
        import torch

        return lambda b, w, s: ({k: torch.from_numpy(v.numpy().copy()) for k, v in batch.items()}
                                for batch in ds.dataloader(b, num_workers=w, **options))
    return lambda b, w, s: ds.dataloader(b, num_workers=w, **options)


def _make_loader_of(ds) -> Callable:
    """The ``make_loader`` behind ``ds.dataloader`` (whose own signature is ``**options``): the package's
    ``make_loader`` (releases before the subpackage layout kept it in a flat ``loader`` module)."""
    import importlib

    package = importlib.import_module(type(ds).__module__.split(".", 1)[0])
    found = getattr(package, "make_loader", None)
    return found if found is not None else importlib.import_module(package.__name__ + ".loader").make_loader
