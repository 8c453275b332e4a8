"""Soak: a training-style loader with 2 worker processes fetching for a long time; RSS and open file
descriptors of the main process and of every worker are sampled, and must stay flat.

    python -m benchmarks probe soak --seconds 600 [--files 3000] [--out docs/soak.json]

Prints one row per sample (elapsed s, batches, main RSS MB, worker RSS MB, main fds, worker fds) and a
verdict: flat when the last quarter's maximum is within 10% (RSS) / 2 descriptors of the first quarter's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

NAME = "soak"
DESCRIPTION = "a loader with 2 workers fetching for a long time: RSS and descriptors stay flat"


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _corpus(root: Path, n: int) -> dict[str, list[str]]:
    rng = np.random.default_rng(0)
    out: dict[str, list[str]] = {}
    for i in range(n):
        cls = f"c{i % 3}"
        (root / cls).mkdir(parents=True, exist_ok=True)
        p = root / cls / f"f{i:06d}.bin"
        p.write_bytes(rng.integers(0, 256, int(rng.integers(256, 8192)), dtype=np.uint8).tobytes())
        out.setdefault(cls, []).append(str(p))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--every", type=float, default=15.0, help="seconds between samples")


def run(args: argparse.Namespace) -> dict:  # 55 lines: the loop, its sampling thread and the verdict
    """Fetch for ``--seconds`` while sampling; the samples and the verdict."""

    from consumer import Consumer

    with tempfile.TemporaryDirectory() as tmp:
        fps = _corpus(Path(tmp) / "data", args.files)
        ds = Consumer(fps, style="diff", seqlen=2048, long_files="windows", cache_dir=Path(tmp) / "cache")
        loader = ds.dataloader(32, query="mlm", num_workers=2, persistent_workers=True,
                               multiprocessing_context="fork")
        batches = 0
        stop = threading.Event()
        samples: list[dict] = []

        def sample(t0: float) -> None:
            while not stop.wait(args.every):
                kids = _children(os.getpid())
                samples.append({"s": round(time.perf_counter() - t0, 1), "batches": batches,
                                "main_rss_mb": round(_rss_mb(os.getpid()), 1),
                                "worker_rss_mb": [round(_rss_mb(k), 1) for k in kids],
                                "main_fds": _fds(os.getpid()), "worker_fds": [_fds(k) for k in kids]})
                print(samples[-1], file=sys.stderr, flush=True)

        t0 = time.perf_counter()
        thread = threading.Thread(target=sample, args=(t0,), daemon=True)
        thread.start()
        while time.perf_counter() - t0 < args.seconds:
            for batch in loader:
                batches += 1
                if batch["input_array"].shape[1] != 2048:
                    raise RuntimeError(f"row width {batch['input_array'].shape[1]}, not 2048")
                if time.perf_counter() - t0 >= args.seconds:
                    break
        stop.set()
        thread.join()

    q = max(1, len(samples) // 4)
    first, last = samples[:q], samples[-q:]

    def peak(rows: list[dict], key: str) -> float:
        vals = [r[key] if isinstance(r[key], (int, float)) else max(r[key] or [0]) for r in rows]
        return max(vals) if vals else 0.0

    verdict = {
        "main_rss_flat": peak(last, "main_rss_mb") <= 1.10 * peak(first, "main_rss_mb"),
        "worker_rss_flat": peak(last, "worker_rss_mb") <= 1.10 * peak(first, "worker_rss_mb"),
        "main_fds_flat": peak(last, "main_fds") <= peak(first, "main_fds") + 2,
        "worker_fds_flat": peak(last, "worker_fds") <= peak(first, "worker_fds") + 2,
        "batches": batches, "seconds": args.seconds, "files": args.files,
    }
    return {"samples": samples, "verdict": verdict}
