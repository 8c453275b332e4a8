"""The token data of a packed store held in object storage, read by concurrent range requests.

:class:`RemoteTokens` stands where a local store has its memory-mapped token array
(``TokenData.tokens``, :mod:`consumer.sources.store`): it has the array's ``dtype``, ``size`` and ``itemsize``, slicing
(``tokens[a:b]``, ``tokens[i]``) returns numpy arrays, and :meth:`RemoteTokens.copy_ranges` fills many
ranges of a batch at once, exactly like :func:`~consumer.formats.mmidx.copy_ranges` does from a memory map.
Every range of one call is in flight at once through a :class:`~consumer.sources.range_reader.RemoteReader`
(retries, timeouts, the ETag recorded at open checked on every request, optional read-through cache);
the data file is never downloaded whole. A store rewritten since it was opened raises
:class:`~consumer.errors.FileChangedError` naming the URL, and no byte of a partial answer is served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..errors import InputError, short_repr
from ..formats.mmidx import copy_ranges

if TYPE_CHECKING:
    from .range_reader import RemoteReader

__all__ = ["RemoteTokens"]


class RemoteTokens:
    """``count`` tokens of ``dtype`` stored at byte ``offset`` of the object ``url`` (``object_size`` bytes,
    ETag ``etag`` at open; None when the backend has none), read through ``reader``. Picklable (the reader
    reopens its connections in each process)."""

    ndim = 1

    def __init__(self, reader: RemoteReader, url: str, etag: str | None, object_size: int, offset: int,
                 dtype: npt.DTypeLike, count: int) -> None:
        self.reader, self.url, self.etag = reader, url, etag
        self.object_size, self.offset, self.dtype = int(object_size), int(offset), np.dtype(dtype)
        self.size = int(count)
        if self.offset + self.size * self.dtype.itemsize > self.object_size:
            raise InputError(f"count: {count} tokens of {self.dtype.name} at byte {offset} do not fit in {url!r} "
                             f"({object_size} bytes)")

    @property
    def itemsize(self) -> int:
        """Bytes per token."""
        return int(self.dtype.itemsize)

    @property
    def shape(self) -> tuple[int]:
        """``(size,)``, as for a 1-D array."""
        return (self.size,)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"RemoteTokens({self.url!r}, dtype={self.dtype.name}, size={self.size})"

    def __getitem__(self, key: int | slice) -> Any:
        """``tokens[a:b]`` (step 1) as a new array, or ``tokens[i]`` as a numpy scalar."""
        if isinstance(key, slice):
            start, stop, step = key.indices(self.size)
            if step != 1:
                raise InputError(f"key: remote tokens are sliced with step 1, got {short_repr(key)}")
            return self.read(start, max(stop - start, 0))
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            i = int(key) + (self.size if key < 0 else 0)
            if not 0 <= i < self.size:
                raise IndexError(f"key: index {int(key)} is out of bounds for {self.size} tokens")
            return self.read(i, 1)[0]
        raise InputError(f"key: remote tokens take an int or a slice, got {short_repr(key)}")

    def read(self, start: int, count: int) -> np.ndarray:
        """Tokens ``[start, start + count)`` as a new array of the store's dtype."""
        out = np.empty(int(count), dtype=self.dtype)
        self.copy_ranges(out, np.array([start], dtype=np.int64), np.array([count], dtype=np.int64),
                         np.zeros(1, dtype=np.int64))
        return out

    def copy_ranges(self, out: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray) -> None:
        """Copy ``tokens[src[r] : src[r] + cnt[r]]`` to ``out[dst[r] : dst[r] + cnt[r]]`` for every range ``r``
        (``out`` 1-D, any integer dtype): one concurrent read of every range, then one local copy each."""
        src, cnt, dst = (np.asarray(v, dtype=np.int64) for v in (src, cnt, dst))
        live = np.flatnonzero(cnt > 0)
        if not live.size:
            return
        src, cnt, dst = src[live], cnt[live], dst[live]
        if int(src.min()) < 0 or int((src + cnt).max()) > self.size:
            i = int(np.argmax((src < 0) | (src + cnt > self.size)))
            raise InputError(f"src: range {int(src[i])}+{int(cnt[i])} is outside the {self.size} tokens of "
                             f"{self.url!r}")
        width = self.dtype.itemsize
        at = np.cumsum(cnt) - cnt  # token position of each range in the scratch buffer
        scratch = np.empty(int(cnt.sum()) * width, dtype=np.uint8)
        k = int(src.size)
        self.reader.read_ranges([self.url] * k, self.offset + src * width, cnt * width, scratch, at * width,
                                expected_etags=[self.etag] * k, expected_sizes=np.full(k, self.object_size))
        copy_ranges(out, scratch.view(self.dtype), at, cnt, dst)
