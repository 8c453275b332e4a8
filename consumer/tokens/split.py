"""Splits and crops: which files go to which split, and where a cropped long file's window starts.

- :func:`split_file_ids`: a per-class stratified split of files (``ds.split({"train": 0.9, "val": 0.1})``).
  Within each class, files are ordered by ``sha256(seed, path)`` — a key of the file itself, so the split
  is the same on every run and machine, and a file keeps its side when others are added — and cut by
  the fractions (largest remainder). Every file lands in exactly one split.
- :func:`crop_offsets`: ``long_files="crop"`` (diff style): each sample's window start inside its file, a
  pure function of ``(seed, epoch, sample id)`` (a splitmix64 hash, vectorised), uniform over the
  positions that keep the window inside the document. Independent of batch composition, so workers,
  ranks and resumes see the same crops.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InputError, short_repr
from ..util.sets import distinct

__all__ = ["split_file_ids", "crop_offsets"]


def _fractions(fractions: Any) -> dict[str, float]:
    if not isinstance(fractions, dict) or not fractions or not all(isinstance(k, str) and k for k in fractions):
        raise InputError(f"fractions must be a non-empty dict {{split name: fraction}}, got {short_repr(fractions)}")
    out = {}
    for name, f in fractions.items():
        if isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating)) or not 0 < float(f) <= 1:
            raise InputError(f"fractions[{name!r}] must be a number in (0, 1], got {short_repr(f)}")
        out[name] = float(f)
    if abs(sum(out.values()) - 1.0) > 1e-6:
        raise InputError(f"fractions must add up to 1, got {short_repr(fractions)} (sum {sum(out.values()):.6g})")
    return out


def split_file_ids(paths: Sequence[str], doc_class: np.ndarray, fractions: Any, seed: int) -> dict[str, np.ndarray]:
    """File ids of each split (sorted): stratified per class, ordered by ``sha256(seed, path)`` within a class,
    cut by ``fractions`` with the largest-remainder rule. InputError if a split would get no file."""
    shares = _fractions(fractions)
    names = list(shares)
    weights = np.array([shares[n] for n in names])
    parts: dict[str, list[np.ndarray]] = {n: [] for n in names}
    prefix = f"{int(seed)}\0".encode()
    for c in distinct(doc_class).tolist():
        ids = np.flatnonzero(doc_class == c)
        keys = [hashlib.sha256(prefix + paths[i].encode("utf-8", "surrogateescape")).digest() for i in ids.tolist()]
        ordered = ids[sorted(range(ids.size), key=keys.__getitem__)]
        exact = weights * ids.size
        counts = np.floor(exact).astype(np.int64)
        rest = ids.size - int(counts.sum())
        counts[np.argsort(-(exact - counts), kind="stable")[:rest]] += 1
        bounds = np.concatenate([[0], np.cumsum(counts)])
        for k, name in enumerate(names):
            parts[name].append(ordered[bounds[k]:bounds[k + 1]])
    out = {n: np.sort(np.concatenate(p)) for n, p in parts.items()}
    empty = [n for n, ids in out.items() if not ids.size]
    if empty:
        raise InputError(f"fractions: split(s) {empty} would get no file ({paths and len(paths)} files in all); "
                         "use larger fractions or fewer splits")
    return out


def _splitmix64(x: Any) -> Any:
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def crop_offsets(seed: int, epoch: int, sample_ids: np.ndarray, room: np.ndarray) -> np.ndarray:
    """Window starts in ``[0, room]`` (``room`` = document length - window length, per sample), uniform, a pure
    function of ``(seed, epoch, sample id)``."""
    with np.errstate(over="ignore"):
        base = _splitmix64(np.uint64(int(seed) & (2**64 - 1)) * np.uint64(0x100000001B3) + np.uint64(int(epoch)))
        h = _splitmix64(base ^ sample_ids.astype(np.uint64))
    return (h % (room.astype(np.uint64) + np.uint64(1))).astype(np.int64)
