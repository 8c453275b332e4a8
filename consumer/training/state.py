"""The one ``state_dict`` schema of a batch order, for ``ds.state_dict()`` and ``loader.state_dict()`` alike.

A state (version 2) is small JSON::

    {"kind": "consumer.order", "version": 2,
     "epoch": 3, "position": 17,           # the next batch is batch 17 of epoch 3
     "batches_per_epoch": 40, "rank": 0,   # for checks and messages
     "settings": {...},                    # EpochPlan.settings() without the rank, plus "query" for a loader
     "dataset": "<sha256>"}                # of the settings, counts and file table that decide each sample
                                           # (a loader's masking settings are with its query in "settings")

Either route loads either state when the settings match (a loader also compares its query when the state
has one). Two formats of release 0.2 still load, both in the order they were saved with:

- a batch cursor's state (``{"version": 1, "kind": "samples" | "tokens", ...}``), resumed by a plan that draws
  from 0.2's ``epoch`` stream (:mod:`consumer.util.seeds`);
- a loader's state (``{"kind": "consumer.loader", "version": 1, ...}``), whose order is the plan's own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError, short_repr
from .plan import EpochPlan

__all__ = ["STATE_KIND", "STATE_VERSION", "SavedState", "dataset_fingerprint", "digest", "make_state",
           "check_position", "order_settings", "plan_from_settings", "read_state", "settings_diff"]

STATE_KIND = "consumer.order"
STATE_VERSION = 2
LOADER_KIND_0_2 = "consumer.loader"
# the parts of ds.get_dict() that decide which tokens a sample id gives (versions and the mode left out)
_DATASET_KEYS = ("data_mode", "style", "n_bytes", "seqlen", "long_files", "sampling", "metadata", "max_header_bytes",
                 "seed", "mask", "classes", "class_to_id", "per_class", "total_files", "total_samples", "files_sha256")
_COLUMN_KEYS = ("query", "mask")  # loader settings that decide the columns, not the order
_PLAN_KEYS = ("n_samples", "batch_size", "seed", "shuffle", "drop_last", "balance", "epoch_size", "world_size",
              "max_tokens", "required_batch_size_multiple", "extra", "stream")


def dataset_fingerprint(description: Mapping[str, object], *, mask: bool = True) -> dict[str, object]:
    """The settings, counts and file-table hash of a dataset (from its ``get_dict()``) that decide what each
    sample id reads; ``mask=False`` leaves the masking settings out (a version-2 state keeps them with the
    loader's settings, as the query: they decide the columns, not the order)."""
    return {k: description[k] for k in _DATASET_KEYS if k in description and (mask or k != "mask")}


def digest(obj: object) -> str:
    """sha256 of ``obj`` as canonical JSON."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def order_settings(plan: EpochPlan) -> dict[str, object]:
    """The plan's settings without the rank: every rank is at the same (epoch, batch), so one state resumes all."""
    out = plan.settings()
    del out["rank"]
    return out


def make_state(plan: EpochPlan, epoch: int, position: int, dataset: Mapping[str, object],
               extra_settings: Mapping[str, object] | None = None) -> dict[str, object]:
    """The version-2 state of ``plan`` at (``epoch``, ``position``) for a dataset of fingerprint ``dataset``."""
    return {"kind": STATE_KIND, "version": STATE_VERSION, "epoch": int(epoch), "position": int(position),
            "batches_per_epoch": plan.batches_per_epoch, "rank": plan.rank, "dataset": digest(dict(dataset)),
            "settings": {**order_settings(plan), **(extra_settings or {})}}


@dataclass(frozen=True)
class SavedState:
    """A state read back: where to continue, the order's settings, and what identifies its dataset.

    ``origin``: ``"2"`` (this schema), ``"loader-0.2"`` (``fingerprint`` covers dataset and settings together)
    or ``"cursor-0.2"`` (no dataset identity beyond ``n_samples``).
    """

    epoch: int
    position: int
    settings: dict[str, object]
    rank: int
    origin: str
    dataset: str | None = None
    fingerprint: str | None = None


def _int(state: Mapping[str, object], key: str) -> int:
    value = state[key]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InputError(f"state[{key!r}] must be an int >= 0, got {short_repr(value)}")
    return int(value)


def _require(state: Mapping[str, object], keys: tuple[str, ...]) -> None:
    missing = [k for k in keys if k not in state]
    if missing:
        raise InputError(f"state misses {missing}; pass a dict made by state_dict()")


def _cursor_0_2(state: Mapping[str, object]) -> dict[str, object]:
    """The plan settings of a 0.2 batch cursor's state (its draws: the ``epoch`` stream)."""
    if state.get("kind", "samples") == "samples":
        _require(state, ("n_samples", "batch_size", "drop_last", "seed", "epoch", "position"))
        return {"n_samples": state["n_samples"], "batch_size": state["batch_size"], "seed": state["seed"],
                "shuffle": state.get("shuffle", True), "drop_last": state["drop_last"], "stream": "epoch"}
    _require(state, ("n_samples", "max_tokens", "max_sentences", "required_batch_size_multiple", "seed", "shuffle",
                     "epoch", "position"))
    return {"n_samples": state["n_samples"], "batch_size": state["max_sentences"], "seed": state["seed"],
            "shuffle": state["shuffle"], "drop_last": False, "max_tokens": state["max_tokens"],
            "required_batch_size_multiple": state["required_batch_size_multiple"], "extra": state.get("extra", 0),
            "stream": "epoch"}


def read_state(state: object) -> SavedState:
    """A state of this schema or of release 0.2, checked (``InputError`` naming what is wrong)."""
    if not isinstance(state, dict):
        raise InputError(f"state must be a dict made by state_dict(), got {short_repr(state)}")
    kind, version = state.get("kind"), state.get("version")
    if kind == STATE_KIND and version == STATE_VERSION:
        _require(state, ("epoch", "position", "settings", "dataset"))
        settings = state["settings"]
        if not isinstance(settings, dict):
            raise InputError(f"state['settings'] must be a dict, got {short_repr(settings)}")
        rank = state.get("rank", 0)
        return SavedState(_int(state, "epoch"), _int(state, "position"), dict(settings),
                          rank if isinstance(rank, int) else 0, "2", dataset=str(state["dataset"]))
    if kind == LOADER_KIND_0_2 and version == 1:
        _require(state, ("epoch", "position", "fingerprint"))
        settings = state.get("settings")
        return SavedState(_int(state, "epoch"), _int(state, "position"),
                          dict(settings) if isinstance(settings, dict) else {}, 0, "loader-0.2",
                          fingerprint=str(state["fingerprint"]))
    if version == 1 and kind in (None, "samples", "tokens"):
        settings = _cursor_0_2(state)  # checks the keys first
        return SavedState(_int(state, "epoch"), _int(state, "position"), settings, 0, "cursor-0.2")
    raise InputError(f"state must be a dict made by state_dict() (kind {STATE_KIND!r}, version {STATE_VERSION}, "
                     f"or a state saved by 0.2), got kind={short_repr(kind)}, version={short_repr(version)}")


def settings_diff(theirs: Mapping[str, object], mine: Mapping[str, object]) -> dict[str, tuple[object, object]]:
    """``{key: (state's value, this order's value)}`` of the settings that differ. ``query`` and ``mask`` count
    only when both have them (a cursor's state has neither; it resumes a loader and the other way round)."""
    keys = [k for k in {**theirs, **mine} if k not in _COLUMN_KEYS or (k in theirs and k in mine)]
    return {k: (theirs.get(k), mine.get(k)) for k in keys if theirs.get(k) != mine.get(k)}


def plan_from_settings(settings: Mapping[str, object], sample_class: np.ndarray, classes: list[str],
                       lengths: np.ndarray, rank: int = 0) -> EpochPlan:
    """The plan a state's ``settings`` describe, over this dataset's samples (``n_samples`` must match)."""
    n = int(sample_class.size)
    if settings.get("n_samples") != n:
        raise InputError(f"state['n_samples']={short_repr(settings.get('n_samples'))} does not match this dataset "
                         f"({n} samples)")
    unknown = sorted(set(settings) - set(_PLAN_KEYS) - set(_COLUMN_KEYS))
    if unknown:
        raise InputError(f"state['settings'] has unknown keys {unknown}; pass a dict made by state_dict()")
    world = settings.get("world_size", 1)
    keep = isinstance(world, int) and 0 <= rank < world
    kwargs: dict[str, Any] = {  # checked by EpochPlan, which names any bad value
        "batch_size": settings.get("batch_size"), "seed": settings.get("seed"),
        "shuffle": settings.get("shuffle", True), "drop_last": settings.get("drop_last", False),
        "balance": settings.get("balance"), "epoch_size": settings.get("epoch_size"), "world_size": world,
        "rank": rank if keep else 0, "max_tokens": settings.get("max_tokens"),
        "multiple": settings.get("required_batch_size_multiple", 1), "extra": settings.get("extra", 0),
        "stream": settings.get("stream", "order")}
    return EpochPlan(sample_class=sample_class, classes=classes, lengths=lengths, **kwargs)


def check_position(plan: EpochPlan, saved: SavedState) -> tuple[int, int]:
    """(epoch, position) to continue at: a position at the end of an epoch is the start of the next."""
    n = plan.batches_per_epoch
    if saved.position > n:
        raise InputError(f"state['position']={saved.position} is past the {n} batches of an epoch")
    if saved.position == n:
        return saved.epoch + 1, 0
    return saved.epoch, saved.position
