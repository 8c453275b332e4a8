"""Many paths in little memory: one packed byte blob and offsets behind a read-only sequence of ``str``.

A Python list of 10^7 paths of ~35 characters costs ~1 GB (a ``str`` object of ~90 bytes per path plus its
list slot). A :class:`PathList` keeps each path's exact bytes (``os.fsencode``) once, joined by NUL in one
``uint8`` array (the layout of the index cache's ``paths`` array), and one int64 offset per path: ~45 bytes
per path. A path is decoded when it is asked for. It reads like a list of ``str``: ``len``, ``paths[i]``
(negative too), slices, iteration, ``in``, ``index``, ``==`` with a list, a tuple or another PathList, and
``+`` (a new list); it cannot be changed. A slice is a PathList: with step 1 it shares the blob (no copy).
"""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from ..errors import InputError, short_repr
from ..formats.mmidx import copy_ranges

__all__ = ["PathList"]

_CHUNK = 1 << 16  # paths encoded or decoded at a time
_WINDOW = 1 << 24  # bytes of the blob searched for separators at a time
_ENC, _ERR = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()  # os.fsdecode's codec


class PathList(Sequence[str]):
    """Read-only sequence of paths stored as one NUL-joined byte blob plus offsets (see the module docstring).

    ``PathList(blob, at, lo, hi)``: path ``i`` (``lo <= i < hi``) is ``blob[at[i]:at[i + 1] - 1]``, with
    ``at[-1] == blob.size + 1``. Build one with :meth:`of` (from ``str`` paths) or :meth:`from_blob`.
    """

    __slots__ = ("_at", "_at_view", "_blob", "_hi", "_lo", "_view")

    def __init__(self, blob: np.ndarray, at: np.ndarray, lo: int = 0, hi: int | None = None) -> None:
        self._blob, self._at = blob, at
        # memoryviews: indexing and slicing them is several times cheaper than indexing numpy arrays
        self._view, self._at_view = memoryview(blob), memoryview(at)  # type: ignore[arg-type]
        self._lo, self._hi = int(lo), int(at.size - 1 if hi is None else hi)

    @classmethod
    def of(cls, paths: Sequence[str] | PathList) -> PathList:
        """``paths`` (a sequence of ``str``) packed; a PathList is returned as it is. Encoded a chunk at a
        time, twice (byte lengths, then bytes), so no second copy of all paths exists at any time."""
        if isinstance(paths, PathList):
            return paths
        return cls.concat([paths])

    @classmethod
    def concat(cls, parts: Sequence[Sequence[str]]) -> PathList:
        """The paths of every sequence in ``parts``, in order, in one PathList (one blob); PathLists are joined
        as bytes (no ``str`` per path)."""
        if parts and all(isinstance(p, PathList) for p in parts):
            return cls._joined_blobs([p for p in parts if len(p)])  # type: ignore[misc]
        n = sum(len(p) for p in parts)
        at = np.zeros(n + 1, dtype=np.int64)
        k = 1
        for part in parts:
            for i in range(0, len(part), _CHUNK):
                chunk = part[i:i + _CHUNK]
                data = np.frombuffer(os.fsencode("\0".join(chunk) + "\0"), dtype=np.uint8)
                ends = np.flatnonzero(data == 0)  # where each path's separator sits
                if ends.size != len(chunk):
                    bad = next(p for p in chunk if "\0" in p)
                    raise InputError(f"paths: a path cannot contain a NUL byte, got {short_repr(bad)}")
                at[k:k + len(chunk)] = np.diff(ends, prepend=-1)  # bytes of each path + 1
                k += len(chunk)
        np.cumsum(at, out=at)
        blob = np.empty(max(int(at[-1]) - 1, 0), dtype=np.uint8)
        k = 0
        for part in parts:
            for i in range(0, len(part), _CHUNK):
                chunk = part[i:i + _CHUNK]
                encoded = os.fsencode("\0".join(chunk))
                lo = int(at[k])
                blob[lo:lo + len(encoded)] = np.frombuffer(encoded, dtype=np.uint8)
                if lo + len(encoded) < blob.size:
                    blob[lo + len(encoded)] = 0
                k += len(chunk)
        return cls(blob, at)

    @classmethod
    def _joined_blobs(cls, parts: list[PathList]) -> PathList:
        """Non-empty PathLists one after another: their blobs joined by a separator, offsets shifted."""
        if not parts:
            return cls.of([])
        blobs, ats, base = [], [np.zeros(1, dtype=np.int64)], 0
        for k, p in enumerate(parts):
            if k:
                blobs.append(np.zeros(1, dtype=np.uint8))
            blobs.append(p.packed())
            ats.append(p.offsets()[1:] + base)
            base = int(ats[-1][-1])
        return cls(np.concatenate(blobs), np.concatenate(ats))

    @classmethod
    def from_blob(cls, blob: np.ndarray) -> PathList:
        """The paths of a NUL-joined blob (as :func:`consumer.util.fileio.pack_paths` writes it; an empty blob is one
        empty path). The blob is kept, not copied (a memory-mapped one stays mapped)."""
        blob = np.ascontiguousarray(blob, dtype=np.uint8).reshape(-1)
        cuts = [np.flatnonzero(blob[i:i + _WINDOW] == 0) + (i + 1) for i in range(0, blob.size, _WINDOW)]
        at = np.concatenate([np.zeros(1, dtype=np.int64), *cuts, np.full(1, blob.size + 1, dtype=np.int64)])
        return cls(blob, at.astype(np.int64, copy=False))

    def packed(self) -> np.ndarray:
        """These paths' bytes joined by NUL (a view of the blob, no copy)."""
        if self._hi <= self._lo:
            return self._blob[:0]
        return self._blob[int(self._at[self._lo]):int(self._at[self._hi]) - 1]

    def offsets(self) -> np.ndarray:
        """Where each path starts in :meth:`packed` (int64, ``len + 1`` entries, a new array): path ``i`` is
        ``packed()[o[i]:o[i + 1] - 1]`` (the byte before each next start is its NUL separator)."""
        at = self._at[self._lo:self._hi + 1]
        out: np.ndarray = at - at[0]
        return out

    def __len__(self) -> int:
        return self._hi - self._lo

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> PathList: ...

    def __getitem__(self, i: int | slice) -> str | PathList:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:  # not one run of the blob: packed anew
                return PathList.of([self[j] for j in range(start, stop, step)])
            return PathList(self._blob, self._at, self._lo + start, self._lo + max(start, stop))
        j = operator.index(i)
        n = len(self)
        if j < 0:
            j += n
        if not 0 <= j < n:
            raise IndexError(f"path index {i} out of range for {n} paths")
        j += self._lo
        return self._view[self._at_view[j]:self._at_view[j + 1] - 1].tobytes().decode(_ENC, _ERR)

    def take(self, ids: np.ndarray | list[int], raw: bool = False) -> list[Any]:
        """The paths at positions ``ids`` (valid, non-negative), as a list of ``str``, or with ``raw`` of their
        bytes as stored (``os.fsencode`` of each; ``os.open`` takes them as they are): the reader's per-batch
        look-up, offsets gathered in one numpy step."""
        j = np.asarray(ids, dtype=np.int64) + self._lo
        view, at = self._view, self._at
        if raw:
            return [view[a:b].tobytes() for a, b in zip(at[j].tolist(), (at[j + 1] - 1).tolist())]
        return [view[a:b].tobytes().decode(_ENC, _ERR) for a, b in zip(at[j].tolist(), (at[j + 1] - 1).tolist())]

    def gather(self, ids: np.ndarray) -> PathList:
        """The paths at positions ``ids`` (valid, non-negative), in that order, as a new PathList: bytes gathered
        with numpy a chunk of paths at a time (no ``str`` per path)."""
        j = np.asarray(ids, dtype=np.int64) + self._lo
        size = (self._at[j + 1] - self._at[j]) if j.size else np.zeros(0, dtype=np.int64)  # bytes + separator
        at = np.zeros(j.size + 1, dtype=np.int64)
        np.cumsum(size, out=at[1:])
        blob = np.empty(max(int(at[-1]) - 1, 0), dtype=np.uint8)
        for a in range(0, j.size, _CHUNK):  # a chunk at a time: the gather's index arrays stay small
            b = min(a + _CHUNK, j.size)
            copy_ranges(blob, self._blob, self._at[j[a:b]], size[a:b] - 1, at[a:b])
        blob[at[1:-1] - 1] = 0
        return PathList(blob, at)

    def widths(self, lo: int, hi: int) -> np.ndarray:
        """Bytes of paths ``lo`` to ``hi`` (positions, ``0 <= lo <= hi <= len``), each with its separator (int64):
        what a writer needs to lay the blob out before it writes it (:meth:`piece` by piece)."""
        return np.diff(self._at[self._lo + lo:self._lo + hi + 1])

    def piece(self, lo: int, hi: int) -> PathList:
        """Paths ``lo`` to ``hi`` as a PathList whose :meth:`packed` is their bytes (here a view; a list made on
        demand makes only these)."""
        return self[lo:hi]

    def __iter__(self) -> Iterator[str]:
        for a in range(self._lo, self._hi, _CHUNK):
            b = min(a + _CHUNK, self._hi)
            yield from os.fsdecode(self._blob[int(self._at[a]):int(self._at[b]) - 1].tobytes()).split("\0")

    def same_blob(self, other: PathList) -> bool:
        """Whether ``other`` shares this one's blob and offsets (a slice of the same PathList)."""
        return other._blob is self._blob and other._at is self._at

    def joined(self, other: PathList) -> PathList | None:
        """This PathList and ``other`` as one, without copying, when ``other`` continues it in the same blob."""
        return PathList(self._blob, self._at, self._lo, other._hi) if self.same_blob(other) and \
            other._lo == self._hi else None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PathList):
            return len(self) == len(other) and np.array_equal(self.packed(), other.packed())
        if isinstance(other, (list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __add__(self, other: object) -> list[str]:
        if isinstance(other, (list, tuple, PathList)):
            return [*self, *other]
        return NotImplemented

    def __radd__(self, other: object) -> list[str]:
        if isinstance(other, (list, tuple)):
            return [*other, *self]
        return NotImplemented

    def copy(self) -> list[str]:
        """The paths as a new, mutable ``list`` of ``str`` (what ``ds.files.copy()`` gave when it was a list)."""
        return list(self)

    def __hash__(self) -> int:
        return hash((len(self), self.packed().tobytes()))

    def __repr__(self) -> str:
        head = list(self[:3])
        more = f", ... ({len(self)} paths)" if len(self) > 3 else ""
        return f"PathList({head!r}{more})"

    def __reduce__(self) -> tuple[type[PathList], tuple[Any, ...]]:
        return PathList, (self._blob, self._at, self._lo, self._hi)
