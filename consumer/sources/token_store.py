"""A packed store's token data as a type of its own: :class:`TokenStore`, and its two implementations.

A packed store holds its documents' tokens ready-made, as one flat array in the store's dtype. Where the array
lives decides how it is read, and each way is one implementation:

- :class:`MappedTokens`: a local store, memory-mapped (zero-copy slices; :meth:`TokenStore.mapped` offers the
  array itself to the lean fetch path of :mod:`consumer.fetch.packed_rows`);
- :class:`RangedTokens`: a store in object storage, read by concurrent range requests
  (:class:`~consumer.sources.remote_tokens.RemoteTokens`), never downloaded whole;
- :class:`FileTokens`: a local store's data file read by plain ``pread`` calls, for one pass over much of a store
  (a merge copying it, a check of every chunk): a memory map would keep every page it touched resident.
  :meth:`TokenStore.for_one_pass` gives it.

Every read goes through :meth:`TokenStore.copy_ranges` or :meth:`TokenStore.read`, which check the store's chunk
sums first (its :class:`~consumer.formats.chunksums.ChunkVerifier`, when the store has them): a damaged chunk raises
:class:`~consumer.errors.FormatError` and none of its tokens reaches the output. A new way of reading a store (e.g.
``pread`` into a preallocated buffer instead of page faults on a memory map) is one more implementation of these
few methods; nothing that reads a store asks which implementation it holds.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from ..errors import FormatError
from ..formats.chunksums import ChunkVerifier
from ..formats.mmidx import copy_ranges
from .page_cache import RowAdvice
from .remote_tokens import RemoteTokens

__all__ = ["TokenStore", "MappedTokens", "RangedTokens", "FileTokens", "TokenData"]


class RawTokens(Protocol):
    """Token data read as stored, unchecked (what a chunk verifier reads the chunks it checks from)."""

    dtype: np.dtype

    def copy_ranges(self, out: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray) -> None:
        """``out[dst[r]:][:cnt[r]] = tokens[src[r]:][:cnt[r]]`` for every range ``r``."""


class TokenStore(ABC):
    """The token data of one packed store: ``size`` tokens of ``dtype``, checked by ``verifier`` (None for a
    store packed before chunk sums) the first time each chunk is read; ``data_file`` is the local file holding them
    (None for a store at a URL, whose reads check the object's ETag instead)."""

    dtype: np.dtype
    size: int
    verifier: ChunkVerifier | None
    data_file: str | None

    @property
    def itemsize(self) -> int:
        """Bytes per token."""
        return int(self.dtype.itemsize)

    def check_ranges(self, src: np.ndarray, cnt: np.ndarray, longest: int | None = None) -> None:
        """Check the chunks of token ranges ``[src[r], src[r] + cnt[r])`` before they are read (nothing when the
        store has no chunk sums, or every chunk was found intact already); ``longest`` bounds ``cnt`` when known."""
        verifier = self.verifier
        if verifier is not None and verifier.left:
            verifier.check_ranges(self._raw(), src, cnt, longest)

    @abstractmethod
    def copy_ranges(self, out: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray,
                    longest: int | None = None) -> None:
        """``out[dst[r]:][:cnt[r]] = tokens[src[r]:][:cnt[r]]`` for every range ``r`` (int64 arrays; ``out`` 1-D of
        any integer dtype), the chunks checked first (:meth:`check_ranges`)."""

    def read(self, start: int, count: int) -> np.ndarray:
        """Tokens ``[start, start + count)`` as a new array of the store's dtype, checked."""
        out = np.empty(max(int(count), 0), dtype=self.dtype)
        self.copy_ranges(out, np.array([start], dtype=np.int64), np.array([out.size], dtype=np.int64),
                         np.zeros(1, dtype=np.int64))
        return out

    def mapped(self) -> np.ndarray | None:
        """The whole token data as a plain 1-D array when it is memory-resident (zero-copy slices: the lean fetch
        path copies from it directly, after :meth:`check_ranges`), else None: read through :meth:`copy_ranges`."""
        return None

    @abstractmethod
    def read_as_stored(self, start: int, count: int) -> np.ndarray:
        """Tokens ``[start, start + count)`` as stored, *not* checked against the chunk sums: for
        ``verify_packed``, which scans every block itself and reports each damaged chunk instead of raising."""

    def for_one_pass(self) -> TokenStore:
        """The same token data, read for one pass over much of the store (a merge copying it, a check of every
        chunk); :meth:`close` it afterwards. A memory-mapped store gives :class:`FileTokens` (plain reads: a memory
        map would keep every page it touched resident); others give themselves."""
        return self

    def close(self) -> None:
        """Release what reading opened (a :class:`FileTokens`' descriptor); nothing for the others."""
        return None

    @abstractmethod
    def _raw(self) -> np.ndarray | RawTokens:
        """What the chunk verifier reads the chunks it checks from."""


class MappedTokens(TokenStore):
    """A local store's tokens, memory-mapped: ``array`` (1-D, read-only). ``readahead=False`` (a store bigger
    than the page cache, see :mod:`consumer.sources.page_cache`) tells the kernel each batch's byte ranges before
    copying them, so that a page fault never reads megabytes around a row; it needs ``data_file``."""

    advice: RowAdvice | None = None  # the class's: a MappedTokens pickled before the setting reads ahead

    def __init__(self, array: np.ndarray, verifier: ChunkVerifier | None = None, data_file: str | None = None,
                 data_offset: int = 0, readahead: bool = True) -> None:
        self.array = array
        self.plain = array.view(np.ndarray)  # slicing an np.memmap subclass costs about a microsecond more
        self.dtype, self.size = np.dtype(array.dtype), int(array.size)
        self.verifier, self.data_file, self.data_offset = verifier, data_file, int(data_offset)
        self.advice = None if readahead or data_file is None else RowAdvice(data_file, self.itemsize, data_offset)

    @property
    def readahead(self) -> bool:
        """False when each batch's ranges are advised to the kernel first (no read-ahead around a row)."""
        return self.advice is None

    def copy_ranges(self, out: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray,
                    longest: int | None = None) -> None:
        """See :meth:`TokenStore.copy_ranges`: one slice copy per range out of the memory map (the ranges advised
        to the kernel first when the store is read without read-ahead)."""
        self.check_ranges(src, cnt, longest)
        if self.advice is not None:
            self.advice.advise(src, cnt)
        copy_ranges(out, self.plain, src, cnt, dst)

    def mapped(self) -> np.ndarray | None:
        """The memory-mapped tokens as a plain array; None for a store read without read-ahead (its reads go
        through :meth:`copy_ranges`, which advises the kernel of the ranges first)."""
        return self.plain if self.readahead else None

    def read_as_stored(self, start: int, count: int) -> np.ndarray:
        """See :meth:`TokenStore.read_as_stored`: a slice of the memory map."""
        return self.plain[start:start + count]

    def for_one_pass(self) -> TokenStore:
        """Plain reads of the data file (:class:`FileTokens`), when the store knows it; else the memory map."""
        if self.data_file is None:
            return self
        return FileTokens(self.data_file, self.dtype, self.size, self.verifier, self.data_offset)

    def _raw(self) -> np.ndarray:
        return self.array

    def __repr__(self) -> str:
        more = "" if self.readahead else ", readahead=False"
        return f"MappedTokens({self.data_file!r}, dtype={self.dtype.name}, size={self.size}{more})"


class RangedTokens(TokenStore):
    """A store's tokens in object storage, read by ranges through ``remote``."""

    def __init__(self, remote: RemoteTokens, verifier: ChunkVerifier | None = None) -> None:
        self.remote = remote
        self.dtype, self.size = remote.dtype, remote.size
        self.verifier, self.data_file = verifier, None

    def copy_ranges(self, out: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray,
                    longest: int | None = None) -> None:
        """See :meth:`TokenStore.copy_ranges`: every range in flight at once, the ETag checked on each."""
        self.check_ranges(src, cnt, longest)
        self.remote.copy_ranges(out, src, cnt, dst)

    def read_as_stored(self, start: int, count: int) -> np.ndarray:
        """See :meth:`TokenStore.read_as_stored`: one range request (the ETag checked)."""
        return self.remote.read(start, count)

    def _raw(self) -> RemoteTokens:
        return self.remote

    def __repr__(self) -> str:
        return f"RangedTokens({self.remote.url!r}, dtype={self.dtype.name}, size={self.size})"


class _Preads:
    """Token ranges of a data file by plain ``pread`` calls (tokens from byte ``offset``), unchecked; the file
    opens at the first read."""

    def __init__(self, path: str, dtype: np.dtype, offset: int) -> None:
        self.path, self.dtype, self.offset, self.fd = path, dtype, offset, -1

    def read(self, start: int, count: int) -> np.ndarray:
        if self.fd < 0:
            self.fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        width = self.dtype.itemsize
        data = os.pread(self.fd, count * width, self.offset + start * width)
        if len(data) != count * width:
            raise FormatError(f"{self.path}: truncated store file: wanted {count * width} bytes at byte "
                              f"{self.offset + start * width}, got {len(data)}")
        return np.frombuffer(data, dtype=self.dtype)

    def copy_ranges(self, out: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray) -> None:
        for s, c, d in zip(src.tolist(), cnt.tolist(), dst.tolist()):
            out[d:d + c] = self.read(s, c)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class FileTokens(TokenStore):
    """A local store's tokens read by plain reads of ``data_file`` (tokens from byte ``data_offset``): no memory
    map keeps the pages of a pass over the whole store resident. Opened at the first read; :meth:`close` it."""

    def __init__(self, data_file: str, dtype: np.dtype, size: int, verifier: ChunkVerifier | None = None,
                 data_offset: int = 0) -> None:
        self.dtype, self.size, self.verifier, self.data_file = np.dtype(dtype), int(size), verifier, data_file
        self._preads = _Preads(data_file, self.dtype, int(data_offset))

    def copy_ranges(self, out: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray,
                    longest: int | None = None) -> None:
        """See :meth:`TokenStore.copy_ranges`: one ``pread`` per range."""
        self.check_ranges(src, cnt, longest)
        self._preads.copy_ranges(out, src, cnt, dst)

    def read_as_stored(self, start: int, count: int) -> np.ndarray:
        """See :meth:`TokenStore.read_as_stored`: one ``pread``."""
        return self._preads.read(start, count)

    def close(self) -> None:
        """Close the data file (reopened by the next read)."""
        self._preads.close()

    def _raw(self) -> _Preads:
        return self._preads

    def __repr__(self) -> str:
        return f"FileTokens({self.data_file!r}, dtype={self.dtype.name}, size={self.size})"


@dataclass(frozen=True, eq=False)
class TokenData:
    """The documents' tokens in a packed store.

    ``tokens`` is the whole store's token data (a :class:`~consumer.sources.token_store.TokenStore`: memory-mapped
    for a local store, read by ranges for a store in object storage; every read checks the store's chunk sums);
    ``doc_ptr[i]`` (int64) is the position in ``tokens`` of the first token of document ``i``. ``store`` (the
    format name) and ``prefix`` say where it came from.
    """

    tokens: TokenStore
    doc_ptr: np.ndarray
    store: str
    prefix: str

    @property
    def data_file(self) -> str | None:
        """The local file holding the tokens (None for a store at a URL)."""
        return self.tokens.data_file

    @property
    def verifier(self) -> ChunkVerifier | None:
        """The store's chunk verifier (None for a store packed before chunk sums), shared by subsets."""
        return self.tokens.verifier

    def subset(self, ids: np.ndarray) -> TokenData:
        """The documents ``ids``, in that order (the same token data)."""
        return replace(self, doc_ptr=self.doc_ptr[ids])

    def __setstate__(self, state: dict[str, object]) -> None:
        """Unpickle, also token data pickled before the :class:`TokenStore` type (a bare array or
        :class:`RemoteTokens` beside ``verifier`` and ``data_file`` fields)."""
        state = dict(state)
        tokens, verifier, data_file = state["tokens"], state.pop("verifier", None), state.pop("data_file", None)
        if isinstance(tokens, RemoteTokens):
            state["tokens"] = RangedTokens(tokens, verifier)  # type: ignore[arg-type]
        elif isinstance(tokens, np.ndarray):
            state["tokens"] = MappedTokens(tokens, verifier, data_file)  # type: ignore[arg-type]
        self.__dict__.update(state)
