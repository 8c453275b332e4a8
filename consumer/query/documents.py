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
from .arrays import dictionary, numbers, strings
from .table import FILES_COLUMNS, path_array

__all__ = ["Relations", "DOCUMENT_COLUMNS", "record_relations", "files_mode_views"]

DOCUMENT_COLUMNS = ("doc_id", "file_id", "path", "record", "offset", "length", "class", "class_id", "tokens",
                    "samples", "extension", "description", "mime", "header", "sha256", "entropy", "printable", "zeros",
                    "histogram", "size", "mtime_ns", "json")
"""The ``documents`` relation's columns, in order."""

_CONTAINERS = "consumer_containers"


def files_mode_views(column: Callable[[str], str], table: str) -> list[tuple[str, str]]:
    """``files`` and ``documents`` when every file is one document (``column(c)``: the SQL expression of column
    ``c`` over the registered ``table``)."""
    items = ", ".join(f'{column(c)} AS "{c}"' for c in FILES_COLUMNS)
    files = f"SELECT {items} FROM {table}"
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
        """``documents`` over the rows, ``files`` over the containers (see the module docstring); ``column(c)``
        is the SQL expression of column ``c`` over the registered ``table``."""
        def item(c: str, name: str | None = None) -> str:
            return f'{column(c)} AS "{name or c}"'

        json_col = item("json") if self.json is not None else "NULL::VARCHAR AS json"
        # the row columns may be int32 (RecordFiles): shown as BIGINT, as in files mode
        shown = ", ".join(item(c) for c in ("class", "class_id", "tokens", "samples", "extension", "description",
                                            "mime", "header", "sha256", "entropy", "printable", "zeros",
                                            "histogram", "size", "mtime_ns"))
        docs = (f"SELECT {item('file_id', 'doc_id')}, container_id::BIGINT AS file_id, {item('path')}, "
                f"record::BIGINT AS record, \"offset\"::BIGINT AS \"offset\", "
                f"{item('size', 'length')}, {shown}, {json_col} FROM {table}")
        files = (f"SELECT c.file_id, c.path, c.class, c.class_id, c.size, c.mtime_ns, "
                 f"lower(regexp_extract(c.path, '^(?:.*/)?\\.*[^./][^/]*\\.([^./]*)$', 1)) AS extension, "
                 f"NULL::VARCHAR AS description, NULL::VARCHAR AS mime, NULL::VARCHAR AS header, "
                 f"NULL::VARCHAR AS sha256, coalesce(d.tokens, 0)::BIGINT AS tokens, "
                 f"coalesce(d.samples, 0)::BIGINT AS samples, NULL::DOUBLE AS entropy, NULL::DOUBLE AS printable, "
                 f"NULL::DOUBLE AS zeros, NULL::BLOB AS histogram FROM {_CONTAINERS} c LEFT JOIN "
                 f"(SELECT container_id, sum({column('tokens')}) AS tokens, sum({column('samples')}) AS samples "
                 f"FROM {table} "
                 f"GROUP BY container_id) d ON d.container_id = c.file_id")
        return [("documents", docs), ("files", files)]


def _offsets(source: RecordFiles) -> pa.Array:
    """Each document's offset in its container: its bytes (in place), or its JSON record's line; NULL for Parquet
    values and for the records of a compressed container (their lines are in its decode cache, not at an offset
    of the container). The source's own array when one kind covers every document (no copy: 4 or 8 bytes a
    document less)."""
    inplace, json_offset = source.doc_inplace, source.json_offset
    if bool(inplace.all()):
        return numbers(source.doc_offset)
    cached = None
    if json_offset is not None:
        cached = source.json_in_cache()[source.doc_container] & ~inplace
        if not bool(cached.any()):
            cached = None
        elif not bool(inplace.any()) and bool(cached.all()):
            return pa.nulls(inplace.size, type=pa.from_numpy_dtype(json_offset.dtype))
    if json_offset is not None and cached is None and not bool(inplace.any()):
        return numbers(json_offset)
    offset = np.where(inplace, source.doc_offset, json_offset if json_offset is not None else -1)
    if cached is not None:
        offset[cached] = -1
    return numbers(offset, mask=offset < 0)


def _mixed(doc_cont: np.ndarray, doc_class: np.ndarray, cls_codes: np.ndarray) -> np.ndarray:
    """The containers whose documents are in several classes (``class_field``): they have no class. When each
    container's documents are together (classes from folders) by neighbours compared (a byte a document), else
    each document against its container's first."""
    mixed = np.zeros(cls_codes.size, dtype=bool)
    if doc_cont.size > 1 and bool(np.all(doc_cont[1:] >= doc_cont[:-1])):
        split = doc_class[1:] != doc_class[:-1]
        split &= doc_cont[1:] == doc_cont[:-1]
        mixed[doc_cont[1:][split]] = True
    else:
        np.logical_or.at(mixed, doc_cont, doc_class != cls_codes[doc_cont])
    return mixed


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
    none = _mixed(doc_cont, docs.doc_class, cls_codes) | (first < 0)
    containers = pa.table({
        "file_id": numbers(np.arange(n, dtype=np.int64)), "path": path_array(cont.paths),
        "class": dictionary(cls_codes, classes, mask=none),
        "class_id": numbers(np.asarray(class_ids, dtype=np.int64)[cls_codes], mask=none),
        "size": numbers(cont.sizes, np.int64),
        "mtime_ns": numbers(cont.stamps, np.int64)})
    # offset in the container: the document's bytes, or a JSON record's line; NULL for Parquet values
    columns = {"container_id": numbers(doc_cont), "record": numbers(source.record),
               "offset": _offsets(source)}
    loader = None
    if source.json_offset is not None:
        def loader() -> dict[str, pa.Array]:
            lines = source.record_lines(np.arange(len(docs)))
            return {"json": strings([x.decode("utf-8", "replace") for x in lines], large=True)}
    return Relations(columns, containers, loader)
