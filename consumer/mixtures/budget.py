"""A mixture's step plan under a token budget: ``m.dataloader(B, max_tokens=T)`` with weights (issue #37).

The step plan of :mod:`consumer.mixtures.plan`, one sample at a time, cut by the budget:

- **Draws.** Global step ``k`` draws samples one by one: each draw is the plan's apportionment for a step of one
  sample (the largest remainder of ``residual + w(k)``), so after every draw every part's count is within one
  sample of its cumulative target, as in the plan without a budget. Part ``p``'s samples come from its own
  sequence of epochs (the same permutations as without a budget).
- **Ranks and the cut.** Draw ``i`` of the step goes to rank ``i mod W``. The step ends before the first draw that
  would make its rank's batch hold more than ``B`` rows, or ``rows x longest row > T`` (fairseq's rule, the rows
  only as wide as the batch's longest sample). That draw is not taken: it is the next step's first. So every rank
  gets one batch a step, the ranks' batches differ by at most one row, and a step holds between ``W`` and ``W * B``
  samples. A sample longer than ``T`` is refused, naming it.
- **Epochs** keep their length in steps, ``ceil(epoch_size / (W * B))``: with a budget an epoch serves at most
  ``epoch_size`` samples (fewer where the budget binds), and ``len(loader)``, the states and the resume are the
  plan's as before (the state holds the samples each part gave).

Natural weights take fairseq's batches instead (``max_tokens`` through ``make_loader``: every sample once per
epoch, samples of like lengths together); this plan serves given weights and schedules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from .plan import MixturePlan, PlanState, apportion_lists

__all__ = ["BudgetPlan"]


class BudgetPlan(MixturePlan):
    """The step plan cut by a token budget (see the module docstring): :class:`MixturePlan`'s arguments, and
    ``max_tokens`` with ``lengths`` (tokens of every global sample, a CLS column included)."""

    def __init__(self, *args: Any, max_tokens: int, lengths: np.ndarray, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.max_tokens, self.lengths = int(max_tokens), lengths
        self.least = self.world_size
        self._made: tuple[int, np.ndarray, np.ndarray, PlanState] | None = None  # the last step made

    def _options(self) -> dict[str, Any]:
        return {**super()._options(), "max_tokens": self.max_tokens, "lengths": self.lengths}

    def advance(self, state: PlanState) -> tuple[np.ndarray, PlanState]:
        """The counts of step ``state.step`` (cut by the budget) and the state after it."""
        _, counts, after = self._step(state)
        if state.step + 1 == self.start.step:
            return counts, self.start
        return counts, after

    def _ids(self, state: PlanState, n: np.ndarray) -> np.ndarray:
        """The ids of the step after ``state`` in draw order (rank ``r`` reads ``[r::W]``)."""
        return self._step(state)[0]

    def _step(self, state: PlanState) -> tuple[np.ndarray, np.ndarray, PlanState]:
        made = self._made
        if made is not None and made[0] == state.step:
            return made[1], made[2], made[3]
        W, room = self.world_size, self.world_size * self.batch_size
        w = self.schedule.at(state.step).tolist()
        residual = state.residual.tolist()
        parts: list[int] = []
        history = [residual]
        keep, rounds = room, 1
        while len(parts) < room:  # draws a round of W at a time, doubling, until the budget cuts (or B rounds)
            for _ in range(min(rounds * W, room - len(parts))):
                one = apportion_lists(residual, w, 1)
                parts.append(one.index(1))
                residual = [r + x - c for r, x, c in zip(residual, w, one)]
                history.append(residual)
            ids = self._drawn(state, parts)
            keep = self._kept(ids)
            if keep < len(parts):
                break
            rounds *= 2
        order = np.asarray(parts[:keep], dtype=np.int64)
        counts = np.bincount(order, minlength=len(self.names)).astype(np.int64)
        after = PlanState(state.step + 1, state.taken + counts, np.asarray(history[keep], dtype=np.float64))
        self._made = (state.step, ids[:keep], counts, after)
        return ids[:keep], counts, after

    def _drawn(self, state: PlanState, parts: list[int]) -> np.ndarray:
        """The global ids of a step's draws (``parts``: the part of each), each part's next samples in order."""
        order = np.asarray(parts, dtype=np.int64)
        ids = np.empty(order.size, dtype=np.int64)
        for p in np.unique(order).tolist():
            where = order == p
            ids[where] = self.part_samples(p, int(state.taken[p]), int(np.count_nonzero(where)))
        return ids

    def _kept(self, ids: np.ndarray) -> int:
        """How many of a step's draws fit: each rank's rows (draw ``i`` to rank ``i mod W``) within the budget (the
        draws are at most ``B`` rounds). A draw that does not fit a batch of its own is refused, naming it."""
        W = self.world_size
        lengths = np.asarray(self.lengths[ids], dtype=np.int64)
        rows = -(-lengths.size // W)
        grid = np.zeros(rows * W, dtype=np.int64)
        grid[:lengths.size] = lengths
        longest = np.maximum.accumulate(grid.reshape(rows, W), axis=0)  # per rank, its longest row so far
        count = np.arange(1, rows + 1, dtype=np.int64)[:, None]
        bad = np.flatnonzero((count * longest > self.max_tokens).reshape(-1)[:lengths.size])
        if not bad.size:
            return int(lengths.size)
        i = int(bad[0])
        if i < W:  # the first row of its rank's batch: it fits no batch
            raise InputError(f"max_tokens={self.max_tokens} is smaller than sample {int(ids[i])} "
                             f"({int(lengths[i])} tokens): every sample must fit a batch alone")
        return i
