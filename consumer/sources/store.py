"""A packed store's documents as a :class:`~consumer.sources.base.ByteSource`: :class:`StoreFiles`.

A packed store holds its documents' tokens ready-made (:class:`TokenData`: memory-mapped from a local file, or read
by ranges from an object, :class:`~consumer.sources.remote_tokens.RemoteTokens`) and a file table (paths, sizes,
classes, headers) describing files that need not exist here. So it offers ``tokens`` and nothing else: no bytes of
the original files (:meth:`StoreFiles.read_ranges` refuses), no libmagic (the headers recorded at pack time stand
in for descriptions), no durable catalog rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import InputError
from .base import ByteSource
from .paths import PathList

__all__ = ["TokenData", "StoreFiles"]


@dataclass(frozen=True, eq=False)
class TokenData:
    """The documents' tokens in a packed store.

    ``tokens`` is the whole store as one read-only 1-D array in the store's dtype (a memory map), or, for a store
    in object storage, a :class:`~consumer.sources.remote_tokens.RemoteTokens` with the same slicing and a
    ``copy_ranges`` method; ``doc_ptr[i]`` (int64) is the position in ``tokens`` of the first token of document
    ``i``. ``store`` (the format name) and ``prefix`` say where it came from; ``data_file`` is the local file holding
    ``tokens`` (None for a store at a URL, whose reads check the object's ETag instead).
    ``verifier`` (a :class:`~consumer.formats.chunksums.ChunkVerifier`, None for a store packed before chunk
    sums) checks each chunk of ``tokens`` the first time it is read: every read of ``tokens`` calls
    ``verifier.check_ranges(tokens, src, cnt)`` (or ``check(tokens, byte_lo, byte_hi)``) first.
    """

    tokens: Any  # np.ndarray or RemoteTokens
    doc_ptr: np.ndarray
    store: str
    prefix: str
    data_file: str | None = None
    verifier: Any = None  # ChunkVerifier or None (shared by subsets: one map of verified chunks per open store)

    def subset(self, ids: np.ndarray) -> TokenData:
        """The documents ``ids``, in that order (the same token data)."""
        return replace(self, doc_ptr=self.doc_ptr[ids])


class StoreFiles(ByteSource):
    """The files of a packed store's table: ``paths``, ``sizes``, ``stamps`` (zeros: a store records no times) and
    their ``tokens`` (:class:`TokenData`). The headers recorded at pack time live in the dataset's document table."""

    kind = "in a packed store"
    whole_files = False
    durable = False

    def __init__(self, tokens: TokenData, paths: Sequence[str], sizes: np.ndarray,
                 stamps: np.ndarray | None = None) -> None:
        self.tokens = tokens
        self.paths = paths if isinstance(paths, PathList) else PathList.of(list(paths))
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.stamps = np.zeros(len(self.paths), dtype=np.int64) if stamps is None else np.asarray(stamps, np.int64)

    def subset(self, ids: np.ndarray) -> StoreFiles:
        """The documents ``ids``, in that order."""
        ids = np.asarray(ids, dtype=np.int64)
        return StoreFiles(self.tokens.subset(ids), PathList.of([self.paths[i] for i in ids.tolist()]),
                          self.sizes[ids], self.stamps[ids])

    def with_paths(self, paths: Sequence[str]) -> StoreFiles:
        """The same documents under ``paths`` (the same strings)."""
        return StoreFiles(self.tokens, PathList.of(paths), self.sizes, self.stamps)

    def read_ranges(self, ids: Any, offsets: Any, lengths: Any, out: np.ndarray, at: Any) -> None:
        """Refused: a packed store holds tokens, not the bytes of its files."""
        raise InputError(f"{self.tokens.prefix}: the files of a packed store are not read (it holds their tokens); "
                         "open the source files to read their bytes")

    def describe(self, paths: Sequence[str], *, kinds: Sequence[str], verbose: bool = False,
                 chunk: int = 256) -> Iterator[tuple[str | None, str | None]]:
        """Refused: a store's files are not described by libmagic (their headers were recorded at pack time)."""
        raise InputError(f"{self.tokens.prefix}: the files of a packed store are not described by libmagic; their "
                         "headers were recorded at pack time")

    def handoff(self) -> dict:
        """A store reopens from its prefix (the dataset's own recipe), not from a handoff."""
        return {"kind": "store", "prefix": self.tokens.prefix}
