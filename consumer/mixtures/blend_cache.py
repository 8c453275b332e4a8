"""A Megatron blend's arrays built once, then mapped: an entry of the index cache (issue #37).

megatron-core builds a ``BlendedDataset``'s ``dataset_index``/``dataset_sample_index`` and each ``GPTDataset``'s
document, sample and shuffle indices once, keeps them as ``.npy`` files under a hash of their configuration, and maps
them at every later run. A blend (:class:`~consumer.mixtures.blend.Blend`) does the same with the index cache
(:mod:`consumer.dataset.cache`: atomic writes, a CRC-32C per array, arrays of 1 MiB or more memory-mapped
read-only): one entry holds the two blend arrays, each part's Megatron-order :class:`SampleIndex` (its
:data:`~consumer.tokens.index.INDEX_ARRAYS`, ``sample_tokens`` and, for a packed store, each sample's store range,
what :func:`~consumer.fetch.reader.packed_runs` finds at a first fetch, and the index's facts), and the samples each
part gives the blend.
A later ``mix(..., sampling="megatron")`` over the same parts maps them and reads nothing per sample, at the mix
or at its first fetch.

The entry's key is the sha256 of what shapes the arrays: each part's own cache identity (a store's index entry key,
which holds the store's identity and its settings; a dataset over files, its build key, which holds its listing),
each part's ``seq_length`` and extra token, the weights as given, ``num_samples``, the seed, the surplus and the
package version. It lives in the first part's cache directory. A part without a cache identity (``cache_dir=False``,
a ``subset``/``split``/``where`` of a dataset) makes the blend build its arrays at every ``mix``, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._version import __version__
from ..dataset.cache import building, cache_key, load_entry, save_entry
from ..fetch.reader import packed_runs
from ..tokens.index import INDEX_ARRAYS, SampleIndex, StoreRuns

__all__ = ["BlendArrays", "cached_blend"]

_FORMAT = 3  # of these entries (2: store ranges; 3: index facts)
BlendArrays = tuple[np.ndarray, np.ndarray, list[SampleIndex], list[int]]
"""``dataset_index``, ``dataset_sample_index``, each part's index in Megatron's order, the samples each part gives."""


def _identity(part: Any) -> tuple[str | None, str] | None:
    """A part's cache directory and identity key, or None when it has none."""
    info = getattr(part, "build_info", None) or {}
    entry = info.get("index_entry")
    if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], str):
        return entry[0], entry[1]
    if info.get("cache") in ("hit", "miss") and isinstance(info.get("key"), str):
        return info.get("cache_dir"), info["key"]
    return None


def cached_blend(parts: dict[str, Any], facts: dict[str, Any], build: Callable[[], BlendArrays]
                 ) -> tuple[BlendArrays, str]:
    """The blend's arrays (see the module docstring) and where they came from: ``"hit"`` (mapped from the cache),
    ``"miss"`` (built by ``build``, cached, then mapped) or ``"off"`` (built, no cache). ``facts``: the settings
    that shape the arrays besides the parts' identities. Of several processes at once, one builds, the others map."""
    ids = [_identity(part) for part in parts.values()]
    roots = [i[0] for i in ids if i is not None and i[0]]
    if any(i is None for i in ids) or not roots:
        return build(), "off"
    root = str(roots[0])
    key = cache_key({"megatron_blend": _FORMAT, "parts": [i[1] for i in ids if i is not None], "facts": facts,
                     "consumer_version": __version__})
    found = _load(root, key, parts)
    if found is not None:
        return found, "hit"
    with building(root, key):
        found = _load(root, key, parts)
        if found is not None:
            return found, "hit"
        made = build()
        dataset_index, dataset_sample_index, indexes, counts = made
        arrays = {"dataset_index": dataset_index, "dataset_sample_index": dataset_sample_index}
        all_runs = []
        for p, (index, part) in enumerate(zip(indexes, parts.values(), strict=True)):
            arrays.update(index.entry_arrays(f"part{p}."))
            runs = packed_runs(index, part.documents) if _doc_ptr(part) is not None else None
            if runs is not None:
                arrays[f"part{p}.runs"] = runs
            all_runs.append(None if runs is None else bool((runs >= 0).all()))
        save_entry(root, key, arrays, {"kind": "megatron blend", "facts": facts, "counts": list(counts),
                                       "seqlens": [index.seqlen for index in indexes], "samples": len(dataset_index),
                                       "all_runs": all_runs, "index_facts": [index.facts() for index in indexes]})
        written = _load(root, key, parts)
    return (written if written is not None else made), "miss"


def _doc_ptr(part: Any) -> np.ndarray | None:
    """A packed store part's first token of each document (what store ranges are bound to), else None."""
    ptr: np.ndarray | None = part.documents.source.choose(files=lambda _: None, store=lambda tokens: tokens.doc_ptr)
    return ptr


def _load(root: str, key: str, parts: dict[str, Any]) -> BlendArrays | None:
    """The entry's arrays (mapped), or None when it is missing or damaged (then it is built again)."""
    entry = load_entry(root, key)
    if entry is None:
        return None
    arrays, desc = entry
    n_parts = len(parts)
    counts, seqlens, all_runs = desc.get("counts"), desc.get("seqlens"), desc.get("all_runs")
    index_facts = desc.get("index_facts")
    names = ["dataset_index", "dataset_sample_index",
             *(f"part{p}.{k}" for p in range(n_parts) for k in (*INDEX_ARRAYS, "sample_tokens"))]
    if any(n not in arrays for n in names) or not isinstance(counts, list) or not isinstance(seqlens, list) or \
            len(counts) != n_parts or len(seqlens) != n_parts or not isinstance(all_runs, list) or \
            len(all_runs) != n_parts or not isinstance(index_facts, list) or len(index_facts) != n_parts:
        return None
    indexes = []
    for p, part in enumerate(parts.values()):
        ptr = _doc_ptr(part)
        runs = None
        if ptr is not None and isinstance(all_runs[p], bool) and f"part{p}.runs" in arrays:
            runs = StoreRuns(np.asarray(arrays[f"part{p}.runs"]), all_runs[p], ptr)
        facts = index_facts[p] if isinstance(index_facts[p], dict) else None  # what a reader checks once
        indexes.append(SampleIndex.from_entry(int(seqlens[p]), arrays, f"part{p}.", runs=runs, facts=facts))
    return arrays["dataset_index"], arrays["dataset_sample_index"], indexes, [int(c) for c in counts]
