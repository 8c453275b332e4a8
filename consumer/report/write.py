"""``ds.report(path)``: the corpus report of one dataset, written as one self-contained HTML file.

The page holds no script, font, image link or stylesheet link: its Content-Security-Policy forbids every request, it
reads the same without JavaScript, and its charts are inline SVG. Every number is the answer of the SQL statement
shown beside it (docs/report.md)."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from .._version import __version__
from ..dataset.cache import file_table_sha256
from ..errors import InputError, short_repr
from ..util.fileio import atomic_write_bytes
from ..util.validate import check_bool
from .containers import containers
from .page import page
from .panels import PANELS, Context, overview
from .queries import Queries

__all__ = ["fingerprint", "render_report", "write_report"]

def fingerprint(ds: Any) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of the dataset's settings (``ds.spec.to_dict()``), its
    class names and the sha256 of its file table (paths, classes, sizes, mtimes: the hash the index cache key
    uses). Datasets with the same settings over the same files agree; a change of either changes it."""
    docs = ds.documents
    d = {"settings": ds.spec.to_dict(), "classes": list(ds.classes),
         "files_sha256": file_table_sha256(docs.paths, docs.doc_class, docs.doc_size, docs.doc_mtime)}
    canonical = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _settings(ds: Any, kind: str) -> dict[str, Any]:
    d = ds.spec.to_dict()
    keys = ("style", "n_bytes", "seqlen", "seqlen_requested", "long_files", "metadata", "dedupe")
    records = tuple(k for k in ("documents", "text_field", "class_field", "on_bad_record") if k in d)  # records only
    out: dict[str, Any] = {k: d.get(k) for k in keys + records}
    out.update({"samples": len(ds), "vocab_size": ds.vocab.size, "files": kind, "consumer_version": __version__,
                "fingerprint": fingerprint(ds)})
    return out


def render_report(ds: Any, *, content: bool = False, types: bool = False, title: str | None = None) -> str:
    """The report's HTML text (see :func:`write_report`)."""
    content = check_bool("content", content)
    types = check_bool("types", types)
    kind = str(getattr(ds.documents.source, "kind", "files"))
    records = bool(ds.spec.records.records)  # documents inside containers: panels per document, plus containers
    unit = "documents" if records else "files"
    queries = Queries(ds.spec.style, ds.spec.long_files, int(ds.seqlen), relation=unit, unit=unit)
    ctx = Context(ds, queries, content, types, kind)
    panels = [overview(ctx, _settings(ds, kind))] + [make(ctx) for make in PANELS]
    if records:
        panels.insert(2, containers(ctx))
    classes = f"{len(ds.classes):,} classes" if len(ds.classes) != 1 else "1 class"
    subtitle = f"{len(ds.files):,} {unit} ({kind}), {classes}, {len(ds):,} samples of {int(ds.seqlen):,} tokens"
    return page(f"Corpus report: {_source_name(ds) if title is None else title}", subtitle, panels)


def _source_name(ds: Any) -> str:
    """The folder all files are in: the common path of the smallest and the largest path (one statement)."""
    (low, high), = ds.sql("SELECT min(path), max(path) FROM files", timeout=None)
    try:
        root = os.path.commonpath([low, high]) if low is not None else ""
    except ValueError:  # mixed absolute and relative paths
        root = ""
    return root or "dataset"


def write_report(ds: Any, path: Any, *, content: bool = False, types: bool = False,
                 title: str | None = None) -> str:
    """Write the corpus report of ``ds`` to ``path`` (one HTML file, written atomically); returns the path.

    ``content``: compute and show the content panel (entropy, printable share, duplicates; reads every local file
    once, then the catalog remembers) and the libmagic types; ``types``: compute libmagic's MIME types and
    descriptions (one call per file, remembered) even when the dataset was built with ``metadata=None``; ``title``:
    the page's title after "Corpus report: " (default: the folder all files are in)."""
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"path must be a file path (str or os.PathLike), got {short_repr(path)}")
    html = render_report(ds, content=content, types=types, title=title)
    atomic_write_bytes(path, html.encode("utf-8"))
    return os.fspath(path)
