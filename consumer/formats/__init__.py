"""On-disk formats and reference algorithms of other training frameworks (pure numpy, no engine imports).

Each module does one job and opens with its byte layout or algorithm in the docstring:

- :mod:`consumer.formats.mmidx` -- Megatron / fairseq ``MMIDIDX`` ``.idx/.bin`` reader, writer, merge;
- :mod:`consumer.formats.megatron_sampling` -- Megatron GPT document / sample / shuffle indices;
- :mod:`consumer.formats.fairseq_batching` -- fairseq ``batch_by_size``;
- :mod:`consumer.formats.pbin` -- Modalities ``.pbin`` reader / writer (safe index unpickling);
- :mod:`consumer.formats.raw_index` -- Modalities' raw JSONL index (``create_raw_index``).

The names below are loaded on first use (``from consumer.formats import IndexedReader`` imports only
``mmidx``), so ``import consumer`` does not pay for formats it never touches.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fairseq_batching import batch_by_size
    from .megatron_sampling import (
        build_document_index,
        build_gpt_indices,
        build_sample_index,
        build_shuffle_index,
        num_epochs_for,
        num_samples_before_last_epoch,
        sample_index_dtype,
        separate_last_epoch_for,
        shuffle_index_dtype,
    )
    from .mmidx import (
        FAIRSEQ,
        MEGATRON,
        IndexedReader,
        IndexedWriter,
        MMIndex,
        copy_ranges,
        merge,
        optimal_dtype,
        read_index,
        write_fairseq,
    )
    from .pbin import PbinFile, load_index_pickle, read_pbin, write_pbin
    from .raw_index import raw_index_path, read_raw_index, write_raw_index

_HOMES = {
    "mmidx": ("FAIRSEQ", "MEGATRON", "IndexedReader", "IndexedWriter", "MMIndex", "copy_ranges", "merge",
              "optimal_dtype", "read_index", "write_fairseq"),
    "megatron_sampling": ("build_document_index", "build_gpt_indices", "build_sample_index", "build_shuffle_index",
                          "num_epochs_for", "num_samples_before_last_epoch", "sample_index_dtype",
                          "separate_last_epoch_for", "shuffle_index_dtype"),
    "fairseq_batching": ("batch_by_size",),
    "pbin": ("PbinFile", "load_index_pickle", "read_pbin", "write_pbin"),
    "raw_index": ("raw_index_path", "read_raw_index", "write_raw_index"),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "FAIRSEQ",
    "IndexedReader",
    "IndexedWriter",
    "MEGATRON",
    "MMIndex",
    "PbinFile",
    "batch_by_size",
    "build_document_index",
    "build_gpt_indices",
    "build_sample_index",
    "build_shuffle_index",
    "copy_ranges",
    "load_index_pickle",
    "merge",
    "num_epochs_for",
    "num_samples_before_last_epoch",
    "optimal_dtype",
    "raw_index_path",
    "read_index",
    "read_pbin",
    "read_raw_index",
    "sample_index_dtype",
    "separate_last_epoch_for",
    "shuffle_index_dtype",
    "write_fairseq",
    "write_pbin",
    "write_raw_index",
]


def __getattr__(name: str) -> Any:
    """Load the module that defines ``name`` on first use (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'consumer.formats' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
