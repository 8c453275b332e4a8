"""Cost of the per-file checks of ``stat_files`` on a warm reopen (files already in the OS caches).

Compares, on the same N small files, a plain ``os.stat`` loop (what a reopen cost before the checks)
with :func:`consumer.sources.corpus.stat_files` (stat + one non-blocking open/close per file + device/inode check),
and times a whole warm ``Consumer`` reopen (cache hit) for context.

    python -m benchmarks probe stat_files --files 100000
"""

from __future__ import annotations

import argparse
import os
import tempfile

from ..measure import best_of

NAME = "stat_files"
DESCRIPTION = "per-file checks of a warm reopen (stat_files) against a plain os.stat loop"


def make_files(root: str, n: int) -> None:
    """``n`` files of 10..73 bytes in 10 class folders of 100 sub-folders each."""
    for i in range(n):
        d = os.path.join(root, f"c{i % 10}", f"d{(i // 10) % 100}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}.bin"), "wb") as f:
            f.write(bytes([i % 251]) * (10 + i % 64))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)


def run(args: argparse.Namespace) -> dict:
    """Build the files, warm the caches, time both loops and a warm reopen (best of ``--repeat``)."""
    from consumer import Consumer
    from consumer.sources.corpus import normalise, stat_files

    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "data")
        make_files(root, args.files)
        paths, _ = normalise(root).flat()
        stat_only = best_of(lambda: [os.stat(q) for q in paths], args.repeat)
        checked = best_of(lambda: stat_files(paths), args.repeat)
        cache = os.path.join(tmp, "cache")
        Consumer(root, cache_dir=cache, metadata=None, seqlen=64).close()  # cold build fills the cache
        reopen = best_of(lambda: Consumer(root, cache_dir=cache, metadata=None, seqlen=64).close(), args.repeat)
    n = len(paths)
    return {"files": n, "stat_loop_s": stat_only, "stat_files_s": checked, "x_stat_loop": checked / stat_only,
            "extra_us_per_file": (checked - stat_only) / n * 1e6, "warm_reopen_s": reopen}
