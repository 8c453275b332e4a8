"""Many processes on one cache directory, N times in a row: the 8-process test of
``tests/dataset/test_many_processes.py`` as a soak.

    python -m benchmarks probe many_processes --runs 20 [--workers 8] [--files 120] [--out FILE.json]

Each run starts ``--workers`` processes that build, run content SQL and pack at the same time on one new
cache directory, edits every 10th file, and does it again (``tests/helpers/many_processes.py``). Prints one line
per run (seconds, libmagic calls and content reads summed over the processes, index cache outcomes, the
problems found) and a summary: runs without a problem, median and slowest run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.helpers.many_processes import problems  # the test suite's many-process helper
from tests.helpers.many_processes import run as run_processes

NAME = "many_processes"
DESCRIPTION = "many processes on one cache directory, N runs in a row (a soak of the 8-process test)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--files", type=int, default=120)


def run(args: argparse.Namespace) -> dict:
    """Run the soak: every run's figures and problems, and how many runs had none."""
    runs = []
    for k in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="many-processes-") as tmp:
            t0 = time.perf_counter()
            result = run_processes(Path(tmp), workers=args.workers, files=args.files)
            seconds = time.perf_counter() - t0
            found = problems(result, Path(tmp) / "cache")
        phases = result["phases"]
        row = {"run": k + 1, "seconds": round(seconds, 2), "problems": found,
               "libmagic": [sum(r.get("libmagic", 0) for r in phases[ph]) for ph in (1, 2)],
               "content": [sum(r.get("content", 0) for r in phases[ph]) for ph in (1, 2)],
               "misses": [sum(r.get("cache") == "miss" for r in phases[ph]) for ph in (1, 2)]}
        runs.append(row)
        print(f"run {k + 1:3d}: {seconds:6.2f} s  libmagic {row['libmagic']}  content {row['content']}  "
              f"index builds {row['misses']}  {'ok' if not found else 'PROBLEMS: ' + '; '.join(found)[:500]}",
              file=sys.stderr, flush=True)
    times = [r["seconds"] for r in runs]
    return {"workers": args.workers, "files": args.files, "runs": runs,
            "runs_without_problem": sum(not r["problems"] for r in runs),
            "median_s": statistics.median(times) if times else None, "slowest_s": max(times, default=None)}
