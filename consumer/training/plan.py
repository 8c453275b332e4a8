"""Loader planning: which sample ids each rank reads in each epoch, as a pure numpy function.

:class:`EpochPlan` holds the settings of a training loader (dataset size, class of every sample,
batch size, seed, shuffle, class balance, epoch size, rank, world size, drop_last) and answers
``plan.batches(epoch)``: this rank's batches of that epoch, a pure function of the settings and
the epoch, computed with a handful of vectorised numpy calls. No torch, no global RNG, no state:
the training loader (:mod:`consumer.training.loader`) only has to remember *how many* batches it delivered.

Epoch ``e`` in three steps:

1. **Draw the epoch** (``epoch_size`` ids, default ``len(ds)``), with a generator seeded from
   ``(seed, tag, e)``:

   - ``balance=None`` (natural): a permutation of all samples (``epoch_size`` larger than the
     dataset chains several permutations, smaller takes the head of one);
   - ``"uniform"``, a float ``alpha`` or ``{class: weight}``: class ``c`` gets the target share
     ``p_c`` (``"uniform"``: equal shares over classes that have samples; ``alpha``:
     ``p_c ∝ n_c ** alpha`` so ``1.0`` is natural and ``0.0`` uniform; a dict: the given weights,
     normalised, classes left out get none). Class counts are drawn by systematic sampling: each
     is ``floor`` or ``ceil`` of ``epoch_size * p_c`` and equals it in expectation. Inside a class
     samples are drawn without replacement, chaining fresh permutations when the class is asked
     for more samples than it has (few repeats, every sample used before any is used twice). The
     whole epoch is then shuffled.

   ``shuffle=False`` keeps sample order (natural) or sorts the drawn ids (balanced).
2. **Pad or cut for ranks.** ``W = world_size`` ranks, batch size ``B``. ``drop_last=True`` keeps
   the first ``K * W * B`` ids (``K = epoch_size // (W * B)`` full steps). ``drop_last=False``
   pads the epoch by repeating its first ids (cyclically) up to a multiple of ``W``.
3. **Deal to ranks.** Step ``k`` takes the next ``W * B`` ids; rank ``r`` gets slice
   ``r * B .. (r + 1) * B`` of them. The short final step (``drop_last=False``) is split into
   ``W`` equal parts. So every rank has the same number of batches (and the same batch sizes),
   ranks are disjoint within an epoch (up to the padding repeats) and together cover it, and
   with ``world_size=1`` the batches are just consecutive slices of the epoch's order.

**Token budgets** (``max_tokens``: the batch shape of fairseq's ``batch_by_size``) replace step 3's fixed
slices: the epoch's samples are sorted by length (equal lengths in the order of the ``ties`` stream), cut
into batches with ``batch size x longest row <= max_tokens`` (at most ``batch_size`` rows when it is given),
and the batches are shuffled with the epoch's generator. A natural epoch holds every sample once, so its
batches are the same in every epoch (fairseq freezes them too) and only their order changes. Ranks take
batches in turn (step ``k`` gives rank ``r`` batch ``k * W + r``); ``drop_last`` drops the batches of a last
incomplete step, otherwise the first batches are repeated to complete it.

The draws come from the ``order`` stream of :mod:`consumer.util.seeds`; a plan resumed from a state
saved by release 0.2's batch cursor draws from its ``epoch`` stream instead, which gives exactly the
orders 0.2 served (the same algorithm, another seed tag).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..errors import InputError, short_repr
from ..util.seeds import ORDER_STREAMS, generator
from .budget import budget_batches, deal_batches

__all__ = ["BALANCE_NAMES", "Balance", "EpochPlan", "check_balance", "class_shares", "epoch_order"]

BALANCE_NAMES = ("uniform",)
Balance = None | str | float | dict[str, float]
"""A checked ``balance``: ``None``, ``"uniform"``, a float alpha or ``{class: weight}``."""


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name} must be an int >= {minimum}, got {short_repr(value)}")
    return int(value)


def check_balance(balance: object, classes: list[str]) -> Balance:
    """``balance`` validated and made JSON-able: ``None``, ``"uniform"``, a finite float or ``{class: weight}``."""
    if balance is None:
        return None
    if isinstance(balance, str):
        if balance not in BALANCE_NAMES:
            raise InputError(f"balance must be None, one of {list(BALANCE_NAMES)}, a float alpha or "
                             f"{{class: weight}}, got {short_repr(balance)}")
        return balance
    if isinstance(balance, (int, float, np.integer, np.floating)) and not isinstance(balance, bool):
        if not math.isfinite(float(balance)):
            raise InputError(f"balance (alpha) must be a finite number, got {short_repr(balance)}")
        return float(balance)
    if isinstance(balance, dict):
        unknown = [k for k in balance if k not in classes]
        if unknown:
            raise InputError(f"balance names unknown class(es) {short_repr(unknown)}; classes are "
                             f"{short_repr(classes)}")
        out: dict[str, float] = {}
        for k, w in balance.items():
            if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(float(w)) or w < 0:
                raise InputError(f"balance[{k!r}] must be a finite weight >= 0, got {short_repr(w)}")
            out[str(k)] = float(w)
        if not any(out.values()):
            raise InputError(f"balance gives every class weight 0: {short_repr(balance)}")
        return {str(c): out[c] for c in classes if c in out}  # canonical order: the dataset's classes
    raise InputError(f"balance must be None, 'uniform', a float alpha or {{class: weight}}, got {short_repr(balance)}")


def class_shares(balance: Balance, counts: np.ndarray,
                 classes: list[str]) -> np.ndarray:
    """Target share of each class (float64, sums to 1) for a checked ``balance`` and samples per class."""
    counts = np.asarray(counts, dtype=np.int64)
    has = counts > 0
    if balance is None:
        w = counts.astype(np.float64)
    elif balance == "uniform":
        w = has.astype(np.float64)
    elif isinstance(balance, float):
        w = np.zeros(counts.size)
        logw = balance * np.log(counts[has].astype(np.float64))
        w[has] = np.exp(logw - logw.max())  # n_c ** alpha, scaled so that no alpha overflows
    elif isinstance(balance, dict):
        w = np.array([balance.get(c, 0.0) for c in classes], dtype=np.float64)
        empty = [c for c, wc, n in zip(classes, w.tolist(), counts.tolist()) if wc > 0 and n == 0]
        if empty:
            raise InputError(f"balance gives weight to class(es) {empty} that have no samples")
    else:
        raise InputError(f"balance must be checked with check_balance first, got {short_repr(balance)}")
    total = w.sum()
    if not np.isfinite(total) or total <= 0:
        raise InputError(f"balance={short_repr(balance)} gives no class a positive share (samples per class: "
                         f"{short_repr(counts.tolist())})")
    out: np.ndarray = w / total
    return out


def _permutations(rng: np.random.Generator, ids: np.ndarray, size: int, shuffle: bool) -> np.ndarray:
    """``size`` ids from ``ids``: chained permutations (or plain repeats without shuffle), cut to ``size``."""
    n = ids.size
    if size == 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    rounds = -(-size // n)
    if not shuffle:
        return np.tile(ids, rounds)[:size]
    return np.concatenate([ids[rng.permutation(n)] for _ in range(rounds)])[:size]


def epoch_order(sample_class: np.ndarray, n_classes: int, *, seed: int, epoch: int, shuffle: bool = True,
                shares: np.ndarray | None = None, epoch_size: int | None = None, stream: str = "order",
                rng: np.random.Generator | None = None) -> np.ndarray:
    """The global order of one epoch (int64 sample ids, ``epoch_size`` of them), before rank dealing.

    ``shares=None`` is natural sampling (each sample once per ``len`` draws); otherwise the target
    share of each class (see the module docstring for the draw). The draws come from ``rng`` when
    given, else from the generator of ``(seed, stream, epoch)``.
    """
    n = int(sample_class.size)
    size = n if epoch_size is None else int(epoch_size)
    rng = generator(seed, stream, epoch) if rng is None else rng
    if shares is None:
        if shuffle and size == n:  # one permutation of all samples: the same draw, without the gather
            whole: np.ndarray = rng.permutation(n).astype(np.int64, copy=False)
            return whole
        return _permutations(rng, np.arange(n, dtype=np.int64), size, shuffle)
    cum = np.concatenate([[0.0], np.cumsum(shares * size)])
    cum[-1] = size
    bounds = np.floor(cum + rng.random()).astype(np.int64)
    bounds[0], bounds[-1] = 0, size
    quota = np.diff(bounds)
    by_class = np.argsort(sample_class, kind="stable").astype(np.int64)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(sample_class, minlength=n_classes))])
    parts = [_permutations(rng, by_class[ptr[c]:ptr[c + 1]], int(quota[c]), shuffle)
             for c in range(n_classes) if quota[c] > 0]
    drawn = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    out: np.ndarray = drawn[rng.permutation(drawn.size)] if shuffle else np.sort(drawn, kind="stable")
    return out


@dataclass(frozen=True, eq=False)
class EpochPlan:
    """This rank's batches of every epoch for fixed loader settings (see the module docstring).

    Args:
        sample_class: class index (``0..C-1``) of every sample (``ds.index.sample_class``).
        classes: class names (for ``{class: weight}`` balance and messages).
        batch_size: samples per batch on this rank; with ``max_tokens``, the most rows of a batch
            (``None``: no limit but the budget).
        seed: seed of the epoch draws.
        shuffle: shuffle each epoch (otherwise sample order, or sorted draws when balanced).
        drop_last: drop the final short step (``True``) or pad it so every rank gets the same batches.
        balance: ``None``, ``"uniform"``, a float alpha or ``{class: weight}``.
        epoch_size: samples per epoch over all ranks (default: the number of samples).
        rank: this rank, ``0 <= rank < world_size``.
        world_size: number of ranks.
        lengths: real tokens of every sample (``ds.index.sample_tokens()``); needed by ``max_tokens``.
        max_tokens: token budget of a batch (``rows x longest row``), or ``None`` for fixed-size batches.
        multiple: a budget batch longer than this is cut down to a multiple of it
            (fairseq's ``required_batch_size_multiple``).
        extra: tokens every row has besides its sample's (a CLS column): they count in the budget.
        stream: the random stream of the draws (``"order"``; ``"epoch"`` only for states saved by 0.2).
    """

    sample_class: np.ndarray = field(repr=False)
    classes: list[str]
    batch_size: int | None
    seed: int
    shuffle: bool = True
    drop_last: bool = False
    balance: Balance = None
    epoch_size: int | None = None
    rank: int = 0
    world_size: int = 1
    lengths: np.ndarray | None = field(default=None, repr=False)
    max_tokens: int | None = None
    multiple: int = 1
    extra: int = 0
    stream: str = "order"

    def __post_init__(self) -> None:
        sc = np.asarray(self.sample_class, dtype=np.int64).reshape(-1)
        if sc.size and (sc.min() < 0 or sc.max() >= len(self.classes)):
            raise InputError(f"sample_class must be in [0, {len(self.classes)}), got values "
                             f"{short_repr(sorted(set(sc.tolist()))[:10])}")
        object.__setattr__(self, "sample_class", sc)
        if self.max_tokens is None or self.batch_size is not None:
            object.__setattr__(self, "batch_size", _check_int("batch_size", self.batch_size, 1))
        object.__setattr__(self, "seed", _check_int("seed", self.seed, 0))
        for name in ("shuffle", "drop_last"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name} must be a bool, got {short_repr(getattr(self, name))}")
        object.__setattr__(self, "world_size", _check_int("world_size", self.world_size, 1))
        rank = _check_int("rank", self.rank, 0)
        if rank >= self.world_size:
            raise InputError(f"rank must be in [0, world_size={self.world_size}), got {short_repr(self.rank)}")
        object.__setattr__(self, "rank", rank)
        if self.epoch_size is not None:
            object.__setattr__(self, "epoch_size", _check_int("epoch_size", self.epoch_size, 1))
        object.__setattr__(self, "balance", check_balance(self.balance, list(self.classes)))
        if self.stream not in ORDER_STREAMS:
            raise InputError(f"stream must be one of {list(ORDER_STREAMS)}, got {short_repr(self.stream)}")
        if sc.size == 0:
            raise InputError("the dataset has no samples: a loader needs at least one")
        self._check_budget(sc.size)
        counts = np.bincount(sc, minlength=len(self.classes))
        shares = None if self.balance is None else class_shares(self.balance, counts, list(self.classes))
        object.__setattr__(self, "_shares", shares)
        if self.batches_per_epoch == 0:
            ranks = f" x world_size={self.world_size}" if self.world_size > 1 else ""
            raise InputError(f"batch_size={self.batch_size}{ranks} with drop_last=True gives no batch: an epoch has "
                             f"{self.samples_per_epoch} samples")

    def _check_budget(self, n: int) -> None:
        """Validate the token-budget settings (``max_tokens``, ``multiple``, ``extra``, ``lengths``)."""
        object.__setattr__(self, "multiple", _check_int("required_batch_size_multiple", self.multiple, 1))
        object.__setattr__(self, "extra", _check_int("extra", self.extra, 0))
        if self.max_tokens is None:
            return
        object.__setattr__(self, "max_tokens", _check_int("max_tokens", self.max_tokens, 1))
        if self.lengths is None or np.asarray(self.lengths).shape != (n,):
            raise InputError(f"max_tokens needs lengths: one token count per sample ({n}), got "
                             f"{short_repr(self.lengths)}")
        object.__setattr__(self, "lengths", np.asarray(self.lengths, dtype=np.int64))
        if self.balance is not None or self.epoch_size is not None:
            raise InputError(f"max_tokens={self.max_tokens} serves every sample once per epoch: it does not take "
                             f"balance={short_repr(self.balance)} or epoch_size={short_repr(self.epoch_size)}")

    @property
    def samples_per_epoch(self) -> int:
        """Samples drawn per epoch over all ranks, before padding or dropping."""
        return int(self.sample_class.size) if self.epoch_size is None else int(self.epoch_size)

    @property
    def shares(self) -> np.ndarray | None:
        """Target class shares (``None`` for natural sampling)."""
        shares: np.ndarray | None = self.__dict__["_shares"]
        return shares

    @property
    def samples_per_rank(self) -> int:
        """Samples each rank reads per epoch (padding included, dropped ones excluded)."""
        if self.max_tokens is not None:
            return sum(b.size for b in self.batches(0))
        n, w, b = self.samples_per_epoch, self.world_size, self._rows
        if self.drop_last:
            return (n // (w * b)) * b
        return -(-n // w)

    @property
    def _rows(self) -> int:
        """Samples per batch of a fixed-size plan."""
        if self.batch_size is None:
            raise InputError("batch_size is None: only a plan with max_tokens has batches of varying size")
        return self.batch_size

    @property
    def batches_per_epoch(self) -> int:
        """Batches per epoch on every rank (equal on all ranks by construction)."""
        if self.max_tokens is not None:
            return deal_batches(len(self._budget_batches), self.world_size, self.drop_last)[1]
        return -(-self.samples_per_rank // self._rows)

    @property
    def max_rows(self) -> int:
        """The most samples a batch of this plan holds (``batch_size``, or the largest budget batch)."""
        if self.max_tokens is None:
            return self._rows
        return max(b.size for b in self._budget_batches)

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The global order of ``epoch`` over all ranks (before padding or dropping)."""
        epoch = _check_int("epoch", epoch, 0)
        return epoch_order(self.sample_class, len(self.classes), seed=self.seed, epoch=epoch, shuffle=self.shuffle,
                           shares=self.shares, epoch_size=self.epoch_size, stream=self.stream)

    @cached_property
    def _budget_batches(self) -> list[np.ndarray]:
        """The budget batches of every epoch, in built order (a natural epoch: the same samples every time)."""
        if self.max_tokens is None or self.lengths is None:
            raise InputError("only a plan with max_tokens (and lengths) has token-budget batches")
        ties = np.argsort(generator(self.seed, "ties").permutation(self.sample_class.size))
        return budget_batches(np.arange(self.sample_class.size, dtype=np.int64), self.lengths + self.extra, ties,
                              self.max_tokens, self.batch_size, self.multiple)

    def rank_ids(self, epoch: int) -> np.ndarray:
        """All sample ids this rank reads in ``epoch``, in order (batch ``j`` is slice ``j*B .. (j+1)*B``)."""
        if self.max_tokens is not None:
            return np.concatenate(self.batches(epoch))
        order = self.epoch_order(epoch)
        w, b, r = self.world_size, self._rows, self.rank
        step = w * b
        full = order.size // step
        head = order[:full * step].reshape(full, w, b)[:, r, :].reshape(-1)
        if self.drop_last or full * step == order.size:
            return head
        tail = order[full * step:]
        per = -(-tail.size // w)
        tail = np.resize(np.concatenate([tail, order[:max(0, per * w - tail.size)]]), per * w)
        return np.concatenate([head, tail[r * per:(r + 1) * per]])

    def batches(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches of ``epoch``, in order."""
        if self.max_tokens is not None:
            epoch = _check_int("epoch", epoch, 0)
            built = self._budget_batches
            order = generator(self.seed, self.stream, epoch).permutation(len(built)) if self.shuffle \
                else np.arange(len(built))
            picks = deal_batches(len(built), self.world_size, self.drop_last)[0]
            return [built[int(order[i])] for i in picks[self.rank::self.world_size]]
        ids = self.rank_ids(epoch)
        b = self._rows
        return [ids[i:i + b] for i in range(0, ids.size, b)]

    def widths(self, batches: list[np.ndarray]) -> list[int | None]:
        """The row width of each batch: its longest sample with ``max_tokens`` (rows only as wide as needed),
        else ``None`` (rows of the dataset's ``seqlen``)."""
        if self.max_tokens is None or self.lengths is None:
            return [None] * len(batches)
        return [int(self.lengths[b].max()) if b.size else 0 for b in batches]

    def settings(self) -> dict[str, object]:
        """The settings as a JSON-able dict (what a state's fingerprint covers). The token-budget settings and
        the stream appear only when they differ from their defaults, so a fixed-size plan has the keys it had
        in 0.2 (a loader state saved by 0.2 still matches)."""
        out: dict[str, object] = {
            "n_samples": int(self.sample_class.size), "batch_size": self.batch_size, "seed": self.seed,
            "shuffle": self.shuffle, "drop_last": self.drop_last, "balance": self.balance,
            "epoch_size": self.epoch_size, "rank": self.rank, "world_size": self.world_size}
        if self.max_tokens is not None:
            out.update(max_tokens=self.max_tokens, required_batch_size_multiple=self.multiple, extra=self.extra)
        if self.stream != "order":
            out["stream"] = self.stream
        return out
