"""Batch order: deterministic, resumable epochs of sample ids.

- :class:`EpochBatcher` (``create_batches``): fixed-size batches of each epoch's permutation;
- :class:`TokenBudgetBatcher` (``create_token_batches``): fairseq-style batches under a token budget.

Epoch ``e``'s order is drawn by ``Generator(PCG64(SeedSequence([seed, e])))``: a pure function of
``(seed, epoch)``, so any epoch can be recomputed and a run resumed from a tiny ``state_dict``. No
global RNG is touched.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError, short_repr
from ..util.seeds import generator
from ..util.validate import check_bool, check_int

__all__ = ["EpochBatcher", "TokenBudgetBatcher", "Batcher", "BatchCursor", "epoch_permutation", "batcher_from_state"]

STATE_VERSION = 1


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffled order of ``n`` samples in ``epoch`` for ``seed`` (int64)."""
    return generator(seed, "epoch", epoch).permutation(n).astype(np.int64)


def _require(state: dict, keys: tuple[str, ...]) -> None:
    missing = [k for k in keys if k not in state]
    if missing:
        raise InputError(f"state misses {missing}; pass a dict made by state_dict()")


class EpochBatcher:
    """Cuts each epoch's permutation into batches and walks through them, wrapping into new epochs."""

    kind = "samples"

    def __init__(self, n_samples: int, batch_size: int, drop_last: bool = False, seed: int = 4,
                 shuffle: bool = True):
        self.n_samples = check_int("n_samples", n_samples, 0)
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.seed = check_int("seed", seed, 0)
        self.drop_last = check_bool("drop_last", drop_last)
        self.shuffle = check_bool("shuffle", shuffle)
        if self.batches_per_epoch == 0:
            raise InputError(
                f"batch_size={batch_size} with drop_last={drop_last} gives no batch: the dataset has "
                f"{n_samples} samples")
        self.epoch = 0
        self.position = 0  # batches already served in this epoch
        self._order: tuple[int, np.ndarray] | None = None

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
        return {"version": STATE_VERSION, "kind": self.kind, "n_samples": self.n_samples,
                "batch_size": self.batch_size,
                "drop_last": self.drop_last, "seed": self.seed, "shuffle": self.shuffle, "epoch": self.epoch,
                "position": self.position}

    @classmethod
    def from_state_dict(cls, state: dict) -> EpochBatcher:
        """Rebuild a batcher from :meth:`state_dict` output (checked, with clear errors)."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION \
                or state.get("kind", cls.kind) != cls.kind:
            raise InputError(f"state must be a dict with version {STATE_VERSION}, got {short_repr(state)}")
        _require(state, ("n_samples", "batch_size", "drop_last", "seed", "epoch", "position"))
        b = cls(state["n_samples"], state["batch_size"], state["drop_last"], state["seed"], state.get("shuffle", True))
        b.epoch = check_int("state['epoch']", state["epoch"], 0)
        b.position = check_int("state['position']", state["position"], 0)
        if b.position > b.batches_per_epoch:
            raise InputError(f"state['position']={b.position} is past the {b.batches_per_epoch} batches of an epoch")
        return b


class TokenBudgetBatcher:
    """fairseq-style batches under a padding-aware token budget (``create_token_batches``).

    Samples are ordered by length (ties in a random order drawn from ``seed``), cut by
    :func:`consumer.formats.fairseq_batching.batch_by_size` (``batch size x longest sample <=
    max_tokens``) once, as fairseq freezes its batches; each epoch then serves the batches in the order
    of ``(seed, epoch)`` (or as built with ``shuffle=False``). Every sample is in exactly one batch.
    """

    kind = "tokens"

    def __init__(self, lengths: np.ndarray, max_tokens: int, max_sentences: int | None = None,
                 required_batch_size_multiple: int = 1, seed: int = 4, shuffle: bool = True):
        from ..formats.fairseq_batching import batch_by_size  # noqa: PLC0415

        self.max_tokens = check_int("max_tokens", max_tokens, 1)
        self.max_sentences = None if max_sentences is None else check_int("max_sentences", max_sentences, 1)
        self.multiple = check_int("required_batch_size_multiple", required_batch_size_multiple, 1)
        self.seed = check_int("seed", seed, 0)
        self.shuffle = check_bool("shuffle", shuffle)
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.n_samples = int(self.lengths.size)
        if self.n_samples == 0:
            raise InputError("create_token_batches: the dataset has no samples")
        tie_break = generator(self.seed, "ties").permutation(self.n_samples)
        order = tie_break[np.argsort(self.lengths[tie_break], kind="stable")]
        self._batches = batch_by_size(order, self.lengths[order], max_tokens=self.max_tokens,
                                      max_sentences=self.max_sentences,
                                      required_batch_size_multiple=self.multiple)
        self.epoch = 0
        self.position = 0

    @property
    def batches_per_epoch(self) -> int:
        """Number of batches (the same every epoch)."""
        return len(self._batches)

    @property
    def batch_size(self) -> int:
        """The largest batch (batches vary in size under a token budget)."""
        return max(b.size for b in self._batches)

    @property
    def drop_last(self) -> bool:
        """Token-budget batches never drop samples."""
        return False

    def batches(self, epoch: int) -> list[np.ndarray]:
        """All batches of one epoch, in serving order."""
        if not self.shuffle:
            return list(self._batches)
        return [self._batches[i] for i in epoch_permutation(len(self._batches), self.seed, epoch).tolist()]

    def next(self) -> tuple[np.ndarray, int]:
        """The next batch's sample ids and its epoch; wraps into the next epoch."""
        if self.position >= self.batches_per_epoch:
            self.epoch += 1
            self.position = 0
        i = self.position
        if self.shuffle:
            i = int(epoch_permutation(len(self._batches), self.seed, self.epoch)[i])
        self.position += 1
        return self._batches[i], self.epoch

    def state_dict(self) -> dict:
        """A tiny JSON-able state to continue exactly here."""
        return {"version": STATE_VERSION, "kind": self.kind, "n_samples": self.n_samples,
                "max_tokens": self.max_tokens, "max_sentences": self.max_sentences,
                "required_batch_size_multiple": self.multiple, "seed": self.seed, "shuffle": self.shuffle,
                "epoch": self.epoch, "position": self.position}

    @classmethod
    def from_state_dict(cls, state: dict, lengths: np.ndarray) -> TokenBudgetBatcher:
        """Rebuild from :meth:`state_dict` output and the dataset's sample lengths."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION or state.get("kind") != cls.kind:
            raise InputError(f"state must be a token-batch state of version {STATE_VERSION}, got {short_repr(state)}")
        _require(state, ("max_tokens", "max_sentences", "required_batch_size_multiple", "seed", "shuffle", "epoch",
                         "position"))
        b = cls(lengths, state["max_tokens"], state["max_sentences"], state["required_batch_size_multiple"],
                state["seed"], state["shuffle"])
        b.epoch = check_int("state['epoch']", state["epoch"], 0)
        b.position = check_int("state['position']", state["position"], 0)
        if b.position > b.batches_per_epoch:
            raise InputError(f"state['position']={b.position} is past the {b.batches_per_epoch} batches of an epoch")
        return b


Batcher = EpochBatcher | TokenBudgetBatcher


def batcher_from_state(state: dict, lengths: np.ndarray) -> Batcher:
    """The batcher a ``state_dict()`` describes (either kind); ``lengths`` are the samples' token counts."""
    if isinstance(state, dict) and state.get("kind") == TokenBudgetBatcher.kind:
        return TokenBudgetBatcher.from_state_dict(state, lengths)
    return EpochBatcher.from_state_dict(state)


class BatchCursor:
    """A dataset's batch order for ``ds[None]`` / ``get_next_batch``: the current batcher, if any."""

    def __init__(self, n_samples: int, seed: int, lengths: np.ndarray):
        self.n_samples = n_samples
        self.seed = seed
        self.lengths = lengths  # real tokens of each sample (token batches size rows by them)
        self.batcher: Batcher | None = None

    def epochs(self, batch_size: int, drop_last: bool, seed: int, shuffle: bool) -> None:
        """Fixed-size batches of each epoch's permutation (``create_batches``)."""
        self.batcher = EpochBatcher(self.n_samples, batch_size, drop_last, seed, shuffle)

    def token_budget(self, max_tokens: int, max_sentences: int | None, multiple: int, seed: int, shuffle: bool,
                     extra: int = 0) -> None:
        """Token-budget batches (``create_token_batches``); ``extra`` tokens per row (a CLS column) count too."""
        self.batcher = TokenBudgetBatcher(self.lengths + extra, max_tokens, max_sentences, multiple, seed, shuffle)

    def require(self, what: str) -> Batcher:
        """The batcher, or InputError naming ``what`` when no batches were made."""
        if self.batcher is None:
            raise InputError(f"{what}: no batches yet, call create_batches(batch_size) first")
        return self.batcher

    def next(self) -> tuple[np.ndarray, int, int | None]:
        """The next batch: sample ids, epoch, and the row width (token batches only; else None).
        Without batches it serves one sample at a time in the dataset's seeded order, as gperc did."""
        if self.batcher is None:
            self.batcher = EpochBatcher(self.n_samples, 1, False, self.seed)
        ids, epoch = self.batcher.next()
        if isinstance(self.batcher, TokenBudgetBatcher):
            return ids, epoch, int(self.lengths[ids].max()) if ids.size else 0
        return ids, epoch, None

    def load(self, state: dict) -> None:
        """Continue from a ``state_dict()`` taken on an identical dataset."""
        batcher = batcher_from_state(state, self.lengths)
        if batcher.n_samples != self.n_samples:
            raise InputError(f"state['n_samples']={batcher.n_samples} does not match this dataset ({self.n_samples})")
        self.batcher = batcher
