"""``documents="parquet"``: each row of the column ``text_field`` (``string``, ``large_string``, ``binary``,
``large_binary`` or dictionary-encoded; a dotted path reaches into a struct column) is a document. The file is
read one row group at a time (memory bounded by a row group; an object behind a URL by range requests of its
footer and of that row group's column chunks); values have no byte range in the file (pages are
encoded and compressed), so they are written to the decode cache. A null is a bad record (FormatError naming file,
row group and row; skipped and counted with ``on_bad_record="skip"``). A missing column is a FormatError listing
the columns the file has."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import FormatError
from .container import Container
from .options import RecordOptions
from .scanned import BadRecords, DecodeSink, Scanned

__all__ = ["scan_parquet"]


def _column(table: Any, dotted: str, path: str, names: list[str]) -> Any:
    """The (possibly nested) column ``dotted`` of a row group's table, as one Arrow array."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    parts = dotted.split(".")
    col = table.column(parts[0]).combine_chunks()
    for depth, key in enumerate(parts[1:], 1):
        if not pa.types.is_struct(col.type) or col.type.get_field_index(key) < 0:
            raise FormatError(f"{path!r}: no column {dotted!r} (at {'.'.join(parts[:depth])!r}: {col.type}); "
                              f"the file has the columns {names}")
        col = pc.struct_field(col, key)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    return col


def _texts(col: Any, path: str, field: str) -> Any:
    import pyarrow as pa  # noqa: PLC0415

    t = col.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)):
        raise FormatError(f"{path!r}: column {field!r} is {t}, expected a string or binary column")
    return col.cast(pa.large_binary())


def scan_parquet(container: Container, options: RecordOptions, sink: DecodeSink) -> Scanned:
    """The rows of ``container``'s text column as documents (see the module docstring)."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    path, field = container.path, options.text_field
    container.check()
    try:
        if container.ranged is not None:  # an object: footer and row groups by range requests, coalesced
            pf = pq.ParquetFile(container.ranged(), pre_buffer=True)
        else:
            pf = pq.ParquetFile(container.local or path)
    except Exception as e:  # noqa: BLE001  (pyarrow raises ArrowInvalid, OSError, ...: all mean "not Parquet")
        raise FormatError(f"{path!r}: not a readable Parquet file: {e}") from None
    names = pf.schema_arrow.names
    wanted = [field.split(".")[0]] + ([options.class_field.split(".")[0]] if options.class_field else [])
    for w, full in zip(wanted, [field, options.class_field]):
        if w not in names:
            raise FormatError(f"{path!r}: no column {full!r}; the file has the columns {names}")
    bad = BadRecords(path, options.on_bad_record == "skip")
    offs, lens, recs, classes = [], [], [], []
    row0 = 0
    for g in range(pf.num_row_groups):
        table = pf.read_row_group(g, columns=sorted(set(wanted)))
        col = _texts(_column(table, field, path, names), path, field)
        n = len(col)
        valid = np.ones(n, dtype=bool)
        if col.null_count:
            valid = ~np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            for k in np.flatnonzero(~valid).tolist():
                bad.bad(f"column {field!r} is null (no text)", f"row {row0 + k} (row group {g})", None)
        ptr = np.frombuffer(col.buffers()[1], dtype=np.int64)[col.offset:col.offset + n + 1]
        data = col.buffers()[2]
        lo, hi = int(ptr[0]), int(ptr[-1])
        at = sink.put(data.to_pybytes()[lo:hi] if data is not None else b"")
        offs.append((ptr[:-1] - lo + at)[valid])
        lens.append(np.diff(ptr)[valid])
        recs.append(np.arange(row0, row0 + n, dtype=np.int64)[valid])
        if options.class_field:
            labels = _column(table, options.class_field, path, names).to_pylist()
            for k in np.flatnonzero(valid).tolist():
                if labels[k] is None:
                    raise FormatError(f"{path!r}: row {row0 + k} (row group {g}): column {options.class_field!r} is "
                                      "null (no class)")
                classes.append(str(labels[k]).lower() if isinstance(labels[k], bool) else str(labels[k]))
        row0 += n
    container.check()
    def cat(xs: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, np.int64)

    offset = cat(offs)
    return Scanned(offset=offset, length=cat(lens), record=cat(recs), inplace=np.zeros(offset.size, dtype=bool),
                   classes=classes if options.class_field else None, counts={"skipped_records": bad.skipped})
