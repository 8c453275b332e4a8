"""Modalities packed data ``.pbin``: the byte layout below, the reader and the writer.

Byte layout (current format, Modalities >= 2024-06-25)::

    offset        size       field
    0             8          data_len: length of the data segment in bytes, u64 little-endian
    8             4          token_size_in_bytes (width) in {1, 2, 4}, u32 little-endian
    12            data_len   tokens: unsigned little-endian ints of that width, documents back to back
    12+data_len   to EOF     pickle of list[tuple[int, int]]: one (offset, length) per document, both in
                             bytes, offset relative to the start of the data segment

We write the pickle with protocol 4 (what Python 3.8-3.13 write by default; 3.14 would write 5).

Reading never executes the pickle: it is loaded by an Unpickler whose ``find_class`` always refuses
(the index needs only list/tuple/int opcodes), then validated: a list of 2-tuples of non-negative
ints, first offset 0, contiguous, lengths multiples of the width, last offset + length == data_len,
``data_len + 12 <= file size``, width in {1, 2, 4}.

Older files (no version field exists; detected heuristically and refused with a FormatError naming
the era): <= 2024-01-30 an 8-byte big-endian data_len, 4-byte big-endian tokens, offsets absolute
from byte 8; 2024-01-30 .. 2024-04-03 a 12-byte big-endian header; 2024-04-03 .. 2024-06-25 a
little-endian header but offsets absolute (first offset 12).
"""

from __future__ import annotations

import io
import os
import pickle
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from ..errors import FormatError, InputError, SampleIndexError, short_repr
from ..fileio import discard, open_temp, stat_regular
from ..validate import is_int

__all__ = ["HEADER_SIZE", "TOKEN_WIDTHS", "PbinFile", "read_pbin", "write_pbin", "load_index_pickle"]

HEADER_SIZE = 12
TOKEN_WIDTHS = (1, 2, 4)
PICKLE_PROTOCOL = 4
_DTYPES = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}


# ------------------------------------------------------------------------------------ pickle


class _RefusingUnpickler(pickle.Unpickler):
    """Unpickler that can build lists, tuples and ints but never looks up (let alone calls) anything."""

    def find_class(self, module: str, name: str) -> object:
        raise FormatError(
            f"expected a pickle of only lists, tuples and ints, got a reference to {module}.{name}; "
            "refusing to load it (a pickle that names a callable can execute code)"
        )

    def persistent_load(self, pid: object) -> object:
        raise FormatError(f"expected a pickle of only lists, tuples and ints, got a persistent id {short_repr(pid)}")


def _unpickle(data: bytes, what: str) -> object:
    try:
        return _RefusingUnpickler(io.BytesIO(data)).load()
    except FormatError as exc:
        raise FormatError(f"{what}: {exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            OverflowError, MemoryError, RecursionError, UnicodeDecodeError) as exc:
        raise FormatError(f"{what}: not a valid pickle ({type(exc).__name__}: {exc})") from None


def load_index_pickle(data: bytes, what: str = "index") -> np.ndarray:
    """Safely unpickle a ``list[tuple[int, int]]`` index into an int64 array ``[n, 2]``.

    Never executes code. FormatError for anything but a list of 2-tuples of non-negative ints.
    """
    obj = _unpickle(data, what)
    if type(obj) is not list:
        raise FormatError(f"{what}: expected a list of (offset, length) tuples, got {type(obj).__name__}")
    for i, entry in enumerate(obj):
        if type(entry) is not tuple or len(entry) != 2 or type(entry[0]) is not int or type(entry[1]) is not int:
            raise FormatError(f"{what}[{i}]: expected a tuple of 2 ints (offset, length), got {short_repr(entry)}")
        if entry[0] < 0 or entry[1] < 0 or entry[0] >= 2**63 or entry[1] >= 2**63:
            raise FormatError(f"{what}[{i}]: expected non-negative int64 offset and length, got {entry}")
    return np.array(obj, dtype=np.int64).reshape(len(obj), 2)


# ------------------------------------------------------------------------------------ era detection


_ERA_BE8 = "a big-endian Modalities .pbin from before 2024-01-30 (8-byte big-endian header, 4-byte tokens)"
_ERA_BE12 = "a big-endian Modalities .pbin from 2024-01-30 .. 2024-04-03 (12-byte big-endian header)"
_ERA_BE = "a big-endian Modalities .pbin from before 2024-04-03 (big-endian data_len)"
_ERA_ABS = "a Modalities .pbin from 2024-04-03 .. 2024-06-25 (offsets absolute from the file start)"


def _absolute_index_fits(path: Path, header: int, data_len: int) -> bool:
    """True if the pickle after ``header + data_len`` is an index with absolute offsets from ``header``."""
    with open(path, "rb") as f:
        f.seek(header + data_len)
        tail = f.read()
    try:
        index = load_index_pickle(tail)
    except FormatError:
        return False
    return bool(index.shape[0]) and int(index[0, 0]) == header and int(index[-1].sum()) == header + data_len


def _old_era(path: Path, head: bytes, file_size: int) -> str | None:
    """Which pre-2024-04 big-endian era a header that fails the little-endian checks looks like, or None."""
    be_len = int.from_bytes(head[:8], "big")
    be_width = int.from_bytes(head[8:12], "big")
    if be_width in TOKEN_WIDTHS and be_len + 12 <= file_size and _absolute_index_fits(path, 12, be_len):
        return _ERA_BE12
    if be_len + 8 <= file_size and _absolute_index_fits(path, 8, be_len):
        return _ERA_BE8
    if be_len + 8 <= file_size:
        return _ERA_BE
    return None


def _old_era_error(path: Path, era: str, what: str) -> FormatError:
    return FormatError(
        f"{path}: {what}; the file looks like {era}, which this reader does not support "
        "(re-create it with the current Modalities or write_pbin)"
    )


def _check_index(index: np.ndarray, data_len: int, width: int, path: Path) -> None:
    """First offset 0, contiguous, lengths multiples of width, last end == data_len."""
    n = index.shape[0]
    if n == 0:
        if data_len != 0:
            raise FormatError(f"{path}: index is empty but data_len is {data_len}: expected data_len 0")
        return
    offsets, lengths = index[:, 0], index[:, 1]
    if int(offsets[0]) != 0:
        if int(offsets[0]) == HEADER_SIZE and int(offsets[-1] + lengths[-1]) == data_len + HEADER_SIZE:
            raise _old_era_error(path, _ERA_ABS, "index[0] offset: expected 0, got 12")
        raise FormatError(f"{path}: index[0] offset: expected 0, got {int(offsets[0])}")
    ends = offsets + lengths
    gap = offsets[1:] != ends[:-1]
    if gap.any():
        i = int(np.argmax(gap)) + 1
        raise FormatError(
            f"{path}: index[{i}] offset: expected {int(ends[i - 1])} (documents are contiguous), got {int(offsets[i])}"
        )
    odd = lengths % width != 0
    if odd.any():
        i = int(np.argmax(odd))
        raise FormatError(f"{path}: index[{i}] length: expected a multiple of width {width}, got {int(lengths[i])}")
    if int(ends[-1]) != data_len:
        raise FormatError(f"{path}: last offset + length: expected data_len = {data_len}, got {int(ends[-1])}")


# ------------------------------------------------------------------------------------ reading


@dataclass(frozen=True, eq=False)
class PbinFile:
    """A validated ``.pbin``: ``data`` (read-only token view), ``index`` (int64 [n, 2], bytes), ``token_size_in_bytes``.

    ``pbin[i]`` is document *i* as a zero-copy view of ``data``.
    """

    path: Path
    data: np.ndarray
    index: np.ndarray
    token_size_in_bytes: int

    def __len__(self) -> int:
        return int(self.index.shape[0])

    def __getitem__(self, i: int) -> np.ndarray:
        n = len(self)
        if not is_int(i):
            raise InputError(f"document index i must be an int, got {short_repr(i)}")
        if not -n <= i < n:
            raise SampleIndexError(f"document index i: expected -{n} <= i < {n}, got {i}")
        offset, length = (int(v) // self.token_size_in_bytes for v in self.index[i])
        return self.data[offset : offset + length]


def _file_size(path: Path) -> int:
    return stat_regular(path, "path").st_size


def _read_header(path: Path, size: int, head: bytes) -> tuple[int, int]:
    """(data_len, width) after the checks of §4.2; FormatError naming the era for old files."""
    if size < HEADER_SIZE:
        raise FormatError(f"{path}: truncated header: expected at least {HEADER_SIZE} bytes, got {size}")
    data_len, width = struct.unpack_from("<QI", head, 0)
    if data_len + HEADER_SIZE > size:
        what = f"data_len: expected at most file size - 12 = {size - HEADER_SIZE}, got {data_len}"
        era = _old_era(path, head, size)
        raise _old_era_error(path, era, what) if era else FormatError(f"{path}: {what}")
    if width not in TOKEN_WIDTHS:
        what = f"token_size_in_bytes at byte 8: expected one of {list(TOKEN_WIDTHS)}, got {width}"
        era = _old_era(path, head, size)
        raise _old_era_error(path, era, what) if era else FormatError(f"{path}: {what}")
    if data_len % width:
        raise FormatError(f"{path}: data_len: expected a multiple of width {width}, got {data_len}")
    return data_len, width


def read_pbin(path: str | os.PathLike[str]) -> PbinFile:
    """Open and validate a ``.pbin``; tokens are memory-mapped (nothing mapped when data_len is 0)."""
    file = Path(path)
    size = _file_size(file)
    with open(file, "rb") as f:
        head = f.read(HEADER_SIZE)
        data_len, width = _read_header(file, size, head)
        f.seek(HEADER_SIZE + data_len)
        tail = f.read()
    if not tail:
        raise FormatError(f"{file}: index segment: expected a pickle after the {data_len} data bytes, got 0 bytes")
    index = load_index_pickle(tail, what=f"{file}: index")
    _check_index(index, data_len, width, file)
    dtype = _DTYPES[width]
    count = data_len // width
    if count == 0:
        data = np.empty(0, dtype=dtype)
    else:
        data = np.memmap(file, dtype=dtype, mode="r", offset=HEADER_SIZE, shape=(count,))
    return PbinFile(file, data, index, width)


# ------------------------------------------------------------------------------------ writing


def _as_tokens(tokens: object, width: int, i: int) -> np.ndarray:
    arr = np.asarray(tokens)
    if arr.ndim != 1:
        raise InputError(f"documents[{i}] must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, dtype=_DTYPES[width])
    if not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"documents[{i}] must hold integers, got dtype {arr.dtype}")
    top = 256**width - 1
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi > top:
        bad = lo if lo < 0 else hi
        raise InputError(f"documents[{i}]: token ids must be in [0, {top}] for width {width}, got {bad}")
    return np.ascontiguousarray(arr, dtype=_DTYPES[width])


def write_pbin(path: str | os.PathLike[str], documents: Iterable[object], token_size_in_bytes: int,
               *, atomic: bool = True) -> int:
    """Write ``documents`` (integer arrays) as a current-format ``.pbin``, atomically; returns data_len.

    Streams to a temporary file next to ``path`` (header, data, protocol-4 pickle index), patches
    data_len, fsyncs and renames over ``path``. Empty documents are kept as zero-length entries.
    ``atomic=False`` writes ``path`` itself (created exclusively), for callers that commit a whole
    store written under a temporary prefix.
    """
    width = token_size_in_bytes
    if isinstance(width, bool) or width not in TOKEN_WIDTHS:
        raise InputError(f"token_size_in_bytes must be one of {list(TOKEN_WIDTHS)}, got {short_repr(width)}")
    final = Path(path)
    if atomic:
        tmp, out = open_temp(final, "path")
    else:
        if not (final.parent if str(final.parent) else Path(".")).is_dir():
            raise InputError(f"path: directory does not exist: {str(final.parent)!r}")
        tmp, out = final, open(final, "xb")
    try:
        with out as f:
            f.write(struct.pack("<QI", 0, width))
            index: list[tuple[int, int]] = []
            offset = 0
            for i, doc in enumerate(documents):
                arr = _as_tokens(doc, width, i)
                f.write(arr.data)
                index.append((offset, arr.nbytes))
                offset += arr.nbytes
            f.write(pickle.dumps(index, protocol=PICKLE_PROTOCOL))
            f.seek(0)
            f.write(struct.pack("<Q", offset))
            f.flush()
            os.fsync(f.fileno())
        if atomic:
            os.replace(tmp, final)
    except BaseException:
        discard(tmp)
        raise
    return offset
