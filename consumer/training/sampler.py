"""The batch cursor of a dataset: ``create_batches``, ``get_next_batch``, ``ds[None]``, ``ds.batches`` and
``ds.state_dict`` walk an :class:`~consumer.training.plan.EpochPlan`, the same order ``ds.dataloader`` serves.

:class:`BatchCursor` holds a plan and the position of the next batch (epoch, batches of it served) and
nothing else: every batch is recomputed from the plan, a pure function of its settings and the epoch. Its
state is the one schema of :mod:`consumer.training.state`.

:class:`EpochBatcher` and :class:`TokenBudgetBatcher` are the batch orders of release 0.2, kept only as names
so that a dataset pickled by 0.2 loads; its cursor continues in 0.2's order (see :meth:`BatchCursor.restore`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError, short_repr
from .plan import Balance, EpochPlan
from .state import (
    SavedState,
    check_position,
    dataset_fingerprint,
    digest,
    make_state,
    order_settings,
    plan_from_settings,
    read_state,
)

__all__ = ["PLAN_OPTIONS", "BatchCursor", "CursorMethods", "EpochBatcher", "TokenBudgetBatcher"]

PLAN_OPTIONS = ("balance", "epoch_size", "rank", "world_size", "max_tokens", "required_batch_size_multiple")
"""The keyword options ``create_batches`` passes on to the plan (as ``ds.dataloader`` takes them)."""


class EpochBatcher:
    """Release 0.2's fixed-size batch order: only unpickled (its state becomes a cursor state)."""

    def legacy_state(self, lengths: np.ndarray) -> dict[str, object]:
        """The 0.2 ``state_dict()`` this object would have given."""
        d = self.__dict__
        return {"version": 1, "kind": "samples", "n_samples": d["n_samples"], "batch_size": d["batch_size"],
                "drop_last": d["drop_last"], "seed": d["seed"], "shuffle": d.get("shuffle", True),
                "epoch": d["epoch"], "position": d["position"]}


class TokenBudgetBatcher:
    """Release 0.2's token-budget batch order: only unpickled (its state becomes a cursor state)."""

    def legacy_state(self, lengths: np.ndarray) -> dict[str, object]:
        """The 0.2 ``state_dict()`` this object would have given, and the CLS column its budget counted."""
        d = self.__dict__
        extra = int(d["lengths"][0]) - int(lengths[0]) if lengths.size else 0
        return {"version": 1, "kind": "tokens", "n_samples": d["n_samples"], "max_tokens": d["max_tokens"],
                "max_sentences": d["max_sentences"], "required_batch_size_multiple": d["multiple"], "seed": d["seed"],
                "shuffle": d["shuffle"], "epoch": d["epoch"], "position": d["position"], "extra": extra}


class BatchCursor:
    """A dataset's batch order for ``ds[None]`` / ``get_next_batch``: a plan and the next batch's place in it.

    ``describe`` returns the dataset's description (``get_dict()`` without the cursor's own state): a state's
    ``dataset`` fingerprint is taken from it, and only when a state is saved or loaded.
    """

    def __init__(self, sample_class: np.ndarray, classes: list[str], lengths: np.ndarray, seed: int,
                 describe: Callable[[], Mapping[str, object]]):
        self.sample_class, self.classes, self.lengths, self.seed = sample_class, classes, lengths, seed
        self.describe = describe
        self.plan: EpochPlan | None = None
        self.epoch, self.position = 0, 0
        self._epoch: tuple[int, list[np.ndarray], list[int | None]] | None = None

    def epochs(self, batch_size: int | None, drop_last: bool = False, seed: int | None = None, shuffle: bool = True,
               extra: int = 0, *, balance: Balance = None, epoch_size: int | None = None, rank: int | None = None,
               world_size: int | None = None, max_tokens: int | None = None,
               required_batch_size_multiple: int = 1) -> None:
        """Start a new order from epoch 0 (``create_batches``/``create_token_batches``); ``seed=None`` is the
        dataset's seed; ``extra`` tokens per row (a CLS column) count in a token budget."""
        seed = self.seed if seed is None else seed
        if (rank is None) != (world_size is None):
            raise InputError(f"give both rank and world_size or neither, got rank={rank!r}, world_size={world_size!r}")
        self._start(EpochPlan(sample_class=self.sample_class, classes=self.classes, batch_size=batch_size, seed=seed,
                              shuffle=shuffle, drop_last=drop_last, balance=balance, epoch_size=epoch_size,
                              rank=rank or 0, world_size=world_size or 1, lengths=self.lengths,
                              max_tokens=max_tokens, multiple=required_batch_size_multiple,
                              extra=extra if max_tokens is not None else 0))

    def _start(self, plan: EpochPlan, epoch: int = 0, position: int = 0) -> None:
        self.plan, self.epoch, self.position, self._epoch = plan, epoch, position, None

    def require(self, what: str) -> EpochPlan:
        """The plan, or InputError naming ``what`` when no batches were made."""
        if self.plan is None:
            raise InputError(f"{what}: no batches yet, call create_batches(batch_size) first")
        return self.plan

    def batches(self, epoch: int) -> list[np.ndarray]:
        """All batches of ``epoch`` on this cursor's rank, in serving order (does not move the cursor)."""
        return self.require("batches").batches(epoch)

    def next(self) -> tuple[np.ndarray, int, int | None]:
        """The next batch: sample ids, epoch, and the row width (token budgets only; else None).
        Without batches it serves one sample at a time in the dataset's seeded order, as gperc did."""
        if self.plan is None:
            self._start(EpochPlan(sample_class=self.sample_class, classes=self.classes, batch_size=1, seed=self.seed))
        plan = self.require("next")
        if self.position >= plan.batches_per_epoch:
            self.epoch, self.position = self.epoch + 1, 0
        if self._epoch is None or self._epoch[0] != self.epoch:
            batches = plan.batches(self.epoch)
            self._epoch = (self.epoch, batches, plan.widths(batches))
        _, batches, widths = self._epoch
        j = self.position
        self.position += 1
        return batches[j], self.epoch, widths[j]

    # ----------------------------------------------------------------- states
    def state_dict(self) -> dict[str, object]:
        """The position as a versioned state (:mod:`consumer.training.state`)."""
        plan = self.require("state_dict")
        return make_state(plan, self.epoch, self.position, dataset_fingerprint(self.describe(), mask=False))

    def load(self, state: object) -> None:
        """Continue from a state (this schema, a loader's, or 0.2's) taken on an identical dataset."""
        saved = read_state(state)
        if saved.origin == "2" and saved.dataset != digest(dataset_fingerprint(self.describe(), mask=False)):
            raise InputError("state does not belong to this dataset: the dataset differs (files, settings or counts)")
        if saved.origin == "loader-0.2":
            raise InputError("state was saved by a 0.2 loader: load it with loader.load_state_dict()")
        self._resume(saved)

    def _resume(self, saved: SavedState) -> None:
        settings = {k: v for k, v in saved.settings.items() if k not in ("query", "mask")}
        plan = plan_from_settings(settings, self.sample_class, self.classes, self.lengths, saved.rank)
        epoch, position = check_position(plan, saved)
        self._start(plan, epoch, position)

    def snapshot(self) -> dict[str, object] | None:
        """What a pickle keeps: the plan's settings and the position (no dataset fingerprint), or None."""
        if self.plan is None:
            return None
        return {"settings": order_settings(self.plan), "rank": self.plan.rank, "epoch": self.epoch,
                "position": self.position}

    def restore(self, snapshot: object) -> None:
        """Undo :meth:`snapshot` (or take a 0.2 pickle's batcher, which continues in 0.2's order)."""
        if snapshot is None:
            self._start_none()
        elif isinstance(snapshot, (EpochBatcher, TokenBudgetBatcher)):
            self.load(snapshot.legacy_state(self.lengths))
        elif isinstance(snapshot, dict) and isinstance(snapshot.get("settings"), dict):
            rank = snapshot.get("rank", 0)
            self._resume(SavedState(int(snapshot["epoch"]), int(snapshot["position"]), dict(snapshot["settings"]),
                                    rank if isinstance(rank, int) else 0, "2"))
        else:
            raise InputError(f"a pickled dataset's batch order must be a snapshot dict, got {short_repr(snapshot)}")

    def _start_none(self) -> None:
        self.plan, self.epoch, self.position, self._epoch = None, 0, 0, None


_MODE = object()  # get_next_batch(): "the mode's query"


class CursorMethods:
    """The batch-order methods of a dataset over its cursor ``_cursor`` (a :class:`BatchCursor`, or a mixture's):
    ``batches``, ``get_next_batch``, ``state_dict``, ``load_state_dict``. ``mode`` is the query of bare selections;
    ``ds[None, query]`` serves the next batch."""

    _cursor: Any
    mode: Any

    if TYPE_CHECKING:
        def __getitem__(self, key: Any) -> dict[str, Any]: ...  # the dataset's own

    def batches(self, epoch: int) -> Sequence[np.ndarray]:
        """The sample ids of every batch of ``epoch``, in serving order (after ``create_*batches``)."""
        out: Sequence[np.ndarray] = self._cursor.batches(epoch)
        return out

    def get_next_batch(self, query: Any = _MODE) -> dict[str, Any]:
        """The next batch (see ``create_batches``); ``query`` defaults to the mode's query."""
        return self[None, self.mode if query is _MODE else query]

    def state_dict(self) -> dict[str, Any]:
        """JSON-able position of the batch iterator, for exact resumption."""
        out: dict[str, Any] = self._cursor.state_dict()
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the batch iterator from a :meth:`state_dict` taken on an identical dataset."""
        self._cursor.load(state)
