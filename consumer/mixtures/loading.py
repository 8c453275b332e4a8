"""``m.dataloader(...)``: the training loader over a mixture's batch plan (:mod:`consumer.mixtures.plan`).

The loader is the one of :mod:`consumer.training.loader` (in process, prefetch threads, or worker processes through
the shared-memory ring): :class:`MixtureEpochs` shows it the plan as epochs. An *epoch* of a mixture is
``ceil(epoch_size / (W * B))`` global steps (``epoch_size`` defaults to ``num_samples``, else ``len(m)``): every
batch is full (``W * B`` samples per step), so an epoch may hold a few more samples than ``epoch_size``.
``loader.epoch`` and ``len(loader)`` keep their meaning; the plan's global step is ``epoch * len(loader) +
position``. With ``exhausted="stop"``, the epoch holding the plan's end is cut short there and no batch follows.

The state (:meth:`MixtureLoader.state_dict`) is the plan's: the global step, the samples taken of every part (so
each part's epoch and position), the residuals of the apportionment, the settings and each part's fingerprint.
:meth:`MixtureLoader.load_state_dict` continues exactly; a mixture with other weights continues from the same
per-part positions with its own weights from that step on.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import InputError, short_repr
from ..fetch.columns import columns_of
from ..training.loader import _RESERVED, _RING_OPTIONS, ConsumerLoader, _distributed
from ..training.requests import Batch
from ..training.state import dataset_fingerprint, digest, settings_diff
from ..util.validate import check_int
from .plan import MixturePlan, PlanState

__all__ = ["MIXTURE_STATE_KIND", "MixtureEpochs", "MixtureLoader", "make_mixture_loader"]

MIXTURE_STATE_KIND = "consumer.mixture-order"
MIXTURE_STATE_VERSION = 1
logger = logging.getLogger("consumer.mixtures")


class MixtureEpochs:
    """What :class:`~consumer.training.loader.ConsumerLoader` needs of a plan (``batches(epoch)``,
    ``batches_per_epoch``, ``widths``, ``settings()``...), over a :class:`MixturePlan` for one rank."""

    max_tokens = None

    def __init__(self, plan: MixturePlan, rank: int, epoch_size: int, n_samples: int):
        self.plan, self.rank, self.epoch_size, self.n_samples = plan, int(rank), int(epoch_size), int(n_samples)
        self.world_size, self.batch_size, self.max_rows = plan.world_size, plan.batch_size, plan.batch_size
        self.batches_per_epoch = max(1, math.ceil(self.epoch_size / plan.step_size))

    @property
    def balance(self) -> Any:
        """The weights, as the loader's ``repr`` and settings show a balance."""
        return self.plan.schedule.describe()

    def batches(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches of mixture epoch ``epoch`` (``batches_per_epoch`` global steps)."""
        k = self.batches_per_epoch
        return self.plan.rank_batches(epoch * k, (epoch + 1) * k, self.rank)

    def widths(self, batches: list[np.ndarray]) -> list[int | None]:
        """Every row as wide as ``seqlen`` (no token budget here)."""
        return [None] * len(batches)

    def settings(self) -> dict[str, object]:
        """The settings a state must match (the weights are not among them: they may change at a resume)."""
        p = self.plan
        return {"n_samples": self.n_samples, "parts": list(p.names), "batch_size": p.batch_size, "seed": p.seed,
                "shuffle": p.shuffle, "exhausted": p.exhausted, "epoch_size": self.epoch_size, "rank": self.rank,
                "world_size": p.world_size}


class MixtureLoader(ConsumerLoader):
    """A :class:`~consumer.training.loader.ConsumerLoader` over a mixture's plan, with the plan's state and
    :meth:`proportions` (``log_proportions_every=N`` logs them every ``N`` steps on ``consumer.mixtures``)."""

    plan: MixtureEpochs  # type: ignore[assignment]

    def __init__(self, ds: Any, plan: MixtureEpochs, query: Any, torch_kwargs: dict[str, Any],
                 description: dict[str, Any], prefetch_threads: int, transport: str,
                 log_proportions_every: int | None):
        super().__init__(ds, plan, query, torch_kwargs, description, prefetch_threads, transport)  # type: ignore[arg-type]
        self.log_proportions_every = log_proportions_every
        parts = description["mixture"]
        self._parts = {name: digest(dataset_fingerprint(d, mask=False)) for name, d in parts.items()}

    @property
    def step(self) -> int:
        """The global step of the next batch (steps served so far)."""
        return self.epoch * self.plan.batches_per_epoch + self.position

    def proportions(self, window: int) -> dict[str, float]:
        """The share of each part over the last ``window`` global steps served (all ranks), not reaching before
        the step this loader started or resumed at: ``{part: samples of it / samples}`` (zeros before any step)."""
        window = check_int("window", window, 1)
        plan = self.plan.plan
        stop = self.step
        counts = plan.counts(max(stop - window, plan.start.step, 0), stop).sum(axis=0)
        total = int(counts.sum())
        return {name: (int(c) / total if total else 0.0) for name, c in zip(plan.names, counts.tolist())}

    def __iter__(self) -> Iterator[Batch]:
        inner = super().__iter__()
        every = self.log_proportions_every
        return self._logged(inner, every) if every else inner

    def _logged(self, inner: Iterator[Batch], every: int) -> Iterator[Batch]:
        for batch in inner:
            if self.step % every == 0:
                shares = ", ".join(f"{k}={v:.4f}" for k, v in self.proportions(every).items())
                logger.info("mixture step %d: proportions over the last %d steps: %s", self.step, every, shares)
            yield batch

    # ----------------------------------------------------------------- state
    def _mine(self) -> dict[str, object]:
        out = self.plan.settings()
        del out["rank"]
        return {**out, "query": self.query, "mask": self._mask_settings}

    def state_dict(self) -> dict[str, object]:
        """JSON-able: global step (and epoch, position), samples taken and residual of every part, each part's
        epoch and position, the settings, the weights (for the record) and each part's fingerprint."""
        plan = self.plan.plan
        state = plan.state_at(self.step)
        return {"kind": MIXTURE_STATE_KIND, "version": MIXTURE_STATE_VERSION, "step": state.step,
                "epoch": self.epoch, "position": self.position, "batches_per_epoch": self.plan.batches_per_epoch,
                "rank": self.plan.rank,
                "taken": dict(zip(plan.names, state.taken.tolist())),
                "residual": dict(zip(plan.names, state.residual.tolist())),
                "parts": plan.part_position(state), "part_fingerprints": dict(self._parts),
                "settings": self._mine(), "weights": plan.schedule.describe()}

    def load_state_dict(self, state: object) -> None:
        """Continue after the last step a :meth:`state_dict` counted. The mixture must have the same parts (names
        and fingerprints) and settings; its weights may differ (they apply from the state's step on)."""
        if not isinstance(state, dict) or state.get("kind") != MIXTURE_STATE_KIND:
            raise InputError(f"state does not belong to this loader: a mixture loader takes a state of kind "
                             f"{MIXTURE_STATE_KIND!r}, got {short_repr(state)}")
        if state.get("version") != MIXTURE_STATE_VERSION:
            raise InputError(f"state version {short_repr(state.get('version'))} is not {MIXTURE_STATE_VERSION}")
        theirs = state.get("part_fingerprints")
        if not isinstance(theirs, dict):
            raise InputError("state misses 'part_fingerprints'; pass a dict made by state_dict()")
        if list(theirs) != list(self._parts):
            missing = [p for p in theirs if p not in self._parts]
            extra = [p for p in self._parts if p not in theirs]
            raise InputError(f"state does not belong to this mixture: its parts are {list(theirs)}, this mixture's "
                             f"are {list(self._parts)} (missing here: {missing}, not in the state: {extra})")
        changed = [p for p in self._parts if theirs[p] != self._parts[p]]
        if changed:
            raise InputError(f"state does not belong to this mixture: part(s) {changed} differ (files, settings or "
                             "counts)")
        saved = state.get("settings")
        diff = settings_diff(saved if isinstance(saved, dict) else {}, self._mine())
        if diff:
            raise InputError(f"state does not belong to this loader: settings differ (state, this loader): "
                             f"{short_repr(diff, 300)}")
        plan = self.plan.plan
        try:
            step = check_int("state['step']", state["step"], 0)
            taken = np.array([check_int(f"state['taken'][{p!r}]", state["taken"][p], 0) for p in plan.names],
                             dtype=np.int64)
            residual = np.array([float(state["residual"][p]) for p in plan.names], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"state has no valid step, taken or residual ({e}); pass a dict made by "
                             "state_dict()") from None
        self.plan.plan = MixturePlan(plan.names, plan.sizes.tolist(), plan.offsets.tolist(), plan.schedule,
                                     batch_size=plan.batch_size, world_size=plan.world_size, seed=plan.seed,
                                     shuffle=plan.shuffle, exhausted=plan.exhausted,
                                     start=PlanState(step, taken, residual))
        self._sampler._requests = None
        self.epoch, self.position = divmod(step, self.plan.batches_per_epoch)
        self._generation += 1

    def __repr__(self) -> str:
        s = self.plan
        return (f"MixtureLoader(batch_size={s.batch_size}, batches_per_epoch={s.batches_per_epoch}, step={self.step}, "
                f"rank={s.rank}, world_size={s.world_size}, weights={short_repr(s.balance, 120)}, "
                f"exhausted={s.plan.exhausted!r}, num_workers={self.num_workers})")


def make_mixture_loader(m: Any, batch_size: int, *, query: Any = None, shuffle: bool = True, seed: int | None = None,
                        drop_last: bool = False, num_workers: int = 0, epoch_size: int | None = None,
                        rank: int | None = None, world_size: int | None = None, exhausted: str = "repeat",
                        log_proportions_every: int | None = None, prefetch_threads: int | None = None,
                        transport: str | None = None, **torch_kwargs: Any) -> MixtureLoader:
    """The loader of ``m.dataloader`` (see :meth:`consumer.mixtures.Mixture.dataloader`). ``drop_last`` has no
    effect: every batch of a mixture is full."""
    reserved = [k for k in torch_kwargs if k in (*_RESERVED, "balance", "max_tokens")]
    if reserved:
        raise InputError(f"a mixture's dataloader does not take {reserved} (the weights are the mixture's; "
                         f"batches have batch_size samples)")
    batch_size = check_int("batch_size", batch_size, 1)
    num_workers = check_int("num_workers", num_workers, 0)
    if not isinstance(shuffle, bool):
        raise InputError(f"shuffle must be a bool, got {short_repr(shuffle)}")
    if (rank is None) != (world_size is None):
        raise InputError(f"give both rank and world_size or neither, got rank={rank!r}, world_size={world_size!r}")
    if rank is None or world_size is None:
        rank, world_size = _distributed() or (0, 1)
    world_size = check_int("world_size", world_size, 1)
    rank = check_int("rank", rank, 0)
    if rank >= world_size:
        raise InputError(f"rank must be in [0, world_size={world_size}), got {rank}")
    size = epoch_size if epoch_size is not None else (m.num_samples or len(m))
    size = check_int("epoch_size", size, 1)
    every = None if log_proportions_every is None else check_int("log_proportions_every", log_proportions_every, 1)
    description = m.get_dict()
    if query is None:
        mode = description.get("mode")
        query = mode if isinstance(mode, str) else None
    columns_of(query)
    if isinstance(query, tuple):
        query = list(query)
    index = m.index
    plan = MixturePlan(list(m.classes), index.samples_per_class().tolist(), index.class_ptr[:-1].tolist(),
                       m.schedule, batch_size=batch_size, world_size=world_size,
                       seed=m.seed if seed is None else check_int("seed", seed, 0), shuffle=shuffle,
                       exhausted=exhausted)
    threads = 0 if prefetch_threads is None else check_int("prefetch_threads", prefetch_threads, 0)
    others = sorted(k for k in torch_kwargs if k not in _RING_OPTIONS)
    transport = transport if transport is not None else ("torch" if others else "ring")
    if transport not in ("ring", "torch"):
        raise InputError(f"transport must be 'ring', 'torch' or None, got {short_repr(transport)}")
    if transport == "ring" and others and num_workers > 0:
        raise InputError(f"transport='ring' does not take the DataLoader options {others}; pass transport='torch'")
    epochs = MixtureEpochs(plan, rank, size, len(m))
    return MixtureLoader(m, epochs, query, {"num_workers": num_workers, **torch_kwargs}, description,
                         prefetch_threads=threads, transport=transport, log_proportions_every=every)
