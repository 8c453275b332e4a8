"""A packed store's sample index, built once and then mapped: the store's entry in the index cache.

Megatron builds a ``GPTDataset``'s document, sample and shuffle indices once and keeps them as ``.npy`` files
beside the data; every later open maps them. A dataset over a packed store does the same: its sample index
(:data:`~consumer.tokens.index.INDEX_ARRAYS`), each sample's real tokens (``sample_tokens``) and each sample's
range of the store (``runs``, what :func:`~consumer.fetch.reader.packed_runs` finds at the first fetch) are one
entry of the index cache (:mod:`consumer.dataset.cache`: atomic writes, a CRC-32C per array, arrays of 1 MiB or
more memory-mapped read-only, so every process that opens the store shares their pages).

The entry's key is the sha256 of the settings that shape the index (``Spec.key_dict()``: style, seqlen,
long_files, sampling and its seed, ...), the package version and the store's identity
(:attr:`~consumer.packed.open.Store.identity`: its sidecar, and for a local store the inode, size and change time
of each of its files), so a store packed again, or replaced under the same prefix, gets a new entry. Without a
cache directory (``cache_dir=False``) or with a read-only one, the index is built at every open, as before.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._version import __version__
from ..fetch.reader import packed_runs
from ..tokens.documents import DocumentTable
from ..tokens.index import AUTO_SEQLEN_CAP, INDEX_ARRAYS, SampleIndex
from .cache import building, cache_key, load_entry, save_entry

__all__ = ["store_index"]

_FORMAT = 1  # of this entry's arrays and description


def store_index(root: str | None, identity: str, spec_key: dict, documents: DocumentTable,
                build: Callable[[], SampleIndex]) -> tuple[SampleIndex, str]:
    """The sample index of the store ``identity`` under the settings ``spec_key``, and where it came from
    (``"hit"``: mapped from the cache, ``"miss"``: built by ``build`` and cached, ``"off"``: built, no cache).
    Of several processes opening the store at once, one builds the entry and the others map it."""
    if not root or not identity:
        return build(), "off"
    key = cache_key({"packed_store_index": _FORMAT, "store": identity, "spec": spec_key,
                     "auto_seqlen_cap": AUTO_SEQLEN_CAP, "consumer_version": __version__})
    index = _mapped(root, key)
    if index is not None:
        return index, "hit"
    with building(root, key):
        index = _mapped(root, key)
        if index is not None:
            return index, "hit"
        index = build()
        runs = packed_runs(index, documents)
        arrays = {**{k: getattr(index, k) for k in INDEX_ARRAYS}, "sample_tokens": index.sample_tokens(),
                  "runs": runs}
        save_entry(root, key, arrays, {"kind": "packed store index", "spec": spec_key, "seqlen": index.seqlen,
                                       "samples": len(index), "documents": len(documents)})
    out = SampleIndex(seqlen=index.seqlen, **{k: getattr(index, k) for k in INDEX_ARRAYS}, runs=runs)
    out.remember_sample_tokens(arrays["sample_tokens"])
    return out, "miss"


def _mapped(root: str, key: str) -> SampleIndex | None:
    """The entry's index (its arrays mapped), or None when it is missing or damaged (then it is built again)."""
    entry = load_entry(root, key)
    if entry is None:
        return None
    arrays, desc = entry
    if any(k not in arrays for k in (*INDEX_ARRAYS, "sample_tokens", "runs")):
        return None
    index = SampleIndex(seqlen=int(desc["seqlen"]), **{k: arrays[k] for k in INDEX_ARRAYS},
                        runs=np.asarray(arrays["runs"]))
    index.remember_sample_tokens(arrays["sample_tokens"])
    return index
