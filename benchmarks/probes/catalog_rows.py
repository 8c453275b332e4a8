"""Cost of reading catalog rows back (what a build that misses the index cache does for every file).

Fills a catalog file with N rows (``Catalog.insert``: no real files needed) and times ``Catalog.rows``
over all of them, median of several repeats; with per-row checks each row is also verified.

    python -m benchmarks probe catalog_rows --rows 100000
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from consumer.catalog.catalog import Catalog

NAME = "catalog_rows"
DESCRIPTION = "reading catalog rows back (Catalog.rows over N rows)"


def filled_catalog(path: str, n: int) -> tuple[Catalog, list[str], np.ndarray, np.ndarray]:
    """A catalog at ``path`` holding ``n`` synthetic rows (10 classes, 1,000 files a folder, libmagic columns set):
    ``(catalog, paths, sizes, mtimes)``."""
    paths = [f"/data/class{i % 10}/dir{i // 1000}/file{i}.bin" for i in range(n)]
    sizes = np.arange(n, dtype=np.int64) + 100
    mtimes = np.full(n, 1_700_000_000_000_000_000, dtype=np.int64)
    cat = Catalog(path)
    cat.insert(paths, sizes, mtimes, ["data"] * n, ["application/octet-stream"] * n)
    return cat, paths, sizes, mtimes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)


def run(args: argparse.Namespace) -> dict:
    """Fill the catalog, time the reads (median of ``--repeat``)."""
    n = args.rows
    with tempfile.TemporaryDirectory() as tmp:
        cat, paths, _, _ = filled_catalog(os.path.join(tmp, "catalog.sqlite"), n)
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            rows = cat.rows(paths)
            times.append(time.perf_counter() - t)
        cat.close()
    med = statistics.median(times)
    return {"rows": n, "rows_read": len(rows), "catalog_rows_s": med, "us_per_row": med / n * 1e6}
