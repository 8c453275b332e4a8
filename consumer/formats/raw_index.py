"""Modalities' raw JSONL index (``modalities data create_raw_index``): :func:`write_raw_index`,
:func:`read_raw_index`, :func:`raw_index_path`.

Layout: ``<stem>.idx`` beside the JSONL file (same extension as Megatron's index, different content) holds
``pickle.dumps(list[(byte_offset, byte_length)], protocol=4)``: one entry per line, in file order; the length
excludes the ``\\n`` and keeps a ``\\r`` before it; the last line may lack a newline (a file ending in ``\\n`` has
no empty entry after it; an empty file is one empty line). Lines end at the byte 0x0A only. Every line must parse
with the standard library's ``json.loads`` (any JSON value), as Modalities checks it; an empty line is faulty.
Offsets and lengths count bytes (Modalities before December 2024 counted characters in the lengths).

:func:`write_raw_index` gives the bytes Modalities' ``IndexGenerator`` writes on the same file (golden files made
by it are in the tests). :func:`read_raw_index` never runs ``pickle.loads`` on the file: it goes through the safe
index unpickler of :mod:`consumer.formats.pbin` (plain lists, tuples and ints only; bounded allocation).
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import FormatError, InputError, short_repr
from ..util.fileio import atomic_write_bytes

__all__ = ["write_raw_index", "read_raw_index", "raw_index_path", "raw_line_spans"]

_CHUNK = 1 << 24


def raw_index_path(jsonl_path: str | os.PathLike) -> Path:
    """Where Modalities puts the raw index of ``jsonl_path``: ``<stem>.idx`` in the same folder."""
    return Path(jsonl_path).with_suffix(".idx")


def raw_line_spans(jsonl_path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` of every line of the file as Modalities splits it (see the module docstring), a chunk at a
    time (a numpy scan for 0x0A; memory bounded by a chunk and the longest line)."""
    with open(jsonl_path, "rb") as f:
        carry, base, any_bytes = b"", 0, False
        while True:
            piece = f.read(_CHUNK)
            if not piece:
                break
            any_bytes = True
            buf = carry + piece if carry else piece
            nl = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10).tolist()
            start = 0
            for end in nl:
                yield base + start, buf[start:end]
                start = end + 1
            carry, base = buf[start:], base + start
        if carry or not any_bytes:
            yield base, carry


def write_raw_index(jsonl_path: str | os.PathLike, idx_path: str | os.PathLike | None = None, *,
                    drop_faulty_entries: bool = False) -> int:
    """Write Modalities' raw index of ``jsonl_path`` to ``idx_path`` (default :func:`raw_index_path`), atomically;
    returns the number of entries. A line that is not JSON raises FormatError naming the file, the line and its byte
    offset, unless ``drop_faulty_entries`` (Modalities' option of that name) leaves it out."""
    src = Path(jsonl_path)
    if not src.is_file():
        raise InputError(f"jsonl_path: not a file: {short_repr(str(src))}")
    entries: list[tuple[int, int]] = []
    loads = json.loads
    for k, (offset, line) in enumerate(raw_line_spans(src)):
        try:
            loads(line)
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
            if drop_faulty_entries:
                continue
            raise FormatError(f"{str(src)!r}: line {k + 1} at byte {offset} is not JSON ({e}); an empty line is "
                              "faulty too (drop_faulty_entries=True leaves such lines out)") from None
        entries.append((offset, len(line)))
    atomic_write_bytes(idx_path if idx_path is not None else raw_index_path(src), pickle.dumps(entries, protocol=4))
    return len(entries)


def read_raw_index(idx_path: str | os.PathLike) -> np.ndarray:
    """The entries of a raw index as an int64 array ``[n, 2]`` (offset, length), loaded without executing anything
    (FormatError for anything but a pickled list of ``(int, int)``)."""
    path = Path(idx_path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"idx_path: cannot read {short_repr(str(path))}: {e.strerror}") from None
    from .pbin import load_index_pickle  # noqa: PLC0415  (the index format's module loads once an index is read)

    return load_index_pickle(data, f"raw index {str(path)!r}")
