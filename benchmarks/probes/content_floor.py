"""The content pass on a large file against its floor: one read, sha256 and a byte histogram.

On one buffer of ``--mib`` MiB of random bytes, in this process, best of ``--repeat``:

- ``sha256``: ``hashlib.sha256`` of the buffer;
- ``bincount_bytes`` / ``bincount_pairs``: ``np.bincount`` over the bytes, over little-endian byte pairs;
- ``pillow``: Pillow's ``Image.histogram`` over the buffer (:func:`consumer.catalog.histogram.pillow_histogram`),
  when Pillow is installed;
- ``read``: one ``readv`` of the whole file (page cache warm) into a buffer;
- ``floor_numpy`` / ``floor``: the read, sha256 and the pair count / the fastest histogram, one after the other;
- ``pass_numpy`` / ``pass``: the content pass itself (:func:`consumer.catalog.content.content_stats`) on a file
  holding the buffer (page cache warm), with the numpy kernel and with the kernel it uses by default.

Throughputs are GB/s (10^9 bytes); ``pass_vs_floor`` is the pass's throughput over the floor's (target >= 0.8).

Run: ``python benchmarks/probes/content_floor.py [--mib 256] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

NAME = "content_floor"
DESCRIPTION = "content pass (sha256 + byte histogram) on a large file against its floor and its histogram kernels"

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--mib`` and ``--repeat``."""
    parser.add_argument("--mib", type=int, default=256, help="buffer and file size in MiB (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, best kept (default: %(default)s)")


def _interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Best seconds of each function over ``repeat`` rounds, each round running every function once in turn (the
    load of a shared machine falls on all alike)."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def run(args: argparse.Namespace) -> dict:
    """Measure every figure of the module docstring; GB/s each."""
    sys.path.insert(0, _REPO)
    import consumer.catalog.content as content  # noqa: PLC0415
    from consumer.catalog.histogram import numpy_histogram, pillow_histogram  # noqa: PLC0415

    n = args.mib << 20
    data = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
    ref = np.bincount(data, minlength=256)
    try:
        from PIL import Image  # noqa: PLC0415
    except ImportError:
        Image = None  # noqa: N806
    default = content.byte_histogram
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(data.tobytes())
        f.flush()
        st = content.content_stats(f.name)  # page cache warm
        if not np.array_equal(st.histogram, ref):
            raise RuntimeError("the content pass's histogram differs from np.bincount")
        into = np.empty(n, dtype=np.uint8)

        def read_all() -> None:
            fd = os.open(f.name, os.O_RDONLY)
            try:
                os.readv(fd, [memoryview(into.data)])
            finally:
                os.close(fd)

        def pass_numpy() -> None:
            content.byte_histogram = numpy_histogram  # type: ignore[assignment]
            try:
                content.content_stats(f.name)
            finally:
                content.byte_histogram = default  # type: ignore[assignment]

        fns: dict[str, Callable[[], object]] = {
            "read": read_all, "sha256": lambda: hashlib.sha256(data).digest(),
            "bincount_bytes": lambda: np.bincount(data, minlength=256), "bincount_pairs": lambda: numpy_histogram(data),
            "pass_numpy": pass_numpy, "pass": lambda: content.content_stats(f.name)}
        if Image is not None:
            if not np.array_equal(pillow_histogram(data, Image), ref):
                raise RuntimeError("Pillow's histogram differs from np.bincount")
            fns["pillow"] = lambda: pillow_histogram(data, Image)
        sec = _interleaved(fns, args.repeat)
    hist = min(sec["bincount_pairs"], sec.get("pillow", float("inf")))
    sec["floor_numpy"] = sec["read"] + sec["sha256"] + sec["bincount_pairs"]
    sec["floor"] = sec["read"] + sec["sha256"] + hist
    rate = {k: round(n / v / 1e9, 3) for k, v in sec.items()}
    rate["pass_vs_floor"] = round(sec["floor"] / sec["pass"], 3)
    rate["pass_numpy_vs_floor_numpy"] = round(sec["floor_numpy"] / sec["pass_numpy"], 3)
    rate["pass_vs_floor_numpy"] = round(sec["floor_numpy"] / sec["pass"], 3)
    return {"mib": args.mib, "gb_per_s": rate}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(parser)
    print(json.dumps(run(parser.parse_args()), indent=1))
