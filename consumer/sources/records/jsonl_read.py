"""A plain JSONL container's texts read back from their records' lines: :func:`line_texts`.

The scanner (:mod:`.jsonl`) keeps each record's line and its text's decoded length, not the text: a read
(:class:`~.source.RecordFiles`) decodes the lines again, the same way, and checks each length against the index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .json_strings import strings_to_utf8
from .jsonl import import_msgspec, record_decoder, why_bad
from .options import RecordOptions

__all__ = ["BadLine", "line_texts"]

_FEW = 8  # up to this many lines, each is decoded alone (a str, encoded): numpy's steps cost more than they save


class BadLine(ValueError):
    """Line ``index`` (of those given to :func:`line_texts`) is not a record: ``why``."""

    def __init__(self, index: int, why: str) -> None:
        super().__init__(f"line {index}: {why}")
        self.index, self.why = index, why


def line_texts(options: RecordOptions) -> Any:
    """``texts(lines) -> (data, offset, length)``: the UTF-8 text of each JSON record line (bytes, no ``\\n``) as
    the scanner decodes it, text ``k`` at ``data[offset[k]:offset[k] + length[k]]``. The lines are joined into one
    JSON array and decoded in one msgspec call (texts as :class:`msgspec.Raw`, unescaped by numpy); where that
    fails, and for a few lines, line by line. :class:`BadLine` names the first line (by position) that is not a
    record of ``options``."""
    msgspec = import_msgspec()
    one, many, take = record_decoder(options)

    def texts(lines: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        got = None
        if len(lines) > _FEW:
            try:
                raws, _ = take(many.decode(b"[" + b",".join(lines) + b"]"))
            except Exception:  # noqa: BLE001  (msgspec's errors: the line-by-line pass names the line)
                raws = []
            if len(raws) == len(lines):
                n = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
                at = np.zeros(n.size, dtype=np.int64)
                np.cumsum(n[:-1], out=at[1:])
                got = strings_to_utf8(np.frombuffer(bytearray().join(raws), dtype=np.uint8), at, at + n)
        if got is not None:
            return got
        pieces = []
        for k, line in enumerate(lines):
            try:
                pieces.append(take([one.decode(line)])[0][0].encode("utf-8"))
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeError) as e:
                raise BadLine(k, why_bad(line, e, options)) from None
        n = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        at = np.zeros(n.size, dtype=np.int64)
        if n.size > 1:
            np.cumsum(n[:-1], out=at[1:])
        return np.frombuffer(b"".join(pieces), dtype=np.uint8), at, n

    return texts
