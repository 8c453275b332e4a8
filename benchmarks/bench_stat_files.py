"""Cost of the per-file checks of ``ir.stat_files`` on a warm reopen (files already in the OS caches).

Compares, on the same N small files, a plain ``os.stat`` loop (what a reopen cost before the checks)
with :func:`consumer.sources.corpus.stat_files` (stat + one non-blocking open/close per file + device/inode check),
and times a whole warm ``Consumer`` reopen (cache hit) for context. Prints one markdown table row.

    python -m benchmarks.bench_stat_files --files 100000
"""

from __future__ import annotations

import argparse
import os
import tempfile

from benchmarks.measure import best_of
from consumer import Consumer
from consumer.sources.corpus import normalise, stat_files


def make_files(root: str, n: int) -> None:
    """``n`` files of 10..73 bytes in 10 class folders of 100 sub-folders each."""
    for i in range(n):
        d = os.path.join(root, f"c{i % 10}", f"d{(i // 10) % 100}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}.bin"), "wb") as f:
            f.write(bytes([i % 251]) * (10 + i % 64))


def main() -> None:
    """Build the files, warm the caches, time both loops and a warm reopen."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
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
    print("| files | os.stat loop | stat_files (stat + open/close + inode check) | extra per file | warm reopen |")
    print("|---|---|---|---|---|")
    print(f"| {n} | {stat_only:.3f} s | {checked:.3f} s ({checked / stat_only:.2f}x) | "
          f"{(checked - stat_only) / n * 1e6:.2f} us | {reopen:.3f} s |")


if __name__ == "__main__":
    main()
