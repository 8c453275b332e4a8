"""One raw row from one file against a naive open/read/close: the version checks cost two ``fstat`` calls.

On the ``small`` corpus (``--files`` files of 256 B .. 4 KB), ``Consumer(root, metadata=None, cache_dir=False,
style="diff", n_bytes=1, seqlen=4096)``, rows fetched one at a time in a random order, best of ``--repeat``
interleaved rounds, µs per row:

- ``consumer``: ``ds.fetch_numpy(np.array([i]), ["input_array"])`` (open, ``fstat`` against the listing,
  ``preadv``, ``fstat`` again, close; then the row's layout: tokens, EOF and PAD in an int64 row);
- ``naive``: ``os.open``, ``os.read`` of the whole file, ``os.close``, and the same int64 row made by hand
  (``np.full`` with PAD, the bytes copied in, EOF after them): no check at all;
- ``naive_two_fstats``: the same with the two ``fstat`` calls the version check makes.

``consumer / naive_two_fstats`` is what the reader adds beyond the system calls a checked read needs.

Run: ``python benchmarks/probes/raw_row_floor.py [--files 2000] [--rows 2000] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

NAME = "raw_row_floor"
DESCRIPTION = "one raw row from one file against naive open/read/close, with and without the two fstat checks"

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--files``, ``--rows``, ``--repeat``, ``--data-root``."""
    parser.add_argument("--files", type=int, default=2000, help="files in the corpus (default: %(default)s)")
    parser.add_argument("--rows", type=int, default=2000, help="rows fetched per round (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds, best kept (default: %(default)s)")
    parser.add_argument("--data-root", default=None, help="where the corpus is made (default: a temporary folder)")


def run(args: argparse.Namespace) -> dict:
    """µs per row of each reader (see the module docstring) and their ratios."""
    sys.path.insert(0, _REPO)
    from benchmarks.corpora import make_corpus  # noqa: PLC0415
    from consumer import Consumer  # noqa: PLC0415

    root = args.data_root or os.path.join(tempfile.gettempdir(), "consumer-bench-raw-row")
    corpus = make_corpus(root, "small", args.files, seed=1)
    ds = Consumer(corpus.root, metadata=None, cache_dir=False, style="diff", n_bytes=1, seqlen=4096)
    paths = list(ds.files)
    ids = np.random.default_rng(0).integers(0, len(paths), args.rows)

    pad, eof, width = ds.vocab.pad, ds.vocab.eof, ds.seqlen

    def consumer() -> None:
        for i in ids.tolist():
            ds.fetch_numpy(np.array([i]), ["input_array"])

    def row(data: bytes) -> np.ndarray:
        out = np.full((1, width), pad, dtype=np.int64)
        n = min(len(data), width - 1)
        out[0, :n] = np.frombuffer(data, dtype=np.uint8)[:n]
        out[0, n] = eof
        return out

    def naive() -> None:
        for i in ids.tolist():
            fd = os.open(paths[i], os.O_RDONLY)
            data = os.read(fd, 1 << 16)
            os.close(fd)
            row(data)

    def naive_two_fstats() -> None:
        for i in ids.tolist():
            fd = os.open(paths[i], os.O_RDONLY)
            os.fstat(fd)
            data = os.read(fd, 1 << 16)
            os.fstat(fd)
            os.close(fd)
            row(data)

    fns = {"consumer": consumer, "naive": naive, "naive_two_fstats": naive_two_fstats}
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(args.repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    us = {k: round(v / args.rows * 1e6, 2) for k, v in best.items()}
    return {"files": len(paths), "us_per_row": us,
            "consumer_vs_naive": round(best["consumer"] / best["naive"], 3),
            "consumer_vs_naive_two_fstats": round(best["consumer"] / best["naive_two_fstats"], 3),
            "two_fstats_vs_naive": round(best["naive_two_fstats"] / best["naive"], 3)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(parser)
    print(json.dumps(run(parser.parse_args()), indent=1))
