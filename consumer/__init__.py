"""consumer: a query engine over the raw bytes of files, for byte-level machine learning.

``Consumer(fps)`` reads files (optionally labelled by class) as tokens of ``n_bytes`` bytes, puts a
file-type header in front of each, cuts the streams into samples (``diff`` or ``concat`` style) and
answers ``ds[selection, query]`` with batched int64 torch tensors. Importing this package does not
import torch (the first batch does), nor the packed-store and format modules (their first use does).

The public API is what ``__all__`` lists; the file formats of other frameworks live in
:mod:`consumer.formats`. Every other module is an implementation detail.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .catalog.duplicates import dedupe_plan, find_duplicates
from .consumer import Consumer
from .dataset import compat as _compat
from .dataset.cache import list_entries as list_cache_entries
from .dataset.clear import clear as clear_cache
from .errors import (
    ConsumerError,
    ConsumerWarning,
    FileChangedError,
    FormatError,
    InputError,
    MissingDependencyError,
    QueryError,
    RemoteError,
    SampleIndexError,
    SelectionError,
    StorageFullError,
    WorkerError,
)
from .fetch.columns import COLUMNS, QUERY_PRESETS
from .fetch.objectives import span_vocab_size
from .fetch.spans import compute_input_and_target_lengths
from .query.rows import Rows
from .spec import Spec
from .storage import default_cache_dir
from .tokens.megatron_index import MegatronSampling
from .tokens.vocab import Vocab, decode_ids, encode_bytes

_compat.install()  # datasets pickled by 0.2 (flat module names) still load

if TYPE_CHECKING:
    from .mixtures import Mixture, mix
    from .packed import inspect_packed, merge_packed, open_packed, read_sidecar, verify_packed
    from .training.loader import ConsumerLoader, make_loader

_LAZY = {"inspect_packed": "packed", "merge_packed": "packed", "open_packed": "packed", "read_sidecar": "packed",
         "verify_packed": "packed", "make_loader": "training.loader", "ConsumerLoader": "training.loader",
         "mix": "mixtures", "Mixture": "mixtures"}

__all__ = [
    "__version__",
    "Consumer",
    "Spec",
    "Vocab",
    "decode_ids",
    "encode_bytes",
    "MegatronSampling",
    "QUERY_PRESETS",
    "COLUMNS",
    "span_vocab_size",
    "compute_input_and_target_lengths",
    "Rows",
    "make_loader",
    "ConsumerLoader",
    "mix",
    "Mixture",
    "find_duplicates",
    "dedupe_plan",
    "merge_packed",
    "inspect_packed",
    "open_packed",
    "read_sidecar",
    "verify_packed",
    "default_cache_dir",
    "list_cache_entries",
    "clear_cache",
    "ConsumerError",
    "ConsumerWarning",
    "InputError",
    "StorageFullError",
    "SelectionError",
    "SampleIndexError",
    "QueryError",
    "RemoteError",
    "FormatError",
    "FileChangedError",
    "MissingDependencyError",
    "WorkerError",
]


def __getattr__(name: str) -> Any:
    """Load the packed-store, loader and mixture names on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'consumer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
