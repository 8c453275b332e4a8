"""The paths documents show (SQL ``path``, errors, ``ds.files``): ``container#record`` for lines, JSON records and
Parquet rows (``record`` 0-based), ``archive.tar/member`` for tar members. Built straight into one
:class:`~consumer.sources.paths.PathList` blob with numpy (no Python string per document)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ..paths import PathList

__all__ = ["record_paths"]


def _numbered(prefix: bytes, records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``prefix + decimal(record) + NUL`` for every record (records non-decreasing), one uint8 blob, and the byte
    length of each (NUL included)."""
    if not records.size:
        return np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64)
    digits = np.ones(records.size, dtype=np.int64)
    for d in range(1, 19):  # 10**19 is past int64: numpy would compare as objects
        digits += records >= 10 ** d
    out = []
    head = np.frombuffer(prefix, dtype=np.uint8)
    # runs of one digit count (records only grow, so there are at most 19 runs)
    cuts = np.flatnonzero(np.diff(digits)) + 1
    for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, records.size].tolist()):
        d = int(digits[lo])
        rows = np.empty((hi - lo, head.size + d + 1), dtype=np.uint8)
        rows[:, :head.size] = head
        r = records[lo:hi]
        for j in range(d):
            rows[:, head.size + j] = (r // 10 ** (d - 1 - j)) % 10 + 48
        rows[:, -1] = 0
        out.append(rows.reshape(-1))
    return np.concatenate(out), digits + (len(prefix) + 1)


def record_paths(containers: Sequence[str], doc_container: np.ndarray, records: np.ndarray,
                 members: Sequence[Sequence[str] | None] | None = None) -> PathList:
    """The path of every document: container ``doc_container[i]`` (non-decreasing) and its record number, or its
    member name where ``members[c]`` lists them (tar)."""
    parts, widths = [], []
    bounds = np.searchsorted(doc_container, np.arange(len(containers) + 1))
    for c, name in enumerate(containers):
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        if hi == lo:
            continue
        named = members[c] if members is not None else None
        if named is not None:
            blob = np.frombuffer(os.fsencode("\0".join(f"{name}/{m}" for m in named) + "\0"), dtype=np.uint8)
            parts.append(blob)
            widths.append(np.diff(np.flatnonzero(blob == 0), prepend=-1))
        else:
            blob, width = _numbered(os.fsencode(name) + b"#", records[lo:hi])
            parts.append(blob)
            widths.append(width)
    if not parts:
        return PathList.of([])
    joined = np.concatenate(parts)
    at = np.zeros(sum(w.size for w in widths) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(widths), out=at[1:])
    return PathList(joined[:-1] if joined.size else joined, at)
