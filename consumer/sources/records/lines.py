"""``documents="lines"``: each line of a file is a document, read in place by its byte range.

A document's bytes exclude the ``\\n`` and keep a ``\\r`` before it (as Modalities' raw index does); the last line
may lack a newline; lines of zero bytes are skipped and counted (``counts["empty_lines"]``); bytes are kept exactly,
invalid UTF-8 included. Boundaries come from a numpy scan for 0x0A over chunks of the file (no Python loop per
line, memory bounded by one chunk): only 0x0A ends a line. A line over :data:`MAX_RECORD_BYTES` is a bad record.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .container import Container, indexed_lines
from .options import RecordOptions
from .scanned import INT32_MAX, BadRecords, DecodeSink, Scanned

__all__ = ["scan_lines"]


def _boundaries(container: Container, sink: DecodeSink | None) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive, before the ``\\n``) of every line, by a chunked newline scan (no carry kept:
    only positions); the stream is copied to ``sink`` when given (a compressed container's decode cache)."""
    if container.lines is not None:  # a raw index: its lines (each checked to end at a newline)
        spans = [(s + base, e + base) for _, base, s, e in indexed_lines(container)]
        if not spans:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate([a for a, _ in spans]), np.concatenate([b for _, b in spans])
    # positions as int32 when the file is under 2 GiB (a decompressed stream's size is not known: int64)
    kind: Any = np.int32 if not container.compressed and container.size <= INT32_MAX else np.int64
    starts, ends = [], []
    line_start, pos = 0, 0
    for piece in container.chunks():
        if sink is not None:
            sink.put(bytes(piece))
        newline = container.buffer("newline", len(piece)).view(np.bool_)
        np.equal(np.frombuffer(piece, dtype=np.uint8), 10, out=newline)
        nl = np.flatnonzero(newline).astype(kind)
        if nl.size:
            nl += pos
            s = np.empty(nl.size, dtype=kind)
            s[0] = line_start
            s[1:] = nl[:-1] + 1
            starts.append(s)
            ends.append(nl)
            line_start = int(nl[-1]) + 1
        pos += len(piece)
    if line_start < pos:
        starts.append(np.array([line_start], dtype=kind))
        ends.append(np.array([pos], dtype=kind))
    if not starts:
        return np.zeros(0, kind), np.zeros(0, kind)
    return np.concatenate(starts), np.concatenate(ends)


def scan_lines(container: Container, options: RecordOptions, sink: DecodeSink) -> Scanned:
    """The lines of ``container`` as documents (see the module docstring)."""
    from . import options as limits  # noqa: PLC0415  (read at call time: tests lower the limit)

    # a line is a byte range of the container, or of its decompressed stream kept in the decode cache
    starts, ends = _boundaries(container, sink if container.compressed else None)
    lengths = ends - starts
    record = np.arange(starts.size, dtype=starts.dtype)
    keep = lengths > 0
    empty = int(starts.size - np.count_nonzero(keep))
    long = np.flatnonzero(lengths > limits.MAX_RECORD_BYTES)
    bad = BadRecords(container.path, options.on_bad_record == "skip")
    for k in long.tolist():
        bad.bad(f"a line of {int(lengths[k])} bytes is longer than the limit of {limits.MAX_RECORD_BYTES} bytes",
                f"line {k + 1}", int(starts[k]))
        keep[k] = False
    if not bool(keep.all()):  # else the arrays as they are (no copy)
        starts, lengths, record = starts[keep], lengths[keep], record[keep]
    return Scanned(offset=starts, length=lengths, record=record,
                   inplace=np.full(starts.size, not container.compressed, dtype=bool),
                   counts={"empty_lines": empty, "skipped_records": bad.skipped,
                           "raw_index": int(container.lines is not None)})

