"""Cost of loading a ``.pbin`` index pickle safely, against CPython's own (unsafe) ``pickle.loads``.

For an index of N documents written by ``pickle.dumps`` (protocol 4, as Modalities and ``write_pbin``
write it; protocol 2 takes the interpreter path), times ``pickle.loads`` alone, the project's bounded
interpreter alone and the whole :func:`consumer.formats.pbin.load_index_pickle` (checks + int64 array).
Prints one markdown table row per protocol.

    python -m benchmarks.bench_pbin_index --documents 1000000
"""

from __future__ import annotations

import argparse
import pickle

import numpy as np

from benchmarks.measure import best_of
from consumer.formats.pbin import MAX_PICKLE_DEPTH, MAX_PICKLE_UNITS, _IndexUnpickler, load_index_pickle


def main() -> None:
    """Build one index, time the three loaders per protocol."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--documents", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    lengths = np.random.default_rng(0).integers(0, 5000, args.documents) * 2
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    index = list(zip(offsets.tolist(), lengths.tolist()))
    print("| documents | protocol | pickle bytes | pickle.loads | bounded interpreter | load_index_pickle |")
    print("|---|---|---|---|---|---|")
    for protocol in (4, 2):
        data = pickle.dumps(index, protocol=protocol)
        c = best_of(lambda data=data: pickle.loads(data), args.repeat)  # our own bytes: the baseline
        vm = best_of(lambda data=data: _IndexUnpickler(data, MAX_PICKLE_UNITS, MAX_PICKLE_DEPTH).load(), args.repeat)
        full = best_of(lambda data=data: load_index_pickle(data), args.repeat)
        print(f"| {args.documents} | {protocol} | {len(data)} | {c:.3f} s | {vm:.3f} s | {full:.3f} s |")


if __name__ == "__main__":
    main()
