"""The paths documents show (SQL ``path``, errors, ``ds.files``): ``container#record`` for lines, JSON records and
Parquet rows (``record`` 0-based), ``archive.tar/member`` for tar members. Built straight into one
:class:`~consumer.sources.paths.PathList` blob with numpy (no Python string per document), and only when first
needed (:class:`RecordPaths`: building a dataset and counting its documents never makes them)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..paths import PathList

__all__ = ["record_paths", "RecordPaths"]


def _numbered(prefix: bytes, records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``prefix + decimal(record) + NUL`` for every record (records non-decreasing), one uint8 blob, and the byte
    length of each (NUL included)."""
    if not records.size:
        return np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64)
    digits = _digits(records)
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


def _digits(records: np.ndarray) -> np.ndarray:
    """Decimal digits of each (non-negative) record number."""
    digits = np.ones(records.size, dtype=np.int64)
    for d in range(1, 19):  # 10**19 is past int64: numpy would compare as objects
        digits += records >= 10 ** d
    return digits


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
            blob, width = _numbered(os.fsencode(name) + b"#", records[lo:hi].astype(np.int64))  # int32 is narrow
            parts.append(blob)
            widths.append(width)
    if not parts:
        return PathList.of([])
    joined = np.concatenate(parts)
    at = np.zeros(sum(w.size for w in widths) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(widths), out=at[1:])
    return PathList(joined[:-1] if joined.size else joined, at)


class RecordPaths(PathList):
    """A :class:`~consumer.sources.paths.PathList` of document paths made on first use: its length is known at once,
    slices stay lazy, and anything else builds the blob (:func:`record_paths` of ``args[:4]``, taken in the order
    ``args[4]`` when there is one: documents ordered by a class field) once for every slice of it. Pickles as its
    arguments (small arrays), not as the blob."""

    __slots__ = ("_args", "_cell", "_n0", "_n1")

    def __init__(self, args: tuple[Any, ...], lo: int = 0, hi: int | None = None,
                 cell: dict[str, Any] | None = None) -> None:
        self._args, self._cell = args, cell if cell is not None else {}
        self._n0 = int(lo)
        self._n1 = int(len(args[1]) if hi is None else hi)

    def _made(self) -> bool:
        try:
            object.__getattribute__(self, "_blob")
        except AttributeError:
            return False
        return True

    def __getattr__(self, name: str) -> object:  # an unset slot of PathList: build the paths now
        if name not in PathList.__slots__:
            raise AttributeError(name)
        made = self._cell.get("paths")
        if made is None:
            made = record_paths(*self._args[:4])
            if self._order is not None:  # the documents in another order
                made = PathList.of(made.take(self._order))
            self._cell["paths"] = made
        PathList.__init__(self, made._blob, made._at, self._n0, self._n1)
        return object.__getattribute__(self, name)

    def __len__(self) -> int:
        return self._n1 - self._n0

    def numbered(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
        """What these paths are made from, when they are the whole list of numbered records and not made yet: each
        document's container and record number (in the containers' order) and the order the documents take
        (None: that same order); else None."""
        if not self._lazy() or (self._n0, self._n1) != (0, len(self._args[1])):
            return None
        return self._args[1], self._args[2], self._order

    @property
    def _order(self) -> np.ndarray | None:
        """The order the documents take, when not the containers' (``args[4]``), else None."""
        return self._args[4] if len(self._args) > 4 else None

    def _lazy(self) -> bool:
        """Whether paths can be made a piece at a time (not made yet, numbered records: no member names)."""
        return not self._made() and self._args[3] is None

    def _ids(self, lo: int, hi: int) -> np.ndarray | slice:
        order = self._order
        return slice(self._n0 + lo, self._n0 + hi) if order is None else order[self._n0 + lo:self._n0 + hi]

    def widths(self, lo: int, hi: int) -> np.ndarray:
        """See :meth:`PathList.widths`; computed from the containers' names and the record numbers (``name#record``
        and a separator) while the paths are not made."""
        if not self._lazy():
            return PathList.widths(self, lo, hi)
        ids = self._ids(lo, hi)
        names = self._cell.get("name_bytes")
        if names is None:  # once per list (O(containers)), shared by its slices
            names = self._cell["name_bytes"] = np.array([len(os.fsencode(c)) for c in self._args[0]], np.int64)
        out: np.ndarray = names[self._args[1][ids]] + 2 + _digits(np.asarray(self._args[2][ids], dtype=np.int64))
        return out

    def piece(self, lo: int, hi: int) -> PathList:
        """See :meth:`PathList.piece`: only these paths are made (all of them once made, or for member names)."""
        if not self._lazy():
            return PathList.piece(self, lo, hi)
        ids = self._ids(lo, hi)
        cont, rec = self._args[1][ids], self._args[2][ids]
        if cont.size < 2 or bool(np.all(cont[1:] >= cont[:-1])):
            return record_paths(self._args[0], cont, rec)
        order = np.argsort(cont, kind="stable")  # documents reordered by class: made by container, put back
        made = record_paths(self._args[0], cont[order], rec[order])
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        return made.gather(back)

    def __getitem__(self, i: Any) -> Any:  # PathList's overloads; slices stay lazy
        if isinstance(i, slice) and not self._made() and i.step in (None, 1):
            start, stop, _ = i.indices(len(self))
            return RecordPaths(self._args, self._n0 + start, self._n0 + max(start, stop), self._cell)
        return PathList.__getitem__(self, i)

    def __reduce__(self) -> tuple[Any, ...]:
        return RecordPaths, (self._args, self._n0, self._n1)
