"""Reading JSONL documents back, in a fresh process: what decoding each text from its record's line costs.

``python -m benchmarks.peers.jsonlreads FOLDER`` (run by ``benchmarks/probes/jsonl_peers.py``) builds
``Consumer(FOLDER, documents="jsonl", metadata=None, cache_dir=False)`` and prints one JSON line: for each way of
reading (random documents in batches of 1, 64 and 4,096; documents in order in batches of 4,096), documents per
second and MB of text per second through the source's ``read_ranges`` (whole documents: lines read, decoded,
lengths checked), and the same documents' lines read alone (``record_lines``: the bytes, no decoding), whose time
over the read's is ``of_lines``.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def _rate(fn, batches: list[np.ndarray], sizes: np.ndarray) -> tuple[float, float]:
    t = time.perf_counter()
    for b in batches:
        fn(b)
    dt = time.perf_counter() - t
    docs = sum(b.size for b in batches)
    return docs / dt, float(sum(int(sizes[b].sum()) for b in batches)) / dt / 1e6


def measure(folder: str) -> dict:
    """The figures of the module docstring."""
    from consumer import Consumer

    ds = Consumer(folder, documents="jsonl", metadata=None, cache_dir=False)
    src = ds.documents.source
    sizes = src.sizes
    n = sizes.size
    rng = np.random.default_rng(0)

    def read(b: np.ndarray) -> None:
        lens = sizes[b]
        at = np.zeros(b.size, dtype=np.int64)
        np.cumsum(lens[:-1], out=at[1:])
        src.read_ranges(b, np.zeros(b.size, dtype=np.int64), lens, np.empty(int(lens.sum()), np.uint8), at)

    out = {}
    for name, batch, count, ordered in (("random, batch 1", 1, 2_000, False), ("random, batch 64", 64, 40_960, False),
                                        ("random, batch 4096", 4096, 40_960, False),
                                        ("in order, batch 4096", 4096, 40_960, True)):
        ids = np.arange(min(count, n), dtype=np.int64) if ordered else rng.permutation(n)[:count].astype(np.int64)
        batches = [ids[a:a + batch] for a in range(0, ids.size, batch)]
        _rate(read, batches[:2], sizes)  # warm
        docs_s, mb_s = _rate(read, batches, sizes)
        line_docs_s, _ = _rate(src.record_lines, batches, sizes)
        out[name] = {"docs_s": docs_s, "mb_s": mb_s, "us_per_doc": 1e6 / docs_s,
                     "of_lines": line_docs_s and docs_s / line_docs_s}
    return {"documents": int(n), "reads": out}


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1])), flush=True)
    sys.stderr.flush()
    os._exit(0)
