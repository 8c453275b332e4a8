"""The batch cursor of a mixture: ``create_batches``, ``get_next_batch``, ``m[None]``, ``m.batches``, ``m.state_dict``
over the loader's step plan (issue #37).

``m.create_batches(B, seed=, shuffle=, rank=, world_size=, epoch_size=, exhausted=)`` makes the plan that
``m.dataloader(B, ...)`` with the same arguments walks (:func:`~consumer.mixtures.epochs.make_epochs`), so the cursor
and the loader serve the same batches in the same order, and one's state resumes the other
(:func:`~consumer.mixtures.epochs.order_state`). Steps are made as they are served, so a first batch costs one step.
A weight schedule works here as in the loader. With ``exhausted="stop"``, the batch after the plan's end raises
:class:`~consumer.errors.InputError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError, short_repr
from .epochs import MixtureEpochs, make_epochs, order_state, part_fingerprints, resume_order
from .plan import StepBatches

__all__ = ["MixtureCursor"]


class MixtureCursor:
    """A mixture's step plan for ``m[None]`` and the next batch's global step in it. ``describe`` returns the
    mixture's description (for the parts' fingerprints, taken only when a state is saved or loaded)."""

    def __init__(self, mixture: Any, describe: Callable[[], dict[str, Any]]):
        self.mixture, self.describe = mixture, describe
        self.plan: MixtureEpochs | None = None
        self.step = 0
        self._options: dict[str, Any] = {}

    def start(self, batch_size: Any, *, seed: Any = None, shuffle: Any = True, rank: Any = None,
              world_size: Any = None, epoch_size: Any = None, exhausted: Any = "repeat", max_tokens: Any = None,
              **others: Any) -> None:
        """A new order from step 0 (see the module docstring; ``rank``/``world_size``: both or neither)."""
        if others:
            raise InputError(f"a mixture's create_batches does not take {sorted(others)} (the weights are the "
                             "mixture's; it takes rank, world_size, epoch_size, exhausted and max_tokens)")
        if (rank is None) != (world_size is None):
            raise InputError(f"give both rank and world_size or neither, got rank={rank!r}, world_size={world_size!r}")
        self._options = {"seed": seed, "shuffle": shuffle, "rank": rank or 0, "world_size": world_size or 1,
                         "epoch_size": epoch_size, "exhausted": exhausted, "max_tokens": max_tokens}
        self.plan = make_epochs(self.mixture, batch_size, **self._options)
        self._options["batch_size"] = batch_size
        self.step = 0

    def require(self, what: str) -> MixtureEpochs:
        """The plan, or InputError naming ``what`` when no batches were made."""
        if self.plan is None:
            raise InputError(f"{what}: no batches yet, call create_batches(batch_size) first")
        return self.plan

    @property
    def epoch(self) -> int:
        """The epoch of the next batch."""
        return self.step // self.require("epoch").batches_per_epoch

    def batches(self, epoch: int) -> StepBatches:
        """Every batch of ``epoch`` on this cursor's rank, in serving order, made as read (does not move the
        cursor)."""
        return self.require("batches").batches(epoch)

    def next(self) -> tuple[np.ndarray, int, int | None]:
        """The next batch: its global sample ids, its epoch, and its row width (``None``: ``seqlen``; under a token
        budget, its longest sample)."""
        plan = self.require("next")
        end = plan.plan.end
        if end is not None and self.step >= end:
            raise InputError(f"the mixture's order ended at step {end}: exhausted='stop' ends it before the first step "
                             "that would take a part past its first epoch; create_batches(...) starts it again")
        epoch = self.step // plan.batches_per_epoch
        ids = plan.plan.step_ids(self.step)[plan.rank::plan.world_size]
        self.step += 1
        return ids, epoch, plan.widths([ids])[0]

    # ----------------------------------------------------------------- states
    def state_dict(self) -> dict[str, object]:
        """The position as a mixture-order state (a loader made with the same settings resumes it)."""
        plan = self.require("state_dict")
        return order_state(plan, self.step, part_fingerprints(self.describe()))

    def load(self, state: object) -> None:
        """Continue from a state of this mixture's order (a cursor's or a loader's), with its settings: a cursor
        without batches takes the plan the state names; one with batches must match it."""
        if isinstance(state, dict) and self.plan is None:
            self.start(**_options_of(state))
        plan = self.require("load_state_dict")
        self.step = resume_order(plan, state, part_fingerprints(self.describe()))

    def snapshot(self) -> dict[str, object] | None:
        """What a pickle keeps: the plan's options and the plan's state at the next step (no fingerprints)."""
        if self.plan is None:
            return None
        state = order_state(self.plan, self.step, {})
        return {"options": dict(self._options), "step": self.step, "taken": state["taken"],
                "residual": state["residual"]}

    def restore(self, snapshot: object) -> None:
        """Undo :meth:`snapshot`."""
        if snapshot is None:
            self.plan, self.step = None, 0
            return
        if not isinstance(snapshot, dict) or not isinstance(snapshot.get("options"), dict):
            raise InputError(f"a pickled mixture's batch order must be a snapshot dict, got {short_repr(snapshot)}")
        self.start(**snapshot["options"])
        plan = self.require("restore")
        state = {**order_state(plan, 0, {}), "step": snapshot["step"], "taken": snapshot["taken"],
                 "residual": snapshot["residual"]}
        self.step = resume_order(plan, state, {})


def _options_of(state: dict) -> dict[str, Any]:
    """The ``create_batches`` options a state's settings name (a bad state is refused by ``resume_order``)."""
    s = state.get("settings")
    s = s if isinstance(s, dict) else {}
    rank = state.get("rank", 0)
    world = s.get("world_size", 1)
    return {"batch_size": s.get("batch_size", 1), "seed": s.get("seed"), "shuffle": s.get("shuffle", True),
            "rank": rank if isinstance(rank, int) and isinstance(world, int) and 0 <= rank < world else 0,
            "world_size": world, "epoch_size": s.get("epoch_size"), "exhausted": s.get("exhausted", "repeat"),
            "max_tokens": s.get("max_tokens")}
