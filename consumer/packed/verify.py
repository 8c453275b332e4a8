"""Verifying a packed store end to end: every byte of its tokens, not just its sizes.

Opening a store (:func:`~consumer.packed.open.open_packed`) checks everything that costs no full read:
the sidecar, file sizes, the format's index, the file table, every document's length. :func:`verify_packed`
reads the whole token data once more: its sha256 must equal the one recorded at pack time
(``tokens_sha256``), and every id must lie in ``[0, vocab_size)`` (a flipped bit must never reach an
embedding). ``consumer verify PREFIX`` and ``Consumer.from_packed(..., verify=True)`` run it.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

from ..errors import FormatError
from ..storage import Storage
from .open import Store, load_store

__all__ = ["verify_packed"]

_BLOCK = 1 << 22  # tokens per read (4M tokens: 8-16 MB of data)


def verify_packed(prefix: Any, **remote: Any) -> dict:
    """Check every token of the store at ``prefix``; returns ``{prefix, documents, tokens, max_id, checksum,
    seconds}`` (``checksum`` is ``"ok"``, or ``"absent"`` for stores packed before checksums were recorded).
    Raises :class:`~consumer.errors.FormatError` naming the store, expected vs actual, for a wrong checksum or
    an id outside the vocabulary (and the document holding it). ``prefix`` may be a loaded
    :class:`~consumer.packed.open.Store`, or a URL (``storage_options``, ``cache_dir``: see
    :func:`~consumer.packed.open.load_store`; its token data is read once by ranges)."""
    t0 = time.perf_counter()
    store = prefix if isinstance(prefix, Store) else load_store(prefix, Storage.from_kwargs(remote, "verify_packed"))
    side, tokens = store.sidecar, store.tokens
    size = int(side["vocab_size"])
    digest = hashlib.sha256()
    top = -1
    for lo in range(0, int(tokens.size), _BLOCK):
        block = np.asarray(tokens[lo:lo + _BLOCK])
        digest.update(np.ascontiguousarray(block).data)
        if block.size:
            wide = block.astype(np.int64)
            bad = (wide < 0) | (wide >= size)
            if bad.any():
                at = lo + int(np.argmax(bad))
                doc = int(np.searchsorted(store.starts, at, side="right")) - 1
                raise FormatError(f"{store.prefix}: token {at} (document {doc}, {store.paths[doc]!r}): ids must be "
                                  f"in [0, {size}), got {int(tokens[at])}")
            top = max(top, int(wide.max()))
    expected = side.get("tokens_sha256")
    actual = digest.hexdigest()
    if expected is not None and actual != expected:
        raise FormatError(f"{store.prefix}: token data sha256 expected {expected} (recorded at pack time), "
                          f"got {actual}: the store was modified or damaged")
    return {"prefix": str(store.prefix), "documents": int(side["documents"]), "tokens": int(tokens.size),
            "max_id": top, "checksum": "ok" if expected is not None else "absent",
            "seconds": time.perf_counter() - t0}
