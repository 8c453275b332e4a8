"""What scanning one container gives: :class:`Scanned` (numpy arrays, one entry per document) and
:class:`DecodeSink` (where documents without an in-place byte range are written: the decode cache)."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from ...errors import FormatError

__all__ = ["Scanned", "DecodeSink", "BadRecords"]


class DecodeSink:
    """Decoded document bytes appended one after another (to an open file, or kept in memory as a list of pieces
    when ``f`` is None); :meth:`put` returns where a document starts."""

    def __init__(self, f: BinaryIO | None = None) -> None:
        self.f = f
        self.parts: list[bytes] = []
        self.size = 0

    def put(self, data: bytes | memoryview) -> int:
        """Append ``data``; its offset in the decode cache."""
        at = self.size
        if self.f is not None:
            self.f.write(data)
        else:
            self.parts.append(bytes(data))
        self.size += len(data)
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
        data = b"".join(self.parts)
        self.parts = [data]
        return np.frombuffer(data, dtype=np.uint8)


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
    names, else None), ``classes`` (class values as str when a class field is read, else None), ``json_offset``/
    ``json_length`` (jsonl: the record's line in the container, or in its decode cache when compressed), and counts
    for ``build_info``."""

    offset: np.ndarray
    length: np.ndarray
    record: np.ndarray
    inplace: np.ndarray
    names: list[str] | None = None
    classes: list[str] | None = None
    json_offset: np.ndarray | None = None
    json_length: np.ndarray | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.offset.size)


def os_error(path: str, e: OSError) -> FormatError:
    """A read failure while scanning, as a FormatError naming the container."""
    return FormatError(f"{path!r}: cannot read the container: {os.strerror(e.errno) if e.errno else e}")
