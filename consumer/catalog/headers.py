"""File-type headers: a libmagic description (or MIME type) normalised into the text a document starts with.

A header describes a file's *type*, never the individual file: the path (which leaks the label),
BuildIDs, hashes, UUIDs, timestamps, embedded file names and per-file sizes are removed, white space
is folded and the text is capped at :data:`MAX_HEADER_BYTES` bytes (UTF-8, cut on a character boundary).

Modes (``metadata=``): ``"file"`` (libmagic description), ``"mime"`` (MIME type), ``None`` (no
header) or a callable ``path -> str`` (its result is normalised the same way). libmagic itself runs in
:mod:`consumer.sources.magic`; its raw results are kept in the catalog.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ..errors import InputError, short_repr

__all__ = ["MAX_HEADER_BYTES", "METADATA_MODES", "HEADER_RULES_VERSION", "normalise_description", "headers_from",
           "check_metadata"]

MAX_HEADER_BYTES = 96
METADATA_MODES = ("file", "mime")
_DROP_FIELD = re.compile(
    r"(BuildID|timestamp|modified|created|last (?:accessed|written)|\bdate\b|UUID|uuid|serial|"
    r"was \"|\bname\b|checksum|\bcrc\d*\b|\bmd5\b|\bsha\d*\b|\.py size|original size|\bsize\b)",
    re.IGNORECASE)
_HEX = re.compile(r"\b(?:0x)?[0-9a-fA-F]{8,}\b")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
_LONG_LINES = re.compile(r"(with very long lines) \(\d+\)")
_TIME = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b|\b\d{4}-\d{2}-\d{2}\b")
_SPACE = re.compile(r"\s+")
_MIN_LEAK = 4  # shorter file names are too likely to be words of the description itself
HEADER_RULES_VERSION = 1  # bump when normalise_description changes: it is part of every cache key


def normalise_description(text: str, path: str | None = None) -> str:
    """Normalise a type description so it names the type, not the file (see the module docstring)."""
    text = _SPACE.sub(" ", str(text)).strip()
    if path:
        # the full path, then the bare name if it looks like a file name (has an extension), each as
        # a whole token only: files named "t" or "text" must not eat the word "text"
        for leak in _leaks(path):
            if leak in text:  # a pattern per path is compiled only when it can match (it rarely does)
                text = re.sub(rf"(?<![\w.]){re.escape(leak)}(?![\w.])", "", text)
    text = _LONG_LINES.sub(r"\1", text)
    fields = []
    for field in text.split(","):
        if _DROP_FIELD.search(field) or _TIME.search(field):
            continue
        field = _UUID.sub("", field)
        field = _HEX.sub("", field)
        field = _QUOTED.sub("", field)
        field = _SPACE.sub(" ", field).strip(" :;=")
        if field:
            fields.append(field)
    out = ", ".join(fields)
    raw = out.encode("utf-8")[:MAX_HEADER_BYTES]
    return raw.decode("utf-8", errors="ignore").rstrip(" ,")


def check_metadata(metadata) -> None:
    """Validate a ``metadata`` argument (mode name, None or callable), raising :class:`InputError`."""
    if metadata is None or callable(metadata) or metadata in METADATA_MODES:
        return
    raise InputError(f"metadata must be one of {METADATA_MODES}, None or a callable path -> str, "
                     f"got {short_repr(metadata)}")


def headers_from(metadata, paths: Sequence[str], descriptions: Sequence[str | None],
                 mimes: Sequence[str | None]) -> list[str]:
    """One normalised header per path for a ``metadata`` mode, from libmagic results (or the callable)."""
    check_metadata(metadata)
    if metadata is None:
        return [""] * len(paths)
    if callable(metadata):
        out = []
        for path in paths:
            text = metadata(path)
            if not isinstance(text, str):
                raise InputError(f"metadata callable must return str, got {short_repr(text)} for {path!r}")
            out.append(normalise_description(text, path))
        return out
    raw = descriptions if metadata == "file" else mimes
    return _normalise_many(raw, paths)


def _leaks(path: str) -> list[str]:
    """What :func:`normalise_description` removes from a description of ``path``: the path, and the bare
    name when it looks like a file name (has an extension)."""
    name = os.path.basename(path)
    return [path] + ([name] if len(name) >= _MIN_LEAK and "." in name.strip(".") else [])


def _normalise_many(texts: Sequence[str | None], paths: Sequence[str]) -> list[str]:
    """``[normalise_description(text or "", path) ...]``, each distinct description normalised once: a
    description in which neither the path nor the name occurs (after white space is folded, as
    :func:`normalise_description` folds it first) normalises the same whatever the path, and a corpus has
    few distinct descriptions."""
    memo: dict[str, str] = {}
    out = []
    for text, path in zip(texts, paths):
        text = text or ""
        folded = _SPACE.sub(" ", text).strip()
        if path and any(leak in folded for leak in _leaks(path)):
            out.append(normalise_description(text, path))
            continue
        header = memo.get(folded)
        if header is None:
            header = memo[folded] = normalise_description(folded)
        out.append(header)
    return out
