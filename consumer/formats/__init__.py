"""On-disk formats and reference algorithms of other training frameworks (pure numpy, no engine imports).

Each module does one job and opens with its byte layout or algorithm in the docstring
(spec: ``reference/formats.md``):

- :mod:`consumer.formats.mmidx` -- Megatron / fairseq ``MMIDIDX`` ``.idx/.bin`` reader, writer, merge;
- :mod:`consumer.formats.megatron_sampling` -- Megatron GPT document / sample / shuffle indices;
- :mod:`consumer.formats.fairseq_batching` -- fairseq ``batch_by_size``;
- :mod:`consumer.formats.pbin` -- Modalities ``.pbin`` reader / writer (safe index unpickling).
"""

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
    merge,
    optimal_dtype,
    read_index,
    write_fairseq,
)
from .pbin import PbinFile, load_index_pickle, read_pbin, write_pbin

__all__ = [
    # mmidx
    "FAIRSEQ",
    "MEGATRON",
    "IndexedReader",
    "IndexedWriter",
    "MMIndex",
    "merge",
    "optimal_dtype",
    "read_index",
    "write_fairseq",
    # megatron_sampling
    "build_document_index",
    "build_gpt_indices",
    "build_sample_index",
    "build_shuffle_index",
    "num_epochs_for",
    "num_samples_before_last_epoch",
    "sample_index_dtype",
    "separate_last_epoch_for",
    "shuffle_index_dtype",
    # fairseq_batching
    "batch_by_size",
    # pbin
    "PbinFile",
    "load_index_pickle",
    "read_pbin",
    "write_pbin",
]
