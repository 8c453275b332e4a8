"""consumer: a query engine over the raw bytes of files, for byte-level machine learning.

``Consumer(fps)`` reads files (optionally labelled by class) as tokens of ``n_bytes`` bytes, puts a
file-type header in front of each, cuts the streams into samples (``diff`` or ``concat`` style) and
answers ``ds[selection, query]`` with batched int64 torch tensors. Importing this package does not
import torch; the first batch does.
"""

__version__ = "0.1.0"

from .consumer import Consumer  # noqa: E402
from .errors import (  # noqa: E402
    ConsumerError,
    FileChangedError,
    FormatError,
    InputError,
    MissingDependencyError,
    QueryError,
    SampleIndexError,
    SelectionError,
)
from .formats import (  # noqa: E402
    batch_by_size,
    build_document_index,
    build_sample_index,
    build_shuffle_index,
)
from .loader import ConsumerLoader, make_loader  # noqa: E402
from .megatron_index import MegatronSampling  # noqa: E402
from .queries import COLUMNS, QUERY_PRESETS  # noqa: E402
from .vocab import Vocab, decode_ids, encode_bytes  # noqa: E402

__all__ = [
    "__version__",
    "Consumer",
    "Vocab",
    "decode_ids",
    "encode_bytes",
    "MegatronSampling",
    "make_loader",
    "ConsumerLoader",
    "build_document_index",
    "build_sample_index",
    "build_shuffle_index",
    "batch_by_size",
    "QUERY_PRESETS",
    "COLUMNS",
    "ConsumerError",
    "InputError",
    "SelectionError",
    "SampleIndexError",
    "QueryError",
    "FormatError",
    "FileChangedError",
    "MissingDependencyError",
]
