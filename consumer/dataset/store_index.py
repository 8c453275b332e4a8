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

The full check of a store version is recorded the same way (:func:`record_checks`, :func:`recall_checks`): the
first open checks every document (the ``.idx`` pointers and document indices, the file table's CRC-32, offsets,
classes and sizes, each document's length against its file table) and records, keyed by the store's identity,
each document's first token and length and whether the documents are grouped by class. A later open of the same
version checks the sidecar, the files' sizes and every header, maps what was recorded, and reads nothing per
document. The identity holds each file's change time, which any write moves (a process cannot set it), so a
store written since is checked in full again; ``consumer verify`` (and ``verify=True``) reads everything on demand.
Megatron stores only: a ``.pbin``'s index is a pickle, read whole (and so checked) at every open.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._version import __version__
from ..fetch.reader import packed_runs
from ..tokens.documents import DocumentTable
from ..tokens.index import AUTO_SEQLEN_CAP, INDEX_ARRAYS, SampleIndex, StoreRuns
from .cache import building, cache_key, load_entry, save_entry

if TYPE_CHECKING:  # the store modules load only when a store is opened
    from ..packed.open import Checked, Recall, Store

__all__ = ["store_index", "recall_checks", "record_checks"]

_FORMAT = 2  # of these entries' arrays and descriptions


def store_index(root: str | None, identity: str, spec_key: dict, documents: DocumentTable,
                build: Callable[[], SampleIndex]) -> tuple[SampleIndex, str, str | None, str | None]:
    """The sample index of the store ``identity`` under the settings ``spec_key``; where it came from (``"hit"``:
    mapped from the cache, ``"miss"``: built by ``build`` and cached, ``"off"``: built, no cache); the entry's key;
    and the files' fingerprint recorded in it (``get_dict()["files_sha256"]``, recorded by :func:`annotate_entry`
    the first time it is asked for), or None. Of several processes opening the store at once, one builds the entry
    and the others map it."""
    if not root or not identity:
        return build(), "off", None, None
    key = cache_key({"packed_store_index": _FORMAT, "store": identity, "spec": spec_key,
                     "auto_seqlen_cap": AUTO_SEQLEN_CAP, "consumer_version": __version__})
    found = _mapped(root, key, documents)
    if found is not None:
        return found[0], "hit", key, found[1]
    with building(root, key):
        found = _mapped(root, key, documents)
        if found is not None:
            return found[0], "hit", key, found[1]
        index = build()
        runs = packed_runs(index, documents)
        all_runs = bool((runs >= 0).all())
        arrays = {**index.entry_arrays(), "runs": runs}
        save_entry(root, key, arrays, {"kind": "packed store index", "spec": spec_key, "seqlen": index.seqlen,
                                       "samples": len(index), "documents": len(documents), "all_runs": all_runs})
        written = _mapped(root, key, documents)
    if written is not None:  # served from the entry's maps, as a reopen is: the built arrays are freed
        return written[0], "miss", key, None
    out = SampleIndex.from_entry(index.seqlen, arrays, runs=StoreRuns(runs, all_runs, _doc_ptr(documents)))
    return out, "miss", key, None


def _checked_key(identity: str) -> str:
    return cache_key({"packed_store_checked": _FORMAT, "store": identity, "consumer_version": __version__})


def recall_checks(root: str | None) -> Recall | None:
    """How :func:`~consumer.packed.open.load_store` finds the recorded check of a store version under ``root``
    (None without a cache directory: every open checks everything)."""
    if not root:
        return None

    def recall(identity: str) -> Checked | None:
        from ..packed.open import Checked  # noqa: PLC0415

        entry = load_entry(root, _checked_key(identity))
        if entry is None or "starts" not in entry[0] or "lengths" not in entry[0]:
            return None
        arrays, desc = entry
        return Checked(arrays["starts"], arrays["lengths"], bool(desc.get("grouped")))
    return recall


def record_checks(root: str | None, store: Store) -> None:
    """Record what the full check of ``store`` found (after its open and its lengths' check passed), so that the
    next open of this version of it does nothing per document."""
    local = isinstance(store.prefix, Path)  # a store at a URL is checked at every open (its copies are small)
    if not root or not local or not store.identity or store.checked is not None or store.fmt != "megatron":
        return
    found = store.findings()
    if found is None:
        return
    save_entry(root, _checked_key(store.identity), {"starts": found.starts, "lengths": found.lengths},
               {"kind": "packed store check", "documents": int(found.starts.size), "grouped": found.grouped})


def _doc_ptr(documents: DocumentTable) -> np.ndarray:
    """The first token of each document in the store (the array the runs are bound to)."""
    ptr: np.ndarray = documents.source.choose(files=_not_a_store, store=lambda tokens: tokens.doc_ptr)
    return ptr


def _not_a_store(_: object) -> np.ndarray:
    raise TypeError("documents: a packed store's index needs the store's documents")


def _mapped(root: str, key: str, documents: DocumentTable) -> tuple[SampleIndex, str | None] | None:
    """The entry's index (its arrays mapped) and the files' fingerprint it records, or None when it is missing or
    damaged (then it is built again)."""
    entry = load_entry(root, key)
    if entry is None:
        return None
    arrays, desc = entry
    if any(k not in arrays for k in (*INDEX_ARRAYS, "sample_tokens", "runs")):
        return None
    all_runs = desc.get("all_runs")
    if not isinstance(all_runs, bool):
        return None
    index = SampleIndex.from_entry(int(desc["seqlen"]), arrays,
                                   runs=StoreRuns(np.asarray(arrays["runs"]), all_runs, _doc_ptr(documents)))
    digest = desc.get("files_sha256")
    return index, digest if isinstance(digest, str) else None
