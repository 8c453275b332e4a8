"""Scale benchmark of the catalog and index cache (issue: catalog, persistent index cache, SQL).

For generated corpora of 10^4, 10^5 and 10^6 small files (256 B .. 4 KB, three class folders), each
measurement runs in a fresh subprocess so that its peak RSS is its own:

- cold build without libmagic (``metadata=None``, empty cache dir) and its warm reopen;
- cold build with libmagic (``metadata="file"``: description and MIME per file) and its warm reopen,
  for the sizes up to ``--magic-max`` (default 10^5);
- CPU time / wall time of the libmagic build (2.0 = both cores busy);
- bytes of sample index per sample (the cached ``.npy`` arrays / samples).

Run: ``python benchmarks/bench_scale.py [--sizes 10000 100000 1000000] [--data DIR]``
Corpora are generated once under ``--data`` (default ``benchmarks/.data``, git-ignored) and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
from consumer import Consumer  # import time (~0.2 s) is not part of the build or reopen time
t0 = time.perf_counter(); r0 = resource.getrusage(resource.RUSAGE_SELF)
ds = Consumer({corpus!r}, metadata={metadata!r}, cache_dir={cache!r}, style="concat", seqlen=2048)
wall = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
idx = ds.index
index_bytes = sum(getattr(idx, k).nbytes for k in ("seg_ptr", "seg_doc", "seg_start", "seg_len", "seg_col",
                                                   "sample_class", "class_ptr"))
print(json.dumps({{"wall_s": wall, "cpu_s": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
    "peak_rss_mb": r1.ru_maxrss / 1024, "files": len(ds.files), "samples": len(ds),
    "index_bytes_per_sample": index_bytes / len(ds), "cache": ds.build_info["cache"],
    "libmagic_calls": ds.build_info["libmagic_calls"]}}))
"""


def make_corpus(root: str, n_files: int, seed: int = 0) -> None:
    """``n_files`` files in three class folders, random sizes in [256, 4096] (text-like and binary)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(256, 4097, n_files)
    pool = rng.integers(0, 256, 8192, dtype=np.uint8).tobytes()
    text = (b"def f(x):\n    return x * 2  # comment\n" * 200)[:4096]
    for cls in ("py", "bin", "txt"):
        os.makedirs(os.path.join(root, cls), exist_ok=True)
    for i in range(n_files):
        cls = ("py", "bin", "txt")[i % 3]
        n = int(sizes[i])
        data = pool[i % 4096: i % 4096 + n] if cls == "bin" else text[:n]
        fd = os.open(os.path.join(root, cls, f"{i:07d}.{cls}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.close(fd)
    open(os.path.join(root, ".complete"), "w").close()


def run_child(corpus: str, cache: str, metadata) -> dict:
    code = _CHILD.format(root=ROOT, corpus=corpus, cache=cache, metadata=metadata)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--magic-max", type=int, default=100_000, help="largest corpus built with libmagic")
    p.add_argument("--data", default=os.path.join(HERE, ".data"))
    args = p.parse_args()
    results = []
    for n in args.sizes:
        corpus = os.path.join(args.data, f"corpus_{n}")
        if not os.path.exists(os.path.join(corpus, ".complete")):
            shutil.rmtree(corpus, ignore_errors=True)
            make_corpus(corpus, n)
        row = {"files": n}
        for label, metadata in (("plain", None), ("magic", "file")):
            if metadata and n > args.magic_max:
                continue
            cache = tempfile.mkdtemp(prefix="consumer-scale-")
            try:
                cold = run_child(corpus, cache, metadata)
                warm = run_child(corpus, cache, metadata)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            assert cold["cache"] == "miss" and warm["cache"] == "hit", (cold, warm)
            row[label] = {"cold": cold, "warm": warm}
        results.append(row)
        print(json.dumps(row), flush=True)

    print("\n| files | cold build, no libmagic | per file | warm reopen | cold/warm | peak RSS cold / warm "
          "| cold build with libmagic | per file | CPU/wall | warm reopen | cold/warm | peak RSS | index B/sample |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        pc, pw = r["plain"]["cold"], r["plain"]["warm"]
        cells = [f"{r['files']:,}", f"{pc['wall_s']:.2f} s", f"{pc['wall_s'] / r['files'] * 1e6:.0f} µs",
                 f"{pw['wall_s']:.2f} s", f"{pc['wall_s'] / pw['wall_s']:.1f}×",
                 f"{pc['peak_rss_mb']:.0f} / {pw['peak_rss_mb']:.0f} MB"]
        if "magic" in r:
            mc, mw = r["magic"]["cold"], r["magic"]["warm"]
            cells += [f"{mc['wall_s']:.2f} s", f"{mc['wall_s'] / r['files'] * 1e6:.0f} µs",
                      f"{mc['cpu_s'] / mc['wall_s']:.2f}", f"{mw['wall_s']:.2f} s",
                      f"{mc['wall_s'] / mw['wall_s']:.0f}×", f"{mc['peak_rss_mb']:.0f} MB"]
        else:
            cells += ["—"] * 6
        cells.append(f"{pc['index_bytes_per_sample']:.0f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
