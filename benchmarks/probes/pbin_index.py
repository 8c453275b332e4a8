"""Cost of loading a ``.pbin`` index pickle safely, against CPython's own (unsafe) ``pickle.loads``.

For an index of N documents written by ``pickle.dumps`` (protocol 4, as Modalities and ``write_pbin``
write it; protocol 2 takes the interpreter path), times ``pickle.loads`` alone and the whole
:func:`consumer.formats.pbin.load_index_pickle` (bounded interpreter + checks + int64 array), per protocol.

    python -m benchmarks probe pbin_index --documents 1000000
"""

from __future__ import annotations

import argparse
import pickle

import numpy as np

from ..measure import best_of

NAME = "pbin_index"
DESCRIPTION = "safe .pbin index unpickling (load_index_pickle) against pickle.loads"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--documents", type=int, default=1_000_000, help="documents in the index")
    parser.add_argument("--repeat", type=int, default=3)


def run(args: argparse.Namespace) -> dict:
    """Build one index, time both loaders per protocol (best of ``--repeat``)."""
    from consumer.formats.pbin import load_index_pickle

    lengths = np.random.default_rng(0).integers(0, 5000, args.documents) * 2
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    index = list(zip(offsets.tolist(), lengths.tolist()))
    rows = []
    for protocol in (4, 2):
        data = pickle.dumps(index, protocol=protocol)
        c = best_of(lambda data=data: pickle.loads(data), args.repeat)  # our own bytes: the baseline
        full = best_of(lambda data=data: load_index_pickle(data), args.repeat)
        rows.append({"protocol": protocol, "pickle_bytes": len(data), "pickle_loads_s": c,
                     "load_index_pickle_s": full, "x_pickle_loads": full / c})
    return {"documents": args.documents, "protocols": rows}
