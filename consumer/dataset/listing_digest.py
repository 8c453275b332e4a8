"""The fingerprint of a file listing (``get_dict()["files_sha256"]``), written with numpy: no object per document.

``files_sha256`` is the sha256 of ``json.dumps([[path, size, class], ...])`` in corpus order (what
:func:`~consumer.dataset.build.listing_sha256` computes from :func:`~consumer.dataset.build.files_listing`). Every
loader's and state's dataset fingerprint holds it, so its bytes cannot change. Building that list costs a Python list
and three objects per document, then the JSON encoder's pass over them: 20 s at 10^7 documents, at every
``dataloader()`` and ``get_dict()``.

:func:`files_sha256` writes the same JSON text a chunk of documents at a time with numpy, straight from the paths'
blob, the sizes and the class codes, and hashes it as it goes. The text is the encoder's when every path is
printable ASCII without ``"`` or ``\\`` (then ``json.dumps`` writes its bytes as they are): that is checked on the
blob first, and any other listing takes the encoder's way. Class names are few and always go through
``json.dumps``.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ..formats.mmidx import copy_ranges
from ..sources.paths import PathList
from ..tokens.documents import DocumentTable

__all__ = ["files_sha256"]

_CHUNK = 1 << 16  # documents written at a time
_DIGITS = np.power(10, np.arange(19, dtype=np.int64))  # 10**k for k = 0 .. 18


def plain_paths(paths: PathList) -> bool:
    """Whether ``json.dumps`` writes every path as its bytes: printable ASCII, no ``"`` or ``\\``."""
    blob = paths.packed()
    for a in range(0, blob.size, 1 << 24):
        part = blob[a:a + (1 << 24)]
        if part.size and (int(part.max()) > 0x7E or int(np.count_nonzero((part < 0x20) & (part != 0)))
                          or int(np.count_nonzero((part == 0x22) | (part == 0x5C)))):
            return False
    return True


def files_sha256(documents: DocumentTable, classes: list[str]) -> str | None:
    """sha256 hex of ``json.dumps([[path, size, class], ...])``, or None when a path needs the encoder's escapes
    (the caller then builds the listing)."""
    paths = documents.paths
    if not isinstance(paths, PathList) or not plain_paths(paths):
        return None
    names = [np.frombuffer(json.dumps(c).encode(), dtype=np.uint8) for c in classes]
    name_len = np.array([n.size for n in names], dtype=np.int64)
    name_ptr = np.zeros(len(names) + 1, dtype=np.int64)
    np.cumsum(name_len, out=name_ptr[1:])
    name_blob = np.concatenate(names) if names else np.zeros(0, np.uint8)
    h = hashlib.sha256(b"[")
    n = len(paths)
    for a in range(0, n, _CHUNK):
        b = min(a + _CHUNK, n)
        h.update(_chunk(paths[a:b], np.asarray(documents.doc_size[a:b], dtype=np.int64),
                        np.asarray(documents.doc_class[a:b], dtype=np.int64), name_blob, name_ptr, name_len,
                        first=a == 0))
    h.update(b"]")
    return h.hexdigest()


def _chunk(paths: PathList, size: np.ndarray, cls: np.ndarray, name_blob: np.ndarray, name_ptr: np.ndarray,
           name_len: np.ndarray, first: bool) -> bytes:
    """The JSON of these documents' items, ``, ``-joined (a leading ``, `` unless ``first``)."""
    at = paths.offsets()
    path_len = np.diff(at) - 1
    digits = 1 + (size[:, None] >= _DIGITS[1:]).sum(axis=1)
    clen = name_len[cls]
    # ["PATH", SIZE, CLASS]  and ", " before every item but the very first
    item = 2 + path_len + 3 + digits + 2 + clen + 1
    sep = np.full(size.size, 2, dtype=np.int64)
    if first:
        sep[0] = 0
    start = np.cumsum(sep + item) - item  # where each item's "[" is
    out = np.empty(int(start[-1] + item[-1]), dtype=np.uint8)
    joined = start[sep > 0]  # the ", " before the item
    out[joined - 2] = 0x2C
    out[joined - 1] = 0x20
    # the paths' bytes where they go, with their NUL separators, in one scatter (each NUL lands on the path's
    # closing quote, written next)
    blob = paths.packed()
    out[np.arange(blob.size, dtype=np.int64) + np.repeat(start + 2 - at[:-1], path_len + 1)[:blob.size]] = blob
    out[start] = 0x5B  # [
    out[start + 1] = 0x22  # "
    p = start + 2 + path_len
    out[p] = 0x22
    out[p + 1] = 0x2C
    out[p + 2] = 0x20
    p = p + 3
    for j in range(int(digits.max())):
        m = digits > j
        out[p[m] + j] = (size[m] // _DIGITS[digits[m] - 1 - j]) % 10 + 48
    p = p + digits
    out[p] = 0x2C
    out[p + 1] = 0x20
    copy_ranges(out, name_blob, name_ptr[cls], clen, p + 2)
    out[p + 2 + clen] = 0x5D  # ]
    return out.tobytes()
