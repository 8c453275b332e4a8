"""SQL functions over the files' raw bytes: ``head``, ``tail``, ``bytes_at``, ``contains``, ``regexp_bytes``.

=====================================  ==========================================================================
``head(path, n)``                      BLOB: the first ``n`` bytes (fewer if the file is shorter), 0 <= n <= 65536
``tail(path, n)``                      BLOB: the last ``n`` bytes, same limits
``bytes_at(path, offset, n)``          BLOB: ``n`` bytes from ``offset`` (fewer at the end, empty past it)
``contains(path, pattern)``            BOOLEAN: the BLOB ``pattern`` (0..65536 bytes; empty: true, as
                                       ``bytes.find``) occurs anywhere in the file;
                                       streamed in chunks with an overlap of ``len(pattern) - 1`` bytes, so
                                       memory stays bounded whatever the file's size
``regexp_bytes(path, pattern)``        BOOLEAN: Python's ``re.search`` of ``pattern`` (text, its UTF-8 bytes
                                       used as a bytes regex) over the whole file (read into memory:
                                       files up to :data:`MAX_REGEXP_FILE` bytes)
=====================================  ==========================================================================

``path`` must be a path of the dataset (the ``path`` column): a function never opens another file, so
``head('/etc/passwd', 10)`` is an error. A NULL argument gives NULL. Each function is a vectorised DuckDB UDF:
it receives a batch of rows (Arrow arrays, up to 2,048 rows) and reads the batch's files in a thread pool.
Every read goes through :mod:`consumer.sources.byte_reads`, i.e. the dataset's
:class:`~consumer.sources.base.ByteSource`, which checks the file is the version the dataset indexed (size and
change stamp): a file changed since raises :class:`~consumer.errors.FileChangedError`, never an answer from the new
bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from ..catalog.rows import display_path
from ..errors import InputError, short_repr
from ..sources.base import ByteSource
from ..sources.byte_reads import STREAM_CHUNK, check_file, iter_file, read_spans

__all__ = ["BYTE_FUNCTIONS", "MAX_BYTES", "MAX_REGEXP_FILE", "ByteFunctions", "contains_file"]

MAX_BYTES = 64 * 1024
"""Largest ``n`` of head / tail / bytes_at and longest ``contains`` pattern."""

MAX_REGEXP_FILE = 256 * 2**20
"""Largest file ``regexp_bytes`` reads (it needs the whole file in memory)."""

BYTE_FUNCTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "head": (("VARCHAR", "BIGINT"), "BLOB"),
    "tail": (("VARCHAR", "BIGINT"), "BLOB"),
    "bytes_at": (("VARCHAR", "BIGINT", "BIGINT"), "BLOB"),
    "contains": (("VARCHAR", "BLOB"), "BOOLEAN"),
    "regexp_bytes": (("VARCHAR", "VARCHAR"), "BOOLEAN"),
}
"""Name -> (argument types, result type) in DuckDB's type names."""


def _count(v: object, what: str, limit: int | None = MAX_BYTES) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (limit is not None and v > limit):
        bound = f"0..{limit}" if limit is not None else ">= 0"
        raise InputError(f"{what} must be an integer {bound}, got {short_repr(v)}")
    return v


def contains_file(source: ByteSource, i: int, pattern: bytes, chunk: int = STREAM_CHUNK) -> bool:
    """Whether ``pattern`` occurs in file ``i`` of ``source`` (the indexed version), read ``chunk`` bytes at a
    time; consecutive chunks overlap by ``len(pattern) - 1`` bytes, so memory stays at about
    ``chunk + 2 * len(pattern)`` bytes whatever the file's size."""
    if not pattern:
        check_file(source, i)
        return True
    keep = len(pattern) - 1
    tail = b""
    for piece in iter_file(source, i, chunk):
        window = tail + bytes(piece)
        if window.find(pattern) >= 0:
            check_file(source, i)  # stopped early: the same version still, or no answer
            return True
        tail = window[max(0, len(window) - keep):] if keep else b""
    return False


class ByteFunctions:
    """The byte functions of one dataset: its :class:`~consumer.sources.base.ByteSource` (paths, recorded sizes and
    change stamps, checked reads), a thread pool (made on first use) and the exception a function raised last
    (the engine re-raises it)."""

    def __init__(self, source: ByteSource, *, workers: int = 8):
        self._source = source
        self._lookup: dict[str, int] | None = None
        self._workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self.error: BaseException | None = None

    def _where(self, path: str, name: str) -> int:
        if self._lookup is None:  # built on the first byte function call only; keyed as the path column shows them
            self._lookup = {display_path(p): k for k, p in enumerate(self._source.paths)}
        found = self._lookup.get(path)
        if found is None:
            raise InputError(f"{name}(path, ...): {path!r} is not a file of this dataset (use the path column)")
        return found

    def _map(self, fn: Callable[..., Any], rows: list[tuple[Any, ...]]) -> list[Any]:
        todo = [r for r in rows if None not in r]
        if len(todo) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="consumer-bytes")
            done = iter(list(self._pool.map(lambda r: fn(*r), todo)))
        else:
            done = iter([fn(*r) for r in todo])
        return [None if None in r else next(done) for r in rows]

    def _vector(self, name: str, fn: Callable[..., Any], out_type: pa.DataType) -> Callable[..., pa.Array]:
        def call(*columns: pa.Array) -> pa.Array:
            try:
                rows = list(zip(*(c.to_pylist() for c in columns)))
                return pa.array(self._map(fn, rows), type=out_type)
            except BaseException as e:  # kept for the engine: DuckDB only passes on the message
                self.error = e
                raise

        call.__name__ = name
        return call

    def _head(self, path: str, n: int) -> tuple[int, int, int]:
        return self._where(path, "head"), 0, _count(n, "head(path, n): n")

    def _tail(self, path: str, n: int) -> tuple[int, int, int]:
        i = self._where(path, "tail")
        n = _count(n, "tail(path, n): n")
        return i, int(self._source.sizes[i]) - n, n

    def _bytes_at(self, path: str, offset: int, n: int) -> tuple[int, int, int]:
        i = self._where(path, "bytes_at")
        offset = _count(offset, "bytes_at(path, offset, n): offset", None)
        return i, offset, _count(n, "bytes_at(path, offset, n): n")

    def _spans(self, name: str, span: Callable[..., tuple[int, int, int]]) -> Callable[..., pa.Array]:
        """A UDF reading one byte range per row: the ranges of the whole batch in one checked read, in parallel
        slices (:func:`consumer.sources.byte_reads.read_spans`)."""
        def call(*columns: pa.Array) -> pa.Array:
            try:
                rows = list(zip(*(c.to_pylist() for c in columns)))
                todo = [span(*r) for r in rows if None not in r]
                if todo:
                    ids, offsets, lengths = (np.array(x, dtype=np.int64) for x in zip(*todo))
                    if self._pool is None and len(todo) > 1:
                        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="consumer-bytes")
                    data = iter(read_spans(self._source, ids, offsets, lengths, self._workers, self._pool))
                return pa.array([None if None in r else next(data) for r in rows], type=pa.binary())
            except BaseException as e:  # kept for the engine: DuckDB only passes on the message
                self.error = e
                raise

        call.__name__ = name
        return call

    def _contains(self, path: str, pattern: bytes) -> bool:
        i = self._where(path, "contains")
        if len(pattern) > MAX_BYTES:
            raise InputError(f"contains(path, pattern): pattern must be 0..{MAX_BYTES} bytes, got {len(pattern)}")
        return contains_file(self._source, i, bytes(pattern))

    def _regexp(self, path: str, pattern: str) -> bool:
        i = self._where(path, "regexp_bytes")
        size = int(self._source.sizes[i])
        if size > MAX_REGEXP_FILE:
            raise InputError(f"regexp_bytes(path, pattern): {path!r} has {size} bytes, more than the "
                             f"{MAX_REGEXP_FILE} it reads into memory")
        try:
            rx = re.compile(pattern.encode("utf-8", "surrogateescape"))
        except re.error as e:
            raise InputError(f"regexp_bytes(path, pattern): bad pattern {pattern!r}: {e}") from None
        data = b"".join(bytes(p) for p in iter_file(self._source, i))
        return rx.search(data) is not None

    def functions(self) -> dict[str, Callable[..., pa.Array]]:
        """The vectorised UDFs by name (argument and result types in :data:`BYTE_FUNCTIONS`)."""
        spans: dict[str, Callable[..., tuple[int, int, int]]] = {"head": self._head, "tail": self._tail,
                                                                 "bytes_at": self._bytes_at}
        whole: dict[str, Callable[..., Any]] = {"contains": self._contains, "regexp_bytes": self._regexp}
        out = {name: self._spans(name, fn) for name, fn in spans.items()}
        out.update({name: self._vector(name, fn, pa.bool_()) for name, fn in whole.items()})
        return out

    def close(self) -> None:
        """Stop the thread pool."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
