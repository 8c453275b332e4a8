"""What a document is, as one validated value: :class:`RecordOptions` (``documents``, ``text_field``,
``class_field``, ``on_bad_record``), and the documented limits of the record scanners."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import InputError, short_repr

__all__ = ["default_metadata", "field_tree", "DOCUMENT_KINDS", "RECORD_KINDS", "BAD_RECORD_MODES", "MAX_RECORD_BYTES",
           "MAX_JSON_DEPTH", "RecordOptions"]

RECORD_KINDS = ("lines", "jsonl", "parquet", "tar")  # documents inside container files
DOCUMENT_KINDS = ("files", *RECORD_KINDS)  # "files": a document is a whole file (the default)
BAD_RECORD_MODES = ("raise", "skip")
MAX_RECORD_BYTES = 1 << 28  # 256 MiB: the longest line (lines, jsonl) a container may hold; longer is a bad record
# the deepest a JSON record may nest arrays and objects (its own object is level 1); deeper is a bad record. msgspec,
# which decodes every read, recurses once a level within Python's recursion limit (1000) less the caller's stack:
# 512 leaves the reader ~480 frames (see .json_depth)
MAX_JSON_DEPTH = 512


def _field(name: str, value: object, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or any(not part for part in value.split(".")):
        raise InputError(f"{name} must be a field name or a dotted path such as 'meta.text', got {short_repr(value)}")
    return value


@dataclass(frozen=True)
class RecordOptions:
    """``documents``: ``"files"`` (a document is a whole file) or a kind of container (``"lines"``, ``"jsonl"``,
    ``"parquet"``, ``"tar"``); ``text_field`` the JSON key / Parquet column of the text (dotted for nesting);
    ``class_field`` the key / column of each document's class (None: classes from folders and F-forms);
    ``on_bad_record`` ``"raise"`` (FormatError naming file, record and offset) or ``"skip"`` (skipped, counted)."""

    documents: str = "files"
    text_field: str = "text"
    class_field: str | None = None
    on_bad_record: str = "raise"

    def __post_init__(self) -> None:
        if self.documents not in DOCUMENT_KINDS:
            raise InputError(f"documents must be one of {list(DOCUMENT_KINDS)}, got {short_repr(self.documents)}")
        _field("text_field", self.text_field, False)
        _field("class_field", self.class_field, True)
        if self.on_bad_record not in BAD_RECORD_MODES:
            raise InputError(f"on_bad_record must be one of {list(BAD_RECORD_MODES)}, got "
                             f"{short_repr(self.on_bad_record)}")
        if self.class_field is not None and self.documents not in ("jsonl", "parquet"):
            raise InputError(f"class_field is read from JSON records or Parquet columns; documents="
                             f"{self.documents!r} has none (classes come from folders and F-forms), got "
                             f"class_field={self.class_field!r}")
        if self.class_field is not None:
            t, c = self.text_field + ".", self.class_field + "."
            if t.startswith(c) or c.startswith(t):
                raise InputError(f"class_field {self.class_field!r} and text_field {self.text_field!r} must name "
                                 "different fields, neither inside the other")

    @property
    def records(self) -> bool:
        """Whether documents are records inside containers (anything but ``"files"``)."""
        return self.documents != "files"

    def to_dict(self) -> dict[str, Any]:
        """The options as JSON (part of the cache keys, ``get_dict``)."""
        return {"documents": self.documents, "text_field": self.text_field, "class_field": self.class_field,
                "on_bad_record": self.on_bad_record}


def field_tree(options: RecordOptions, text: Any, label: Any = None) -> dict[str, Any]:
    """The wanted fields as a tree ``{json key: subtree or leaf}`` along their dotted paths: ``text`` at
    ``text_field``, ``label`` at ``class_field`` (when there is one); what each parser's schema is built from."""
    tree: dict[str, Any] = {}
    wanted = [(options.text_field, text)] + ([(options.class_field, label)] if options.class_field else [])
    for path, leaf in wanted:
        node = tree
        parts = path.split(".")
        for key in parts[:-1]:
            node = node.setdefault(key, {})
        node[parts[-1]] = leaf
    return tree


def default_metadata(options: RecordOptions, metadata: Any) -> Any:
    """The header mode asked for, or when none was (``metadata`` not a str, None or callable: the facade's "not
    given" marker) the default of the kind of document: ``"file"`` for files and tar members, None for lines,
    JSON records and Parquet rows (libmagic on 10^7 short texts would cost ~40 core-minutes)."""
    if metadata is None or isinstance(metadata, str) or callable(metadata):
        return metadata
    return "file" if options.documents in ("files", "tar") else None
