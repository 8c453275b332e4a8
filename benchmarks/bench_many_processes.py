"""Many processes on one cache directory, N times in a row: the 8-process test of
``tests/dataset/test_many_processes.py`` as a soak.

    python -m benchmarks.bench_many_processes --runs 20 [--workers 8] [--files 120] [--out FILE.json]

Each run starts ``--workers`` processes that build, run content SQL and pack at the same time on one new
cache directory, edits every 10th file, and does it again (``tests/many_processes.py``). Prints one line
per run (seconds, libmagic calls and content reads summed over the processes, index cache outcomes, the
problems found) and a summary: runs without a problem, median and slowest run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.many_processes import problems, run


def main(argv: list[str] | None = None) -> int:
    """Run the soak; exit status 1 when any run had a problem."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--files", type=int, default=120)
    ap.add_argument("--out", help="write every run's figures as JSON here")
    args = ap.parse_args(argv)
    runs = []
    for k in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="many-processes-") as tmp:
            t0 = time.perf_counter()
            result = run(Path(tmp), workers=args.workers, files=args.files)
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
              flush=True)
    ok = sum(not r["problems"] for r in runs)
    times = [r["seconds"] for r in runs]
    print(f"{ok}/{len(runs)} runs without a problem; {args.workers} processes, {args.files} files; "
          f"median {statistics.median(times):.2f} s, slowest {max(times):.2f} s")
    if args.out:
        Path(args.out).write_text(json.dumps({"workers": args.workers, "files": args.files, "runs": runs}, indent=1))
    return 0 if ok == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
