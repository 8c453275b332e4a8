"""Modalities packed data ``.pbin``: the byte layout below, the reader and the writer.

Byte layout (current format, Modalities >= 2024-06-25)::

    offset        size       field
    0             8          data_len: length of the data segment in bytes, u64 little-endian
    8             4          token_size_in_bytes (width) in {1, 2, 4}, u32 little-endian
    12            data_len   tokens: unsigned little-endian ints of that width, documents back to back
    12+data_len   to EOF     pickle of list[tuple[int, int]]: one (offset, length) per document, both in
                             bytes, offset relative to the start of the data segment

We write the pickle with protocol 4 (what Python 3.8-3.13 write by default; 3.14 would write 5).

Reading never executes the pickle and never allocates more than it describes: the canonical stream
``pickle.dumps`` writes for such a list (only int, tuple, list, memo and frame opcodes, checked by one
regular expression) goes to CPython's unpickler; anything else to a small interpreter of plain-data opcodes
that looks nothing up, keeps its memo in a dict and caps objects, container slots and nesting depth
(:data:`MAX_PICKLE_UNITS`, :data:`MAX_PICKLE_DEPTH`, :data:`MAX_MEMO_INDEX`; :mod:`consumer.formats.safe_pickle`).
The result is then validated: a list of 2-tuples of non-negative ints, first offset 0, contiguous, lengths
multiples of the width, last offset + length == data_len, ``data_len + 12 <= file size``, width in {1, 2, 4}.

Older files (no version field exists; detected heuristically and refused with a FormatError naming
the era): <= 2024-01-30 an 8-byte big-endian data_len, 4-byte big-endian tokens, offsets absolute
from byte 8; 2024-01-30 .. 2024-04-03 a 12-byte big-endian header; 2024-04-03 .. 2024-06-25 a
little-endian header but offsets absolute (first offset 12).
"""

from __future__ import annotations

import os
import pickle
import re
import reprlib
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import FormatError, InputError, SampleIndexError, short_repr
from ..util.fileio import check_path, discard, open_temp, stat_regular
from ..util.validate import is_int
from .safe_pickle import MAX_MEMO_INDEX, MAX_PICKLE_DEPTH, MAX_PICKLE_UNITS, PickleRefused
from .safe_pickle import IndexUnpickler as _IndexUnpickler
from .segments import split_segments

__all__ = [
    "HEADER_SIZE",
    "MAX_MEMO_INDEX",
    "MAX_PICKLE_DEPTH",
    "MAX_PICKLE_UNITS",
    "TOKEN_WIDTHS",
    "PbinFile",
    "PbinWriter",
    "load_index_pickle",
    "pbin_header",
    "pbin_index",
    "read_pbin",
    "write_pbin",
]

HEADER_SIZE = 12
TOKEN_WIDTHS = (1, 2, 4)
PICKLE_PROTOCOL = 4
_DTYPES = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}


# ------------------------------------------------------------------------------------ pickle

# What ``pickle.dumps`` (protocol 4 or 5) writes for a ``list[tuple[int, int]]``: PROTO, EMPTY_LIST, MEMOIZE,
# then only ints, TUPLE2, MEMOIZE, MARK, APPENDS, APPEND and FRAME, then STOP. A stream made of only these
# tokens cannot name a callable, size a table by a memo key, allocate by a declared length or nest lists, so
# CPython's C unpickler may load it (5x faster than the interpreter above); anything else goes to the latter.
_CANONICAL_TOKENS = rb"K.|M..|J....|\x86|\x94|\(|e|a|\x95.{8}|\x8a(?:" + b"|".join(
    bytes([k]) + rb".{%d}" % k for k in range(1, 10)) + rb")"
try:  # a possessive repeat (Python >= 3.11): one linear pass, no backtracking state
    _CANONICAL_INDEX: re.Pattern[bytes] | None = re.compile(
        rb"\x80[\x04\x05](?:\x95.{8})?\]\x94(?:" + _CANONICAL_TOKENS + rb")*+\.", re.DOTALL)
except re.error:  # Python 3.10: a plain repeat would keep backtracking state per token, so no fast path
    _CANONICAL_INDEX = None


def _unpickle(data: bytes, what: str, max_units: int = MAX_PICKLE_UNITS, max_depth: int = MAX_PICKLE_DEPTH) -> object:
    """Load a pickle of plain data without executing anything and with bounded allocation (FormatError otherwise)."""
    if _CANONICAL_INDEX is not None and len(data) <= max_units and _CANONICAL_INDEX.fullmatch(data):
        # each byte adds at most 1 unit, so the C unpickler stays within max_units too
        try:
            return pickle.loads(data)
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, AttributeError,
                OverflowError) as exc:  # OverflowError: a FRAME length past 2**63
            raise FormatError(f"{what}: not a valid pickle ({type(exc).__name__}: {exc})") from None
    try:
        return _IndexUnpickler(data, max_units, max_depth).load()
    except PickleRefused as exc:
        raise FormatError(f"{what}: not a valid pickle of an index: {exc}") from None


_ENTRY_REPR = reprlib.Repr()
_ENTRY_REPR.maxlevel, _ENTRY_REPR.maxtuple, _ENTRY_REPR.maxlist, _ENTRY_REPR.maxother = 3, 4, 4, 40


def load_index_pickle(data: bytes, what: str = "index", *, max_units: int = MAX_PICKLE_UNITS,
                      max_depth: int = MAX_PICKLE_DEPTH) -> np.ndarray:
    """Safely unpickle a ``list[tuple[int, int]]`` index into an int64 array ``[n, 2]``.

    Never executes code and never allocates more than the input describes: at most ``max_units`` objects
    plus container slots (a document costs 6), containers nested at most ``max_depth`` deep, memo keys at
    most :data:`MAX_MEMO_INDEX` (see :class:`~consumer.formats.safe_pickle.IndexUnpickler`). FormatError for
    anything but a list of 2-tuples of non-negative ints, and for a pickle past a cap.
    """
    obj = _unpickle(data, what, max_units, max_depth)
    if type(obj) is not list:
        raise FormatError(f"{what}: expected a list of (offset, length) tuples, got {type(obj).__name__}")
    for i, entry in enumerate(obj):
        if type(entry) is not tuple or len(entry) != 2 or type(entry[0]) is not int or type(entry[1]) is not int:
            raise FormatError(
                f"{what}[{i}]: expected a tuple of 2 ints (offset, length), got {_ENTRY_REPR.repr(entry)}")
        if entry[0] < 0 or entry[1] < 0 or entry[0] >= 2**63 or entry[1] >= 2**63:
            raise FormatError(f"{what}[{i}]: expected non-negative int64 offset and length, got {short_repr(entry)}")
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


def _old_era_error(path: Path | str, era: str, what: str) -> FormatError:
    return FormatError(
        f"{path}: {what}; the file looks like {era}, which this reader does not support "
        "(re-create it with the current Modalities or write_pbin)"
    )


def _check_index(index: np.ndarray, data_len: int, width: int, path: Path | str) -> None:
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


def _read_header(path: Path | str, size: int, head: bytes, eras: bool = True) -> tuple[int, int]:
    """(data_len, width) after the checks of §4.2; FormatError naming the era for old files (looked for
    in the file at ``path`` when ``eras``)."""
    if size < HEADER_SIZE or len(head) < HEADER_SIZE:
        got = min(size, len(head))
        raise FormatError(f"{path}: truncated header: expected at least {HEADER_SIZE} bytes, got {got}")
    data_len, width = struct.unpack_from("<QI", head, 0)
    if data_len + HEADER_SIZE > size:
        what = f"data_len: expected at most file size - 12 = {size - HEADER_SIZE}, got {data_len}"
        era = _old_era(Path(path), head, size) if eras else None
        raise _old_era_error(path, era, what) if era else FormatError(f"{path}: {what}")
    if width not in TOKEN_WIDTHS:
        what = f"token_size_in_bytes at byte 8: expected one of {list(TOKEN_WIDTHS)}, got {width}"
        era = _old_era(Path(path), head, size) if eras else None
        raise _old_era_error(path, era, what) if era else FormatError(f"{path}: {what}")
    if data_len % width:
        raise FormatError(f"{path}: data_len: expected a multiple of width {width}, got {data_len}")
    return data_len, width


def _as_path(path: object) -> Path:
    """``path`` as a Path: InputError for a non-path, an empty path or a NUL byte."""
    if not isinstance(path, str | os.PathLike):
        raise InputError(f"path must be a path (str or os.PathLike), got {short_repr(path)}")
    text = os.fsdecode(check_path(path, "path"))
    if not text:
        raise InputError("path must be a non-empty path, got ''")
    return Path(text)


def pbin_header(where: Path | str, size: int, head: bytes) -> tuple[int, int]:
    """``(data_len, width)`` from the first 12 bytes of a ``.pbin`` of ``size`` bytes that is not a local file
    (a remote object: ``where`` names it in errors; old eras are not looked for)."""
    return _read_header(where, size, head, eras=False)


def pbin_index(where: Path | str, size: int, head: bytes, tail: bytes) -> np.ndarray:
    """The checked index (int64 [n, 2], bytes) of a ``.pbin`` of ``size`` bytes from its first 12 bytes ``head``
    and the bytes after its data segment ``tail`` (what :func:`read_pbin` reads; a remote store fetches just
    these two ranges). FormatError naming ``where``."""
    data_len, width = _read_header(where, size, head, eras=False)
    if not tail:
        raise FormatError(f"{where}: index segment: expected a pickle after the {data_len} data bytes, got 0 bytes")
    index = load_index_pickle(tail, what=f"{where}: index")
    _check_index(index, data_len, width, where)
    return index


def read_pbin(path: str | os.PathLike[str]) -> PbinFile:
    """Open and validate a ``.pbin``; tokens are memory-mapped (nothing mapped when data_len is 0)."""
    file = _as_path(path)
    size = _file_size(file)
    with open(file, "rb") as f:
        head = f.read(HEADER_SIZE)
        data_len, width = _read_header(file, size, head)
        f.seek(HEADER_SIZE + data_len)
        tail = f.read()
    index = pbin_index(file, size, head, tail)
    dtype = _DTYPES[width]
    count = data_len // width
    if count == 0:
        data = np.empty(0, dtype=np.dtype(dtype))  # type: ignore[call-overload]
    else:
        data = np.memmap(file, dtype=np.dtype(dtype), mode="r", offset=HEADER_SIZE,  # type: ignore[call-overload]
                         shape=(count,))
    return PbinFile(file, data, index, width)


# ------------------------------------------------------------------------------------ writing


def _as_tokens(tokens: object, width: int, i: int) -> np.ndarray:
    try:
        arr = np.asarray(tokens)
    except (ValueError, TypeError, OverflowError):
        raise InputError(f"documents[{i}] must be a 1-D array of integer token ids, got {short_repr(tokens)}") \
            from None
    if arr.ndim != 1:
        raise InputError(f"documents[{i}] must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, dtype=np.dtype(_DTYPES[width]))  # type: ignore[call-overload]
    if not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"documents[{i}] must hold integers, got dtype {arr.dtype}")
    top = 256**width - 1
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi > top:
        bad = lo if lo < 0 else hi
        raise InputError(f"documents[{i}]: token ids must be in [0, {top}] for width {width}, got {bad}")
    return np.ascontiguousarray(arr, dtype=np.dtype(_DTYPES[width]))  # type: ignore[call-overload]


class PbinWriter:
    """Write a current-format ``.pbin`` one document at a time, a long document in several pieces.

    ``add_document(tokens)`` starts a new document; ``extend_document(tokens)`` appends tokens to the
    document added last (a document too long to hold in memory is written in bounded pieces: the
    file is byte for byte that of one ``add_document`` of the whole document, since the index holds
    one ``(offset, length)`` entry per document). :meth:`finalize` writes the protocol-4 pickle index,
    patches data_len, fsyncs and renames the temporary file over ``path``; used as a context manager,
    a clean exit finalizes and an exception removes the temporary file. ``atomic=False`` writes
    ``path`` itself (created exclusively), for callers that commit a whole store written under a
    temporary prefix.
    """

    def __init__(self, path: str | os.PathLike[str], token_size_in_bytes: int, *, atomic: bool = True) -> None:
        width = token_size_in_bytes
        if isinstance(width, bool) or width not in TOKEN_WIDTHS:
            raise InputError(f"token_size_in_bytes must be one of {list(TOKEN_WIDTHS)}, got {short_repr(width)}")
        self.width = width
        self.atomic = atomic
        self._final = _as_path(path)
        if atomic:
            self._tmp, self._out = open_temp(self._final, "path")
        else:
            if not (self._final.parent if str(self._final.parent) else Path(".")).is_dir():
                raise InputError(f"path: directory does not exist: {str(self._final.parent)!r}")
            self._tmp, self._out = self._final, open(self._final, "xb")
        self._index: list[tuple[int, int]] = []
        self.data_len = 0
        self._state = "open"
        try:
            self._out.write(struct.pack("<QI", 0, width))
        except BaseException:
            self.abort()
            raise

    def _write(self, tokens: object, i: int) -> int:
        if self._state != "open":
            raise InputError(f"the writer for {self._final} is {self._state}; no more writes are possible")
        arr = _as_tokens(tokens, self.width, i)
        self._out.write(arr.data)
        self.data_len += arr.nbytes
        return arr.nbytes

    def add_document(self, tokens: object) -> None:
        """Append one document (its tokens: a 1-D integer array; empty documents are kept)."""
        offset = self.data_len
        self._index.append((offset, self._write(tokens, len(self._index))))

    def add_segments(self, tokens: object, lengths: object, first: object) -> None:
        """Append many documents in one write: ``tokens`` holds segments of ``lengths`` tokens back to back; a
        segment whose ``first`` is True starts a document, and only the first segment may continue the document
        added last (``first`` False). The same file as ``add_document``/``extend_document`` per segment."""
        if self._state != "open":
            raise InputError(f"the writer for {self._final} is {self._state}; no more writes are possible")
        head, arr, lens = split_segments(_as_tokens(tokens, self.width, len(self._index)), lengths, first,
                                         "document")
        if head is not None:
            self.extend_document(head)
        if not lens.size:
            return
        sizes = lens * self.width
        offsets = self.data_len + np.cumsum(sizes) - sizes
        self._out.write(arr.data)
        self.data_len += arr.nbytes
        self._index.extend(zip(offsets.tolist(), sizes.tolist()))

    def extend_document(self, tokens: object) -> None:
        """Append ``tokens`` to the document added last (InputError before the first ``add_document``)."""
        if not self._index:
            raise InputError("extend_document: no document to extend; call add_document() first")
        offset, length = self._index[-1]
        self._index[-1] = (offset, length + self._write(tokens, len(self._index) - 1))

    def finalize(self) -> int:
        """Write the index, patch data_len, fsync and move the file into place; returns data_len."""
        if self._state != "open":
            raise InputError(f"the writer for {self._final} is {self._state}; no more writes are possible")
        try:
            with self._out as f:
                f.write(pickle.dumps(self._index, protocol=PICKLE_PROTOCOL))
                f.seek(0)
                f.write(struct.pack("<Q", self.data_len))
                f.flush()
                os.fsync(f.fileno())
            if self.atomic:
                os.replace(self._tmp, self._final)
        except BaseException:
            self.abort()
            raise
        self._state = "finalized"
        return self.data_len

    def abort(self) -> None:
        """Discard the file written so far; safe to call twice."""
        if self._state == "open":
            self._out.close()
            discard(self._tmp)
            self._state = "aborted"

    def __enter__(self) -> PbinWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif self._state == "open":
            self.finalize()


def write_pbin(path: str | os.PathLike[str], documents: Iterable[object], token_size_in_bytes: int,
               *, atomic: bool = True) -> int:
    """Write ``documents`` (integer arrays) as a current-format ``.pbin``, atomically; returns data_len.

    Streams to a temporary file next to ``path`` (header, data, protocol-4 pickle index), patches
    data_len, fsyncs and renames over ``path``. Empty documents are kept as zero-length entries.
    ``atomic=False`` writes ``path`` itself (created exclusively), for callers that commit a whole
    store written under a temporary prefix. (:class:`PbinWriter` writes a document in pieces.)
    """
    with PbinWriter(path, token_size_in_bytes, atomic=atomic) as writer:
        for doc in documents:
            writer.add_document(doc)
    return writer.data_len
