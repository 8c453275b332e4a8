"""A block of JSON lines parsed by Arrow's JSON reader: :class:`ArrowLines`.

The first tier of the JSONL scanner (:mod:`.jsonl`). Arrow's reader parses the block in C++ outside the GIL (as
one task: the scanner's threads decode blocks and containers side by side) into a table holding only the wanted
fields (an explicit schema, other fields ignored): the texts come out as one UTF-8 buffer with their offsets,
which is what the decode cache holds (kept as it is, no copy, when the container is one block). Where Arrow's
rules differ from JSON's as the scanner applies them, the block is refused (None) and the next tier (msgspec)
reads it:

- a line not starting with ``{`` (leading whitespace, a byte order mark Arrow would pass over);
- a table whose row count is not the block's number of non-blank lines (two objects on one line);
- a NULL text or class (the field missing or ``null``), a class that is not a string (Arrow refuses a column that
  changes type), an object Arrow refuses (a duplicated field, a number too big for a double, an unpaired
  surrogate, invalid JSON);
- text that is not UTF-8 (Arrow's reader does not check it: the scanner checks each sub-block's buffer once).

Blank lines (spaces, tabs, ``\\r``) are passed over by Arrow as by the scanner.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from .json_strings import valid_utf8
from .options import RecordOptions, field_tree

__all__ = ["ArrowLines", "release_memory"]

# _pool: where Arrow's buffers come from. Texts kept as the decode cache (a compressed container: a few hundred MB
# for a folder of shards) come from the C allocator (Arrow's system pool): with Arrow's default mimalloc pool,
# indexing 64 such shards (624 MB) took 2.0-3.1 s instead of 1.8 s in one process, alternating between runs. Texts
# dropped after their lengths are taken (a plain container) come from mimalloc, which reuses the same memory from
# block to block: parsing those shards took 0.80 s of CPU against 0.98 s (user) + 0.11 s (system: pages mapped
# afresh for every block) with the C allocator.


def _pool(keep: bool) -> pa.MemoryPool:
    """Arrow's memory pool for texts kept (``keep``) or dropped after the block (see the note above)."""
    if keep:
        return pa.system_memory_pool()
    try:
        return pa.mimalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without mimalloc
        return pa.system_memory_pool()


def release_memory() -> None:
    """Hand the memory mimalloc kept for the dropped texts' blocks back to the system (once a build's scans are
    done: kept while they run, so each block reuses the last one's pages)."""
    try:
        pa.mimalloc_memory_pool().release_unused()
    except NotImplementedError:  # a pyarrow built without mimalloc: nothing was kept there
        pass


def _schema(options: RecordOptions) -> pa.Schema:
    """The explicit schema of the wanted fields: nested structs along dotted paths, strings at the leaves."""
    def fields(node: dict[str, Any]) -> list[pa.Field]:
        return [pa.field(k, v if isinstance(v, pa.DataType) else pa.struct(fields(v))) for k, v in node.items()]

    return pa.schema(fields(field_tree(options, pa.string(), pa.string())))


def _leaf(table: pa.Table, path: str) -> list[pa.Array] | None:
    """The chunks of the column at the dotted ``path`` (None when a value or a parent object is NULL)."""
    parts = path.split(".")
    out = []
    for chunk in table.column(parts[0]).chunks:
        arr = chunk
        for key in parts[1:]:
            if arr.null_count:
                return None
            arr = arr.flatten()[arr.type.get_field_index(key)]
        if arr.null_count:
            return None
        out.append(arr)
    return out


class ArrowLines:
    """Arrow's JSON reader set up for one scan's options; :meth:`texts` parses a block of lines. ``keep``: the
    texts are kept after the block (the decode cache) rather than dropped once their lengths are taken."""

    def __init__(self, options: RecordOptions, keep: bool = True) -> None:
        self.options = options
        self.pool = _pool(keep)
        self.parse = pj.ParseOptions(explicit_schema=_schema(options), unexpected_field_behavior="ignore")

    def texts(self, block: memoryview, records: int, longest: int,
              ) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], list[str] | None] | None:
        """The texts of the ``records`` JSON objects of ``block`` (whole lines, none blank-led; ``longest``: the
        longest line's bytes) as pieces ``(data, offset, length)`` in record order (text ``k`` of a piece at
        ``data[offset[k]:offset[k] + length[k]]``), and the classes (``class_field``); None when the block is
        refused (see the module docstring)."""
        read = pj.ReadOptions(use_threads=False, block_size=len(block) + 1)  # one task, one chunk of texts
        try:
            table = pj.read_json(pa.py_buffer(block), read_options=read, parse_options=self.parse,
                                 memory_pool=self.pool)  # see the note at _pool
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
            return None
        if table.num_rows != records:
            return None
        chunks = _leaf(table, self.options.text_field)
        if chunks is None:
            return None
        pieces = []
        for chunk in chunks:
            _, offsets, data = chunk.buffers()
            bounds = np.frombuffer(offsets, dtype=np.int32, count=len(chunk) + 1, offset=4 * chunk.offset)
            raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
            if not valid_utf8(raw[int(bounds[0]):int(bounds[-1])]):
                return None
            wide = bounds.astype(np.int64)
            pieces.append((raw, wide[:-1], np.diff(wide)))
        classes = None
        if self.options.class_field:
            got = _leaf(table, self.options.class_field)
            if got is None:
                return None
            classes = [v for c in got for v in c.to_pylist()]
        return pieces, classes
