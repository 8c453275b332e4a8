"""Documents inside container files (``Consumer(..., documents=...)``): one scanner per kind of container, a
registry by name (:data:`SCANNERS`), the per-container document index with its decode cache (:mod:`.stash`) and the
:class:`~consumer.sources.records.source.RecordFiles` byte source whose files are the documents."""

from __future__ import annotations

from .jsonl import scan_jsonl
from .lines import scan_lines
from .options import DOCUMENT_KINDS, RECORD_KINDS, RecordOptions
from .parquet import scan_parquet
from .source import RecordFiles
from .tar import scan_tar

__all__ = ["SCANNERS", "DOCUMENT_KINDS", "RECORD_KINDS", "RecordOptions", "RecordFiles"]

SCANNERS = {"lines": scan_lines, "jsonl": scan_jsonl, "parquet": scan_parquet, "tar": scan_tar}
