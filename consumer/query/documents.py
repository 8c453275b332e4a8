"""The ``documents`` relation: one row per document, beside ``files`` (one row per file).

In files mode every file is one document, so ``documents`` is ``files`` with ``doc_id`` (= ``file_id``),
``record`` 0, ``offset`` 0, ``length`` (= ``size``) and a NULL ``json``: one statement works in every mode. With
documents inside containers (``documents="lines"``, ``"jsonl"``, ...) the dataset's rows are documents, and:

- ``documents`` has ``doc_id, file_id`` (the container), ``path`` (``container#record`` or ``archive.tar/member``),
  ``record, offset, length, class, class_id, tokens, samples``, the libmagic columns computed on the document's
  bytes, ``header``, ``size``/``mtime_ns`` (the document's bytes, the container's change stamp), and for JSON
  records a lazy ``json`` column: the record's line, read from the container only when a statement names it
  (``json_extract_string(json, '$.lang')``). The byte predicates (``head``, ``tail``, ``bytes_at``, ``contains``,
  ``regexp_bytes``) read the document's bytes;
- ``files`` has one row per container: ``file_id, path, class`` (NULL when classes come from a field),
  ``size, mtime_ns``, and ``tokens``/``samples`` summed over its documents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..sources.records.source import RecordFiles
from ..tokens.documents import DocumentTable
from .table import FILES_COLUMNS, path_array

__all__ = ["Relations", "DOCUMENT_COLUMNS", "record_relations", "files_mode_views"]

DOCUMENT_COLUMNS = ("doc_id", "file_id", "path", "record", "offset", "length", "class", "class_id", "tokens",
                    "samples", "extension", "description", "mime", "header", "sha256", "entropy", "printable", "zeros",
                    "histogram", "size", "mtime_ns", "json")
"""The ``documents`` relation's columns, in order."""

_CONTAINERS = "consumer_containers"


def files_mode_views(column: Callable[[str], str], table: str) -> list[tuple[str, str]]:
    """``files`` and ``documents`` when every file is one document (``column(c)`` renders a column of the
    registered ``table``)."""
    files = f"SELECT {', '.join(map(column, FILES_COLUMNS))} FROM {table}"
    docs = ("SELECT file_id AS doc_id, file_id, path, 0::BIGINT AS record, 0::BIGINT AS \"offset\", size AS length, "
            "class, class_id, tokens, samples, extension, description, mime, header, sha256, entropy, printable, "
            "zeros, histogram, size, mtime_ns, NULL::VARCHAR AS json FROM files")
    return [("files", files), ("documents", docs)]


@dataclass
class Relations:
    """What a records dataset adds to the engine: eager ``columns`` of its rows (``container_id``, ``record``,
    ``offset``), the lazy ``json`` loader (None: not JSON records), and the ``containers`` table behind ``files``."""

    columns: dict[str, pa.Array]
    containers: pa.Table
    json: Callable[[], dict[str, pa.Array]] | None = None
    tables: dict[str, pa.Table] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tables = {_CONTAINERS: self.containers}

    @property
    def names(self) -> tuple[str, ...]:
        """The row columns the registered table carries beside the files columns."""
        return (*self.columns, "json")

    def views(self, column: Callable[[str], str], table: str) -> list[tuple[str, str]]:
        """``documents`` over the rows, ``files`` over the containers (see the module docstring)."""
        json_col = column("json") if self.json is not None else "NULL::VARCHAR AS json"
        docs = (f"SELECT file_id AS doc_id, container_id AS file_id, {column('path')}, record, \"offset\", "
                f"size AS length, class, class_id, tokens, samples, {column('extension')}, {column('description')}, "
                f"{column('mime')}, header, {column('sha256')}, {column('entropy')}, {column('printable')}, "
                f"{column('zeros')}, {column('histogram')}, size, mtime_ns, {json_col} FROM {table}")
        files = (f"SELECT c.file_id, c.path, c.class, c.class_id, c.size, c.mtime_ns, "
                 f"lower(regexp_extract(c.path, '^(?:.*/)?\\.*[^./][^/]*\\.([^./]*)$', 1)) AS extension, "
                 f"NULL::VARCHAR AS description, NULL::VARCHAR AS mime, NULL::VARCHAR AS header, "
                 f"NULL::VARCHAR AS sha256, coalesce(d.tokens, 0)::BIGINT AS tokens, "
                 f"coalesce(d.samples, 0)::BIGINT AS samples, NULL::DOUBLE AS entropy, NULL::DOUBLE AS printable, "
                 f"NULL::DOUBLE AS zeros, NULL::BLOB AS histogram FROM {_CONTAINERS} c LEFT JOIN "
                 f"(SELECT container_id, sum(tokens) AS tokens, sum(samples) AS samples FROM {table} "
                 f"GROUP BY container_id) d ON d.container_id = c.file_id")
        return [("documents", docs), ("files", files)]


def record_relations(docs: DocumentTable, classes: list[str], class_ids: np.ndarray) -> Relations | None:
    """The :class:`Relations` of a dataset of records (None for files: :func:`files_mode_views` then)."""
    source: Any = docs.source
    if not isinstance(source, RecordFiles):
        return None
    cont = source.containers
    n = len(cont)
    doc_cont = source.doc_container
    first = np.full(n, -1, dtype=np.int64)
    first[doc_cont[::-1]] = np.arange(doc_cont.size - 1, -1, -1)  # a document of each container (-1: none)
    cls_codes = np.where(first >= 0, docs.doc_class[np.maximum(first, 0)], 0)
    mixed = np.zeros(n, dtype=bool)  # documents in several classes (class_field): no class of the container
    np.logical_or.at(mixed, doc_cont, docs.doc_class != cls_codes[doc_cont])
    none = mixed | (first < 0)
    codes = pa.array(cls_codes.astype(np.int32), mask=none)
    containers = pa.table({
        "file_id": pa.array(np.arange(n, dtype=np.int64)), "path": path_array(cont.paths),
        "class": pa.DictionaryArray.from_arrays(codes, pa.array(list(classes), type=pa.string())),
        "class_id": pa.array(np.asarray(class_ids, dtype=np.int64)[cls_codes], mask=none),
        "size": pa.array(np.asarray(cont.sizes, dtype=np.int64)),
        "mtime_ns": pa.array(np.asarray(cont.stamps, dtype=np.int64))})
    # offset in the container: the document's bytes, or a JSON record's line; NULL for Parquet values
    offset = np.where(source.doc_inplace, source.doc_offset,
                      source.json_offset if source.json_offset is not None else -1)
    if source.json_offset is not None:  # a compressed container's lines are in its decode cache: no offset
        offset[source.json_in_cache()[doc_cont] & ~source.doc_inplace] = -1
    columns = {"container_id": pa.array(doc_cont), "record": pa.array(source.record),
               "offset": pa.array(offset, mask=offset < 0)}
    loader = None
    if source.json_offset is not None:
        def loader() -> dict[str, pa.Array]:
            lines = source.record_lines(np.arange(len(docs)))
            return {"json": pa.array([x.decode("utf-8", "replace") for x in lines], type=pa.large_string())}
    return Relations(columns, containers, loader)
