"""A packed store's documents as a :class:`~consumer.sources.base.ByteSource`: :class:`StoreFiles`.

A packed store holds its documents' tokens ready-made (:class:`~consumer.sources.token_store.TokenData` over a
:class:`~consumer.sources.token_store.TokenStore`: memory-mapped from a local file, or read by ranges from an
object) and a file table (paths, sizes, classes, headers) describing files that need not exist here. Its reading
strategy (:meth:`StoreFiles.choose`) is the store's: rows are copied from its tokens; no bytes of the original
files (:meth:`StoreFiles.read_ranges` and :meth:`StoreFiles.bytes_for` refuse), no libmagic (the headers recorded at
pack time stand in for descriptions), no durable catalog rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ..errors import InputError
from .base import ByteSource, Handoff, Ranges, T
from .paths import PathList
from .token_store import TokenData

__all__ = ["TokenData", "StoreFiles"]


class StoreFiles(ByteSource):
    """The files of a packed store's table: ``paths``, ``sizes``, ``stamps`` (zeros: a store records no times) and
    their ``tokens`` (:class:`TokenData`). The headers recorded at pack time live in the dataset's document table."""

    kind = "in a packed store"

    def __init__(self, tokens: TokenData, paths: Sequence[str], sizes: np.ndarray,
                 stamps: np.ndarray | None = None) -> None:
        self.tokens = tokens
        self.paths = paths if isinstance(paths, PathList) else PathList.of(list(paths))
        sizes = np.asarray(sizes)  # int32: a peer store's token counts as its .idx holds them (mapped, no copy)
        self.sizes = sizes if sizes.dtype == np.int32 else sizes.astype(np.int64, copy=False)
        self.stamps = np.zeros(len(self.paths), dtype=np.int64) if stamps is None else np.asarray(stamps, np.int64)

    def subset(self, ids: np.ndarray) -> StoreFiles:
        """The documents ``ids``, in that order."""
        ids = np.asarray(ids, dtype=np.int64)
        return StoreFiles(self.tokens.subset(ids), PathList.of([self.paths[i] for i in ids.tolist()]),
                          self.sizes[ids], self.stamps[ids])

    def with_paths(self, paths: Sequence[str]) -> StoreFiles:
        """The same documents under ``paths`` (the same strings)."""
        return StoreFiles(self.tokens, PathList.of(paths), self.sizes, self.stamps)

    def choose(self, *, files: Callable[[ByteSource], T], store: Callable[[TokenData], T]) -> T:
        """``store(tokens)``: rows are copied from the store's :class:`TokenData`, file facts come from its table."""
        return store(self.tokens)

    def bytes_for(self, what: str) -> ByteSource:
        """Refused: a packed store holds tokens, not the bytes of its files (InputError naming ``what``)."""
        raise InputError(f"{what} reads the bytes of the files; this dataset's files are {self.kind} (it holds "
                         "their tokens, not their bytes)")

    def read_ranges(self, ids: Ranges, offsets: Ranges, lengths: Ranges, out: np.ndarray, at: Ranges) -> None:
        """Refused: a packed store holds tokens, not the bytes of its files."""
        raise InputError(f"{self.tokens.prefix}: the files of a packed store are not read (it holds their tokens); "
                         "open the source files to read their bytes")

    def describe(self, paths: Sequence[str], *, kinds: Sequence[str], verbose: bool = False,
                 chunk: int = 256) -> Iterator[tuple[str | None, str | None]]:
        """Refused: a store's files are not described by libmagic (their headers were recorded at pack time)."""
        raise InputError(f"{self.tokens.prefix}: the files of a packed store are not described by libmagic; their "
                         "headers were recorded at pack time")

    def handoff(self) -> Handoff:
        """A store reopens from its prefix (the dataset's own recipe), not from a handoff."""
        return {"kind": "store", "prefix": self.tokens.prefix}
