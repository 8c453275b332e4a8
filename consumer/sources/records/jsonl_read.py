"""A plain JSONL container's texts read back from their records' lines: :class:`LineTexts`.

The scanner (:mod:`.jsonl`) keeps each record's line and its text's decoded length, not the text: a read
(:class:`~.source.RecordFiles`) reads the lines into one buffer and decodes them again with msgspec (a batch's
lines in one call as ``str`` texts, each encoded; a block of thousands with the scanner's own tier,
:func:`~.jsonl.msgspec_block`), then checks each length against the index. msgspec recurses once a
level of nesting: the scanner refuses records nested deeper than :data:`~.options.MAX_JSON_DEPTH`, and a record
within it that runs out of Python's recursion limit from the caller's deep stack is decoded again on a fresh thread
(:func:`~.json_depth.fresh_stack`), so a read never raises ``RecursionError``.
"""

from __future__ import annotations

import numpy as np

from .json_depth import fresh_stack, why_too_deep
from .jsonl import msgspec_block
from .jsonl_decoders import finite_record, import_msgspec, record_decoder, why_bad
from .options import RecordOptions

__all__ = ["BadLine", "LineTexts"]

_FEW = 8  # up to this many lines, each is decoded alone (a str, encoded): numpy's steps cost more than they save
# up to this many lines (a batch of documents), one msgspec call decodes them as str, each encoded: faster than the
# scanner's tier (raw strings unescaped by numpy), whose fixed cost pays off only on blocks of thousands of lines
_AS_STR = 1024


class BadLine(ValueError):
    """Line ``index`` (of those given to :class:`LineTexts`) is not a record: ``why``. ``changed``: it cannot be
    the line indexed (else it is, but cannot be decoded here: nested too deep for Python's recursion limit)."""

    def __init__(self, index: int, why: str, changed: bool = True) -> None:
        super().__init__(f"line {index}: {why}")
        self.index, self.why, self.changed = index, why, changed


class LineTexts:
    """The UTF-8 text of JSON record lines as the scanner decodes them, for ``options``: ``(data, offset,
    length)``, text ``k`` at ``data[offset[k]:offset[k] + length[k]]``. More than a few lines are decoded in one
    msgspec call: up to :data:`_AS_STR` (a batch) as ``str`` texts, each encoded, more with the scanner's tier
    (raw strings unescaped by numpy); where that fails, and for a few lines, line by line. :class:`BadLine` names
    the first line (by position) that is not a record of ``options``."""

    def __init__(self, options: RecordOptions) -> None:
        self.options = options
        self.msgspec = import_msgspec()
        self.one, self.many, self.take = record_decoder(options)
        record = self.one.type
        self.strs = self.msgspec.json.Decoder(list[record])  # type: ignore[valid-type]

    def block(self, work: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                     np.ndarray]:
        """The texts of the lines ``work[1 + starts[k]:1 + ends[k]]``, one after another with one free byte after
        each and ``work[0]`` free (the layout of :func:`~.jsonl.msgspec_block`, which writes there)."""
        if _FEW < ends.size <= _AS_STR:
            pieces = self._as_str(work, ends)
            if pieces is not None:
                return _joined(pieces)
        elif ends.size > _FEW:
            got = msgspec_block(work, ends, slice(None), self.many.decode, self.take)
            if got is not None:
                return got[0][0]
        pieces = []
        for k, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
            line = bytes(work[1 + a:1 + b])
            try:
                try:
                    text = self.take([fresh_stack(self.one.decode, line)])[0][0]
                except self.msgspec.DecodeError:  # NaN or Infinity in a field: read as null, as the scanner did
                    finite = finite_record(line)
                    if finite is None:
                        raise
                    text = self.take([fresh_stack(self.one.decode, finite)])[0][0]
                pieces.append(text.encode("utf-8"))
            except (self.msgspec.DecodeError, self.msgspec.ValidationError, UnicodeError) as e:
                raise BadLine(k, why_bad(line, e, self.options)) from None
            except RecursionError:
                raise BadLine(k, why_too_deep(None), changed=False) from None
        return _joined(pieces)

    def _as_str(self, work: np.ndarray, ends: np.ndarray) -> list[bytes] | None:
        """The lines' texts decoded in one msgspec call (the lines made one JSON array in place, as
        :func:`~.jsonl.msgspec_block` does), each a str encoded; None when a line is not a record (the line-by-line
        pass names it)."""
        work[0] = 0x5B  # [
        work[1 + ends[:-1]] = 0x2C  # each newline a comma
        last = 1 + int(ends[-1])
        work[last] = 0x5D  # ]
        try:
            texts = self.take(self.strs.decode(work.data[:last + 1]))[0]
            pieces = [t.encode("utf-8") for t in texts]
        except Exception:  # noqa: BLE001  (msgspec's errors, an unpaired surrogate, a deep record: named line by line)
            return None
        return pieces if len(pieces) == ends.size else None  # a line of two objects with a comma: not one record

    def __call__(self, lines: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The texts of ``lines`` (bytes, no ``\\n``), laid out for :meth:`block`."""
        lens = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
        starts = np.zeros(lens.size, dtype=np.int64)
        if lens.size > 1:
            np.cumsum(lens[:-1] + 1, out=starts[1:])
        work = np.frombuffer(bytearray(b"\n").join([b"", *lines, b""]), dtype=np.uint8).copy()
        return self.block(work, starts, starts + lens)


def _joined(pieces: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``pieces`` one after another: ``(data, offset, length)``."""
    n = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    at = np.zeros(n.size, dtype=np.int64)
    if n.size > 1:
        np.cumsum(n[:-1], out=at[1:])
    return np.frombuffer(b"".join(pieces), dtype=np.uint8), at, n
