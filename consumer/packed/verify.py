"""Verifying a packed store end to end: every byte of its tokens, not just its sizes.

Opening a store (:func:`~consumer.packed.open.open_packed`) checks everything that costs no full read:
the sidecar, file sizes, the format's index, the file table, every document's length, and the chunk sums file
(:mod:`consumer.packed.sums`); each chunk of token data is then checked the first time a fetch reads it.
:func:`verify_packed` reads the whole token data once: every chunk against its CRC-32C (each damaged chunk is
reported, with its byte range), its sha256 against the one recorded at pack time (``tokens_sha256``), and every
id must lie in ``[0, vocab_size)`` (a flipped bit must never reach an embedding). ``consumer verify PREFIX`` and
``Consumer.from_packed(..., verify=True)`` run it. A store packed before chunk sums existed gets the sha256 and
id checks only.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

from ..errors import FormatError
from ..sources.paths import PathList
from ..storage import Storage
from ..util.validate import check_choice
from .merge_table import duplicated_path
from .open import Store, load_store

__all__ = ["verify_packed"]

_BLOCK = 1 << 22  # tokens per read (4M tokens: 8-16 MB of data; a multiple of every chunk up to 8 MiB)
_LISTED = 20  # damaged chunks named in an error message (the report lists them all)


def verify_packed(prefix: Any, *, errors: str = "raise", **remote: Any) -> dict:
    """Check every token of the store at ``prefix``, chunk by chunk.

    Returns ``{prefix, documents, tokens, max_id, checksum, chunks, chunk_bytes, bad_chunks, bad_id,
    duplicate_path, ok, error, seconds}``: ``duplicate_path`` a path the file table holds twice (an open does not
    look), or None; ``checksum`` is ``"ok"``, ``"bad"``, or ``"absent"`` for stores packed before the sha256 was
    recorded; ``chunks`` the number of chunks checked (0 for a store packed before chunk sums); ``bad_chunks``
    one ``{chunk, bytes: [lo, hi], file, expected, actual}`` per damaged chunk (``bytes``: its range in the data
    file ``file``; ``expected``/``actual``: CRC-32C as 8 hex digits); ``bad_id`` the first id outside the
    vocabulary (``{token, document, path, id}``) or None. With ``errors="raise"`` (default) any damage raises
    :class:`~consumer.errors.FormatError` naming the store and each damaged chunk and its byte range (the first
    20), the bad id and its document, the sha256 expected vs actual; ``errors="report"`` returns the report with
    ``ok`` False and that message as ``error`` instead. ``prefix`` may be a loaded
    :class:`~consumer.packed.open.Store`, or a URL (``storage_options``, ``cache_dir``: see
    :func:`~consumer.packed.open.load_store`; its token data is read once by ranges)."""
    check_choice("errors", errors, ["raise", "report"])
    t0 = time.perf_counter()
    store = prefix if isinstance(prefix, Store) else load_store(prefix, Storage.from_kwargs(remote, "verify_packed"))
    side, tokens, verifier = store.sidecar, store.tokens, store.verifier
    size = int(side["vocab_size"])
    width = int(tokens.itemsize)
    step = _BLOCK if verifier is None else max(_BLOCK, verifier.sums.chunk_bytes // width)
    digest = hashlib.sha256()
    top = -1
    bad_chunks = []
    bad_id = None
    for lo in range(0, int(tokens.size), step):
        block = np.ascontiguousarray(tokens.read_as_stored(lo, min(step, int(tokens.size) - lo)))
        digest.update(block.data)
        if verifier is not None:
            bad_chunks.extend(verifier.scan(block, lo * width))
        if block.size:
            wide = block.astype(np.int64)
            bad = (wide < 0) | (wide >= size)
            if bad_id is None and bad.any():
                at = lo + int(np.argmax(bad))
                doc = int(np.searchsorted(store.starts, at, side="right")) - 1
                bad_id = {"token": at, "document": doc, "path": store.paths[doc], "id": int(block[at - lo])}
            top = max(top, int(wide.max()))
    expected = side.get("tokens_sha256")
    actual = digest.hexdigest()
    checksum = "absent" if expected is None else "ok" if actual == expected else "bad"
    data_file = None if verifier is None else str(verifier.data_file)
    report = {
        "prefix": str(store.prefix), "documents": int(side["documents"]), "tokens": int(tokens.size), "max_id": top,
        "checksum": checksum, "chunks": 0 if verifier is None else verifier.sums.chunks,
        "chunk_bytes": None if verifier is None else verifier.sums.chunk_bytes,
        "bad_chunks": [{"chunk": b.chunk, "bytes": [b.file_lo, b.file_hi], "file": data_file,
                        "expected": f"{b.expected:08x}", "actual": f"{b.actual:08x}"} for b in bad_chunks],
        "bad_id": bad_id, "duplicate_path": None if side.get("peer") else _duplicate_path(store.paths),
        "error": None,
        "seconds": time.perf_counter() - t0,
    }
    report["ok"] = not bad_chunks and bad_id is None and checksum != "bad" and report["duplicate_path"] is None
    if not report["ok"]:
        report["error"] = _message(store, report, bad_chunks, data_file, size, expected, actual)
        if errors == "raise":
            raise FormatError(report["error"])
    return report


def _duplicate_path(paths: PathList) -> str | None:
    """A path the file table holds more than once, or None (:func:`~.merge_table.duplicated_path`). An open does
    not look for this: it is checked here, on demand, and when a store is packed or merged."""
    found = duplicated_path(paths)
    return None if found is None else found.decode("utf-8", "surrogateescape")


def _message(store: Store, report: dict, bad_chunks: list, data_file: str | None, size: int, expected: str | None,
             actual: str) -> str:
    """Every kind of damage found, in one message naming the store."""
    parts = []
    if bad_chunks:
        named = "; ".join(b.describe(data_file) for b in bad_chunks[:_LISTED])
        more = f"; and {len(bad_chunks) - _LISTED} more" if len(bad_chunks) > _LISTED else ""
        parts.append(f"{len(bad_chunks)} of {report['chunks']} chunks damaged: {named}{more}")
    bad_id = report["bad_id"]
    if bad_id is not None:
        parts.append(f"token {bad_id['token']} (document {bad_id['document']}, {bad_id['path']!r}): ids must be in "
                     f"[0, {size}), got {bad_id['id']}")
    if report["duplicate_path"] is not None:
        parts.append(f"file table: expected each path once, got {report['duplicate_path']!r} more than once")
    if report["checksum"] == "bad":
        parts.append(f"token data sha256 expected {expected} (recorded at pack time), got {actual}: the store was "
                     "modified or damaged")
    return f"{store.prefix}: " + "; ".join(parts)
