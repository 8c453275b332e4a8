"""Batch order: deterministic, resumable epochs of shuffled sample ids (``create_batches``).

Epoch ``e`` is the permutation drawn by ``Generator(PCG64(SeedSequence([seed, e])))``: a pure
function of ``(seed, epoch)``, so any epoch can be recomputed and a run resumed from the tiny
:meth:`EpochBatcher.state_dict`. No global RNG is touched.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError, short_repr

__all__ = ["EpochBatcher", "epoch_permutation"]

STATE_VERSION = 1


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffled order of ``n`` samples in ``epoch`` for ``seed`` (int64)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(epoch)])))
    return rng.permutation(n).astype(np.int64)


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name} must be an int >= {minimum}, got {short_repr(value)}")
    return int(value)


class EpochBatcher:
    """Cuts each epoch's permutation into batches and walks through them, wrapping into new epochs."""

    def __init__(self, n_samples: int, batch_size: int, drop_last: bool = False, seed: int = 4,
                 shuffle: bool = True):
        self.n_samples = _check_int("n_samples", n_samples, 0)
        self.batch_size = _check_int("batch_size", batch_size, 1)
        self.seed = _check_int("seed", seed, 0)
        if not isinstance(drop_last, bool):
            raise InputError(f"drop_last must be a bool, got {short_repr(drop_last)}")
        self.drop_last = drop_last
        if not isinstance(shuffle, bool):
            raise InputError(f"shuffle must be a bool, got {short_repr(shuffle)}")
        self.shuffle = shuffle
        if self.batches_per_epoch == 0:
            raise InputError(
                f"batch_size={batch_size} with drop_last={drop_last} gives no batch: the dataset has "
                f"{n_samples} samples")
        self.epoch = 0
        self.position = 0  # batches already served in this epoch
        self._order = None

    @property
    def batches_per_epoch(self) -> int:
        """Batches in one epoch (the short last batch counts unless ``drop_last``)."""
        full, rest = divmod(self.n_samples, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def _epoch_order(self) -> np.ndarray:
        if self._order is None or self._order[0] != self.epoch:
            self._order = (self.epoch, self._permutation(self.epoch))
        return self._order[1]

    def _permutation(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self.n_samples, dtype=np.int64)
        return epoch_permutation(self.n_samples, self.seed, epoch)

    def next(self) -> tuple[np.ndarray, int]:
        """The next batch's sample ids and the epoch it belongs to; wraps into the next epoch."""
        if self.position >= self.batches_per_epoch:
            self.epoch += 1
            self.position = 0
        order = self._epoch_order()
        lo = self.position * self.batch_size
        ids = order[lo:lo + self.batch_size]
        self.position += 1
        return ids, self.epoch

    def batches(self, epoch: int) -> list[np.ndarray]:
        """All batches of one epoch, in order (does not move the cursor)."""
        order = self._permutation(epoch)
        return [order[i * self.batch_size:(i + 1) * self.batch_size] for i in range(self.batches_per_epoch)]

    def state_dict(self) -> dict:
        """A tiny JSON-able state: enough to continue exactly where this batcher stopped."""
        return {"version": STATE_VERSION, "n_samples": self.n_samples, "batch_size": self.batch_size,
                "drop_last": self.drop_last, "seed": self.seed, "shuffle": self.shuffle, "epoch": self.epoch,
                "position": self.position}

    @classmethod
    def from_state_dict(cls, state: dict) -> "EpochBatcher":
        """Rebuild a batcher from :meth:`state_dict` output (checked, with clear errors)."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise InputError(f"state must be a dict with version {STATE_VERSION}, got {short_repr(state)}")
        b = cls(state["n_samples"], state["batch_size"], state["drop_last"], state["seed"], state.get("shuffle", True))
        b.epoch = _check_int("state['epoch']", state["epoch"], 0)
        b.position = _check_int("state['position']", state["position"], 0)
        if b.position > b.batches_per_epoch:
            raise InputError(f"state['position']={b.position} is past the {b.batches_per_epoch} batches of an epoch")
        return b
