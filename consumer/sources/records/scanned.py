"""What scanning one container gives: :class:`Scanned` (numpy arrays, one entry per document) and
:class:`DecodeSink` (where documents without an in-place byte range are written: the decode cache)."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from ...errors import FormatError

__all__ = ["Scanned", "DecodeSink", "BadRecords", "ClassTable", "narrow", "INT32_MAX"]

INT32_MAX = (1 << 31) - 1
_NARROWED = ("offset", "length", "record", "json_offset", "json_length")


def narrow(a: np.ndarray) -> np.ndarray:
    """``a`` (integers) as int32 when every value fits (a copy), else as int64: a per-document array of a
    container costs 4 bytes a document unless its values need more (offsets past 2 GiB, say)."""
    a = np.asarray(a)
    if a.dtype == np.int32:
        return a
    if a.size == 0 or (int(a.max()) <= INT32_MAX and int(a.min()) >= -INT32_MAX - 1):
        return a.astype(np.int32)
    return a.astype(np.int64, copy=False)


class DecodeSink:
    """Decoded document bytes appended one after another (to an open file, or kept in memory as a list of pieces
    when ``f`` is None); :meth:`put` returns where a document starts."""

    def __init__(self, f: BinaryIO | None = None) -> None:
        self.f = f
        self.parts: list[bytes | memoryview] = []  # a kept array as a memoryview of it
        self.size = 0

    def put(self, data: bytes | memoryview | np.ndarray, owned: bool = False) -> int:
        """Append ``data``; its offset in the decode cache. ``owned``: ``data`` is not changed after the call (a
        scanner's fresh array), so a sink in memory keeps it instead of a copy."""
        at = self.size
        view = data.data if isinstance(data, np.ndarray) else memoryview(data)  # an array: uint8, contiguous
        if self.f is not None:
            self.f.write(view)
        else:
            self.parts.append(view if owned else bytes(view))
        self.size += view.nbytes
        return at

    def put_many(self, pieces: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Append every piece (one write); the offset and the byte length of each."""
        lens = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        at = np.zeros(len(pieces), dtype=np.int64)
        if len(pieces) > 1:
            np.cumsum(lens[:-1], out=at[1:])
        at += self.put(b"".join(pieces))
        return at, lens

    def reader(self) -> BinaryIO:
        """The bytes written so far, opened for reading (a new file object)."""
        if self.f is None:
            return io.BytesIO(b"".join(self.parts))
        self.f.flush()
        return open(self.f.name, "rb")  # noqa: SIM115  (the caller closes it)

    def memory(self) -> np.ndarray | None:
        """The bytes written, when kept in memory (None for a file)."""
        if self.f is not None:
            return None
        if len(self.parts) == 1 and isinstance(self.parts[0], memoryview):
            return np.frombuffer(self.parts[0], dtype=np.uint8)
        data = b"".join(self.parts)
        self.parts = [data]
        return np.frombuffer(data, dtype=np.uint8)


class ClassTable:
    """The distinct class values of one container in order of first appearance (``names``), and each document's
    value as an int32 code into them (:meth:`add`): no Python string kept per document."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._code: dict[str, int] = {}

    def add(self, values: list[str]) -> np.ndarray:
        """The codes of ``values`` (new values are appended to ``names``)."""
        if not values:
            return np.zeros(0, dtype=np.int32)
        import pyarrow as pa  # noqa: PLC0415  (the dictionary encoding in C; pyarrow is a core dependency)

        try:
            encoded = pa.array(values, type=pa.string()).dictionary_encode()
            distinct: list[str] = encoded.dictionary.to_pylist()
            local = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
        except (pa.ArrowException, UnicodeEncodeError):  # a value that is not Unicode text (a lone surrogate)
            distinct = list(dict.fromkeys(values))
            where = {v: k for k, v in enumerate(distinct)}
            local = np.fromiter((where[v] for v in values), dtype=np.int32, count=len(values))
        for v in distinct:
            if v not in self._code:
                self._code[v] = len(self.names)
                self.names.append(v)
        codes: np.ndarray = np.array([self._code[v] for v in distinct], dtype=np.int32)[local]
        return codes


@dataclass
class BadRecords:
    """The bad-record policy of one scan: ``raise`` a FormatError (naming the container, the record and the
    byte offset), or count what was skipped."""

    path: str
    skip: bool
    skipped: int = 0

    def bad(self, what: str, record_name: str, offset: int | None) -> None:
        """A bad record: FormatError, or counted when skipping."""
        if not self.skip:
            at = "" if offset is None else f" at byte {offset}"
            raise FormatError(f"{self.path!r}: {record_name}{at}: {what} (on_bad_record='skip' skips such records)")
        self.skipped += 1


@dataclass
class Scanned:
    """The documents of one container, in record order: ``offset``/``length`` (bytes; in the container when
    ``inplace``, else in the decode cache), ``record`` (line, row or member number, 0-based), ``names`` (tar member
    names, else None), ``classes`` (class values as str when a class field is read, else None: given so, kept as
    ``class_names``, the distinct values, and ``class_codes``, int32 codes into them), ``json_offset``/
    ``json_length`` (jsonl: the record's line in the container, or in its decode cache when compressed),
    ``from_lines`` (jsonl in a plain container: every document is the text of its record's line, decoded when it is
    read, so nothing goes to the decode cache and ``offset`` is 0), and counts for ``build_info``. The integer
    arrays are int32 where their values fit, else int64 (:func:`narrow`, applied on construction)."""

    offset: np.ndarray
    length: np.ndarray
    record: np.ndarray
    inplace: np.ndarray
    names: list[str] | None = None
    classes: list[str] | None = None
    json_offset: np.ndarray | None = None
    json_length: np.ndarray | None = None
    counts: dict[str, int] = field(default_factory=dict)
    class_names: list[str] | None = None
    class_codes: np.ndarray | None = None
    from_lines: bool = False

    def __post_init__(self) -> None:
        for name in _NARROWED:  # int32 where the values fit, else int64 (:func:`narrow`)
            a = getattr(self, name)
            if a is not None:
                setattr(self, name, narrow(a))
        if self.classes is not None:  # kept as codes (:class:`ClassTable`), not a string per document
            table = ClassTable()
            self.class_codes = table.add(self.classes)
            self.class_names, self.classes = table.names, None

    def __len__(self) -> int:
        return int(self.offset.size)


def os_error(path: str, e: OSError) -> FormatError:
    """A read failure while scanning, as a FormatError naming the container."""
    return FormatError(f"{path!r}: cannot read the container: {os.strerror(e.errno) if e.errno else e}")
