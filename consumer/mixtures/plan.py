"""The batch plan of a mixture: which samples every rank reads at every global step (issue #37).

A pure function of (seed, weights schedule, batch size ``B``, world size ``W``, shuffle, ``exhausted``) and of a
starting :class:`PlanState`; no torch, no global RNG.

**Counts per step.** Global step ``k`` (one batch on every rank) takes ``S = W * B`` samples. Part ``p`` gets
``n_p(k)`` of them by a *largest-remainder apportionment on cumulative targets*: with ``w_p(k)`` the schedule's
normalised weights and ``e_p`` the residual (cumulative target minus samples taken so far, carried in the state),
the step's quota is ``d_p = e_p + S * w_p(k)``; each part gets ``floor(d_p)`` (0 for a part of weight 0 or a
negative quota), the samples left go one each to the parts of largest remainder ``d_p - n_p`` (ties: the lowest
part index; surplus, if any, is taken back from the smallest remainders), and ``e_p <- d_p - n_p``. So after every
step ``|taken_p - target_p| < 1`` for every part, where ``target_p(k) = sum_{j<k} S * w_p(j)``: over any prefix of
steps the realised counts are within one sample per part of the weights, also across a change of weights.

**Samples of a part.** Part ``p`` has its own sequence: epoch ``e`` of the part is a permutation of its samples
drawn from :func:`consumer.util.seeds.generator` ``(seed, "part", h(name), e)`` (``h``: the first 8 bytes of the
name's sha256; ``shuffle=False``: the samples in order), consumed in order. ``taken_p`` samples taken means the
part is at epoch ``taken_p // len(p)``, position ``taken_p % len(p)``. When a part runs out:

- ``exhausted="repeat"`` (default): it starts its next epoch (mosaic's ``repeat``, HF's ``all_exhausted`` without
  the end);
- ``exhausted="stop"``: the order ends before the first step that would take a sample past the first epoch of a part
  (HF's ``first_exhausted``; only parts with weight > 0 are drawn, so only they can run out).

**Ranks.** The step's samples are laid out part by part (part 0's ``n_0`` samples, then part 1's, ...); rank ``r``
reads positions ``r, r + W, r + 2W, ...`` of that layout: every rank gets exactly ``B`` samples, and each part's
``n_p`` samples are dealt round-robin so every rank holds ``floor(n_p / W)`` or ``ceil(n_p / W)`` of them.

**State.** :class:`PlanState` is (step, samples taken per part, residual per part): everything needed to continue.
A plan may start at any state (a resumed run, possibly with other weights): steps from the state on follow from it,
steps before it from step 0.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, overload

import numpy as np

from ..errors import InputError, short_repr
from ..util.seeds import generator
from .schedule import WeightSchedule

__all__ = ["EXHAUSTED", "MixturePlan", "PlanState", "StepBatches", "apportion", "apportion_lists"]

EXHAUSTED = ("repeat", "stop")
_CHECKPOINT = 256  # a state is kept every this many steps, so any step is at most this far from a known state


@dataclass(frozen=True)
class PlanState:
    """Where the plan is before global step ``step``: ``taken`` (int64, samples taken of each part) and ``residual``
    (float64, cumulative target minus taken, each in ``(-1, 1)``)."""

    step: int
    taken: np.ndarray
    residual: np.ndarray

    @staticmethod
    def start(n_parts: int) -> PlanState:
        """The state before the first step: nothing taken of any of ``n_parts`` parts."""
        return PlanState(0, np.zeros(n_parts, dtype=np.int64), np.zeros(n_parts, dtype=np.float64))


def apportion(residual: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """The counts of one step (int64, sum ``size``): largest remainders of ``residual + size * weights`` (see the
    module docstring). Parts of weight 0 get none. (Python floats: a step has a few parts, where numpy's calls cost
    more than the arithmetic; the same IEEE operations in the same order, so the same counts.)"""
    return np.array(apportion_lists(residual.tolist(), weights.tolist(), size), dtype=np.int64)


def apportion_lists(residual: list[float], w: list[float], size: int) -> list[int]:
    """:func:`apportion` on Python lists (what a token-budget step calls once per sample)."""
    d = [r + size * x for r, x in zip(residual, w)]
    n = [max(math.floor(v), 0) if x > 0 else 0 for v, x in zip(d, w)]
    left = size - sum(n)
    if left > 0:
        order = [i for i in sorted(range(len(d)), key=lambda i: n[i] - d[i]) if w[i] > 0]
        for j in range(left):  # usually left < len(order); a round-robin covers the rest
            n[order[j % len(order)]] += 1
    elif left < 0:
        order = [i for i in sorted(range(len(d)), key=lambda i: d[i] - n[i]) if n[i] > 0]
        for j in range(-left):
            n[order[j % len(order)]] -= 1
    return n


def _name_word(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


class MixturePlan:
    """The global steps of a mixture's batch order (see the module docstring).

    Args:
        names: the parts' names (in order); sizes: samples of each part; offsets: global id of each part's first
            sample (``MixtureIndex.class_ptr[:-1]``).
        schedule: the weights; batch_size: ``B``; world_size: ``W``; seed; shuffle; exhausted: ``"repeat"|"stop"``.
        start: the state the plan continues from (``None``: step 0).
    """

    def __init__(self, names: list[str], sizes: list[int], offsets: list[int], schedule: WeightSchedule, *,
                 batch_size: int, world_size: int = 1, seed: int = 0, shuffle: bool = True,
                 exhausted: str = "repeat", start: PlanState | None = None):
        if exhausted not in EXHAUSTED:
            raise InputError(f"exhausted must be one of {list(EXHAUSTED)}, got {short_repr(exhausted)}")
        self.names, self.sizes = list(names), np.asarray(sizes, dtype=np.int64)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.schedule, self.batch_size, self.world_size = schedule, int(batch_size), int(world_size)
        self.seed, self.shuffle, self.exhausted = int(seed), bool(shuffle), exhausted
        self.step_size = self.batch_size * self.world_size
        self.least = self.step_size  # the fewest samples a step takes (a token budget's steps take fewer)
        self._words = [_name_word(n) for n in self.names]
        self.start = start if start is not None else PlanState.start(len(self.names))
        self._cache: dict[int, PlanState] = {0: PlanState.start(len(self.names)), self.start.step: self.start}
        self._last = self.start  # the latest state a walk reached: a reader going step by step walks one step
        self._end: int | None = None
        self._end_known = exhausted == "repeat"

    def restarted(self, start: PlanState) -> MixturePlan:
        """The same plan continuing from ``start`` (a resumed run)."""
        return type(self)(self.names, self.sizes.tolist(), self.offsets.tolist(), self.schedule, **self._options(),
                          start=start)

    def _options(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "world_size": self.world_size, "seed": self.seed,
                "shuffle": self.shuffle, "exhausted": self.exhausted}

    # ----------------------------------------------------------------- counts
    def advance(self, state: PlanState) -> tuple[np.ndarray, PlanState]:
        """The counts of step ``state.step`` and the state after it (the start state when a walk from step 0
        reaches it: steps from the start state on follow from it)."""
        w = self.schedule.at(state.step)
        n = apportion(state.residual, w, self.step_size)
        if state.step + 1 == self.start.step:
            return n, self.start
        return n, PlanState(state.step + 1, state.taken + n, state.residual + self.step_size * w - n)

    def state_at(self, step: int) -> PlanState:
        """The state before global step ``step`` (from the start state when ``step`` is at or after it)."""
        floor = self.start.step if step >= self.start.step else 0
        known = max(k for k in self._cache if floor <= k <= step)
        state = self._cache[known]
        if state.step < self._last.step <= step and self._last.step >= floor:
            state = self._last
        while state.step < step:
            state = self.advance(state)[1]
            if state.step % _CHECKPOINT == 0:
                self._cache[state.step] = state
        self._last = state
        return state

    def counts(self, first: int, stop: int) -> np.ndarray:
        """``[stop - first, P]`` int64: the counts of every part at steps ``first .. stop - 1``."""
        state = self.state_at(first)
        out = np.zeros((max(0, stop - first), len(self.names)), dtype=np.int64)
        for i in range(out.shape[0]):
            out[i], state = self.advance(state)
        return out

    @property
    def end(self) -> int | None:
        """With ``exhausted="stop"``: the number of steps of the order (the first step that would take a sample
        past a part's first epoch); ``None`` with ``"repeat"`` (endless)."""
        if not self._end_known:
            state = self.state_at(self.start.step)
            if (state.taken > self.sizes).any():
                self._end = state.step
            bound = state.step + int(self.sizes.sum()) // self.least + 2
            while self._end is None and state.step < bound:
                _, after = self.advance(state)
                if (after.taken > self.sizes).any():
                    self._end = state.step
                state = after
            self._end_known = True
        return self._end

    # ----------------------------------------------------------------- sample ids
    def _permutation(self, part: int, epoch: int) -> np.ndarray:
        return _permutation(self.seed, self._words[part], int(self.sizes[part]), epoch, self.shuffle)

    def part_samples(self, part: int, first: int, count: int) -> np.ndarray:
        """Global ids of part ``part``'s samples ``first .. first + count - 1`` of its sequence (epochs chained)."""
        size = int(self.sizes[part])
        epoch, pos = divmod(first, size) if size else (0, 0)
        if count and pos + count <= size:  # within one epoch of the part: one slice
            ids: np.ndarray = self._permutation(part, epoch)[pos:pos + count] + int(self.offsets[part])
            return ids
        out = np.empty(count, dtype=np.int64)
        done = 0
        while done < count:
            epoch, pos = divmod(first + done, size)
            take = min(count - done, size - pos)
            out[done:done + take] = self._permutation(part, epoch)[pos:pos + take]
            done += take
        return out + self.offsets[part]

    def step_ids(self, step: int) -> np.ndarray:
        """The ``W * B`` global ids of ``step``, laid out part by part (rank ``r`` reads ``[r::W]``)."""
        state = self.state_at(step)
        counts, self._last = self.advance(state)  # in-order reads walk one step each
        return self._ids(state, counts)

    def _ids(self, state: PlanState, n: np.ndarray) -> np.ndarray:
        """The ids of the step after ``state`` that takes ``n[p]`` samples of each part ``p``."""
        return np.concatenate([self.part_samples(p, int(state.taken[p]), int(n[p])) for p in range(len(n))])

    def rank_batches(self, first: int, stop: int, rank: int) -> StepBatches:
        """Rank ``rank``'s batches of steps ``first .. stop - 1`` (cut at :attr:`end`), as a lazy sequence: a
        step's ids are made when it is read, so a loader's first batch (or a resumed one's) costs one step."""
        end = self.end
        if end is not None:
            stop = min(stop, end)
        return StepBatches(self, first, max(first, stop), rank)

    def part_position(self, state: PlanState) -> dict[str, dict[str, int]]:
        """Each part's epoch and position in that epoch at ``state``."""
        return {name: {"epoch": int(t // s) if s else 0, "position": int(t % s) if s else 0}
                for name, t, s in zip(self.names, state.taken.tolist(), self.sizes.tolist())}


class StepBatches(Sequence[np.ndarray]):
    """One rank's batches of global steps ``first .. stop - 1`` of a :class:`MixturePlan`, made on demand: item
    ``j`` is step ``first + j``'s ids ``[rank::W]``. Reading in order walks the plan one step per batch (a callable
    schedule is called once per step); any item can be read in any order."""

    def __init__(self, plan: MixturePlan, first: int, stop: int, rank: int):
        self.plan, self.first, self.stop, self.rank = plan, int(first), int(stop), int(rank)

    def __len__(self) -> int:
        return self.stop - self.first

    @overload
    def __getitem__(self, j: int) -> np.ndarray: ...
    @overload
    def __getitem__(self, j: slice) -> list[np.ndarray]: ...

    def __getitem__(self, j: int | slice) -> np.ndarray | list[np.ndarray]:
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(len(self)))]
        n = len(self)
        if not -n <= j < n:
            raise IndexError(f"step batch {j} out of range for {n} steps")
        return self.plan.step_ids(self.first + (j % n))[self.rank::self.plan.world_size]


@lru_cache(maxsize=64)
def _permutation(seed: int, word: int, size: int, epoch: int, shuffle: bool) -> np.ndarray:
    """Epoch ``epoch`` of a part: its local sample ids in serving order."""
    if not shuffle:
        return np.arange(size, dtype=np.int64)
    out: np.ndarray = generator(seed, "part", word, epoch).permutation(size).astype(np.int64)
    out.flags.writeable = False
    return out
