"""A mixture's step plan seen as epochs of one rank, and its state (issue #37).

:class:`MixtureEpochs` shows a :class:`~consumer.mixtures.plan.MixturePlan` as what the loader and the cursor walk:
``batches(epoch)``, ``batches_per_epoch``, ``widths``, ``settings()``. An *epoch* of a mixture is
``ceil(epoch_size / (W * B))`` global steps (``epoch_size`` defaults to ``num_samples``, else ``len(m)``): every batch
is full (``W * B`` samples per step), so an epoch may hold a few more samples than ``epoch_size``. The global step of
``(epoch, position)`` is ``epoch * batches_per_epoch + position``. With ``exhausted="stop"`` the epoch holding the
plan's end is cut short there and no batch follows.

**State** (:func:`order_state`, :func:`resume_order`), the one schema of ``m.dataloader(...).state_dict()`` and of
``m.state_dict()`` after ``create_batches``::

    {"kind": "consumer.mixture-order", "version": 1,
     "step": 120, "epoch": 3, "position": 0, "batches_per_epoch": 40, "rank": 0,   # where
     "taken": {part: int}, "residual": {part: float},                              # what the plan needs
     "parts": {part: {"epoch": e, "position": p}},                                 # for the record
     "part_fingerprints": {part: sha256}, "settings": {...}, "weights": ...}

A state resumes a plan with the same parts (names and fingerprints) and settings; the weights may differ (they
apply from the state's step on). ``settings`` holds the query and the masking settings when a loader saved the
state, and a cursor's state (without them) resumes a loader and the other way round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from ..errors import InputError, short_repr
from ..training.state import dataset_fingerprint, digest, settings_diff
from ..util.validate import check_int
from .budget import BudgetPlan
from .plan import MixturePlan, PlanState, StepBatches

__all__ = ["MIXTURE_STATE_KIND", "MixtureEpochs", "make_epochs", "order_state", "part_fingerprint", "part_fingerprints",
           "resume_order"]

MIXTURE_STATE_KIND = "consumer.mixture-order"
MIXTURE_STATE_VERSION = 1
_CONTEXT = ("query", "mask")  # settings a loader's state holds and a cursor's does not


class MixtureEpochs:
    """What :class:`~consumer.training.loader.ConsumerLoader` needs of a plan (``batches(epoch)``,
    ``batches_per_epoch``, ``widths``, ``settings()``...), over a :class:`MixturePlan` for one rank."""

    def __init__(self, plan: MixturePlan, rank: int, epoch_size: int, n_samples: int):
        self.plan, self.rank, self.epoch_size, self.n_samples = plan, int(rank), int(epoch_size), int(n_samples)
        self.max_tokens = plan.max_tokens if isinstance(plan, BudgetPlan) else None
        self.world_size, self.batch_size, self.max_rows = plan.world_size, plan.batch_size, plan.batch_size
        self.batches_per_epoch = max(1, math.ceil(self.epoch_size / plan.step_size))

    @property
    def balance(self) -> Any:
        """The weights, as the loader's ``repr`` and settings show a balance."""
        return self.plan.schedule.describe()

    def batches(self, epoch: int) -> StepBatches:
        """This rank's batches of mixture epoch ``epoch`` (``batches_per_epoch`` global steps), made as read."""
        k = self.batches_per_epoch
        return self.plan.rank_batches(epoch * k, (epoch + 1) * k, self.rank)

    def widths(self, batches: Sequence[np.ndarray]) -> Sequence[int | None]:
        """Each batch's row width: ``None`` (``seqlen``), or under a token budget its longest sample (made as read,
        as the batches are)."""
        plan = self.plan
        if not isinstance(plan, BudgetPlan):
            return [None] * len(batches)
        return _Widths(batches, plan.lengths)

    def settings(self) -> dict[str, object]:
        """The settings a state must match (the weights are not among them: they may change at a resume)."""
        p = self.plan
        out = {"n_samples": self.n_samples, "parts": list(p.names), "batch_size": p.batch_size, "seed": p.seed,
               "shuffle": p.shuffle, "exhausted": p.exhausted, "epoch_size": self.epoch_size, "rank": self.rank,
               "world_size": p.world_size}
        return out if self.max_tokens is None else {**out, "max_tokens": self.max_tokens}


class _Widths(Sequence[int]):
    """The row width of each of a budget plan's batches: its longest sample, found when the batch is read."""

    def __init__(self, batches: Sequence[np.ndarray], lengths: np.ndarray):
        self.batches, self.lengths = batches, lengths

    def __len__(self) -> int:
        return len(self.batches)

    @overload
    def __getitem__(self, j: int) -> int: ...
    @overload
    def __getitem__(self, j: slice) -> list[int]: ...

    def __getitem__(self, j: int | slice) -> int | list[int]:
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(len(self)))]
        ids = self.batches[j]
        return int(self.lengths[ids].max()) if ids.size else 0


def make_epochs(m: Any, batch_size: Any, *, seed: Any = None, shuffle: Any = True, rank: Any = 0,
                world_size: Any = 1, epoch_size: Any = None, exhausted: Any = "repeat",
                max_tokens: Any = None) -> MixtureEpochs:
    """The step plan of mixture ``m`` for rank ``rank`` of ``world_size``, checked (each bad value named);
    ``max_tokens``: cut by a token budget (:mod:`consumer.mixtures.budget`; ``batch_size`` is then the most rows)."""
    batch_size = check_int("batch_size", batch_size, 1)
    if not isinstance(shuffle, bool):
        raise InputError(f"shuffle must be a bool, got {short_repr(shuffle)}")
    world_size = check_int("world_size", world_size, 1)
    rank = check_int("rank", rank, 0)
    if rank >= world_size:
        raise InputError(f"rank must be in [0, world_size={world_size}), got {rank}")
    size = check_int("epoch_size", epoch_size if epoch_size is not None else (m.num_samples or len(m)), 1)
    index = m.index
    args = (list(m.classes), index.samples_per_class().tolist(), index.class_ptr[:-1].tolist(), m.schedule)
    options = {"batch_size": batch_size, "world_size": world_size, "shuffle": shuffle, "exhausted": exhausted,
               "seed": m.seed if seed is None else check_int("seed", seed, 0)}
    if max_tokens is None:
        return MixtureEpochs(MixturePlan(*args, **options), rank, size, len(m))
    budget = check_int("max_tokens", max_tokens, 1)
    extra = int(bool(m.get_dict()["mask"].get("add_cls")))  # a CLS column counts in the budget
    lengths = np.asarray(index.sample_tokens(), dtype=np.int64) + extra
    return MixtureEpochs(BudgetPlan(*args, **options, max_tokens=budget, lengths=lengths), rank, size, len(m))


def part_fingerprint(description: dict[str, Any]) -> dict[str, object]:
    """A part's fingerprint from its ``get_dict()``: what decides what each sample id reads (files, settings,
    counts), without the input form it was made from (``data_mode``: a part rebuilt by ``from_json`` is made from
    ``{class: [paths]}``, a store's from its files, and serves the same samples)."""
    return {k: v for k, v in dataset_fingerprint(description, mask=False).items() if k != "data_mode"}


def part_fingerprints(description: dict[str, Any]) -> dict[str, str]:
    """Each part's fingerprint digest from a mixture's ``get_dict()``."""
    return {name: digest(part_fingerprint(d)) for name, d in description["mixture"].items()}


def order_state(epochs: MixtureEpochs, step: int, fingerprints: dict[str, str],
                context: dict[str, object] | None = None) -> dict[str, object]:
    """The JSON-able state before global step ``step`` (see the module docstring); ``context``: the query and
    masking settings of a loader."""
    plan = epochs.plan
    state = plan.state_at(step)
    settings = {k: v for k, v in epochs.settings().items() if k != "rank"}
    epoch, position = divmod(state.step, epochs.batches_per_epoch)
    return {"kind": MIXTURE_STATE_KIND, "version": MIXTURE_STATE_VERSION, "step": state.step,
            "epoch": epoch, "position": position, "batches_per_epoch": epochs.batches_per_epoch,
            "rank": epochs.rank,
            "taken": dict(zip(plan.names, state.taken.tolist())),
            "residual": dict(zip(plan.names, state.residual.tolist())),
            "parts": plan.part_position(state), "part_fingerprints": dict(fingerprints),
            "settings": {**settings, **(context or {})}, "weights": plan.schedule.describe()}


def resume_order(epochs: MixtureEpochs, state: object, fingerprints: dict[str, str],
                 context: dict[str, object] | None = None) -> int:
    """Check ``state`` against this plan (parts, fingerprints, settings; ``context`` compared when both have it),
    make ``epochs`` continue from it and return its global step. Other weights apply from that step on."""
    if not isinstance(state, dict) or state.get("kind") != MIXTURE_STATE_KIND:
        raise InputError(f"state does not belong to this mixture's order: it takes a state of kind "
                         f"{MIXTURE_STATE_KIND!r}, got {short_repr(state)}")
    if state.get("version") != MIXTURE_STATE_VERSION:
        raise InputError(f"state version {short_repr(state.get('version'))} is not {MIXTURE_STATE_VERSION}")
    theirs = state.get("part_fingerprints")
    if not isinstance(theirs, dict):
        raise InputError("state misses 'part_fingerprints'; pass a dict made by state_dict()")
    if list(theirs) != list(fingerprints):
        missing = [p for p in theirs if p not in fingerprints]
        extra = [p for p in fingerprints if p not in theirs]
        raise InputError(f"state does not belong to this mixture: its parts are {list(theirs)}, this mixture's "
                         f"are {list(fingerprints)} (missing here: {missing}, not in the state: {extra})")
    changed = [p for p in fingerprints if theirs[p] != fingerprints[p]]
    if changed:
        raise InputError(f"state does not belong to this mixture: part(s) {changed} differ (files, settings or "
                         "counts)")
    saved = state.get("settings")
    saved = dict(saved) if isinstance(saved, dict) else {}
    mine = {k: v for k, v in epochs.settings().items() if k != "rank"}
    mine.update(context or {})
    for key in _CONTEXT:  # a cursor's state resumes a loader (and back): compared only when both hold it
        if (key in saved) != (key in mine):
            saved.pop(key, None)
            mine.pop(key, None)
    diff = settings_diff(saved, mine)
    if diff:
        raise InputError(f"state does not belong to this order: settings differ (state, this one): "
                         f"{short_repr(diff, 300)}")
    plan = epochs.plan
    try:
        step = check_int("state['step']", state["step"], 0)
        taken = np.array([check_int(f"state['taken'][{p!r}]", state["taken"][p], 0) for p in plan.names],
                         dtype=np.int64)
        residual = np.array([float(state["residual"][p]) for p in plan.names], dtype=np.float64)
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"state has no valid step, taken or residual ({e}); pass a dict made by "
                         "state_dict()") from None
    epochs.plan = plan.restarted(PlanState(step, taken, residual))
    return step
