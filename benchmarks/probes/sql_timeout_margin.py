"""Probe: how long past its ``timeout`` a DuckDB statement of ``ds.sql`` runs when each row builds the largest value
one guarded function call may build (``consumer.query.bounds.MAX_GENERATED_BYTES``), and how fast a statement
asking for more is refused. The margin of ``docs/query.md`` is the largest overshoot seen here."""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from benchmarks.measure import median

NAME = "sql_timeout_margin"
DESCRIPTION = "seconds a DuckDB statement runs past its timeout with the largest values the engine lets one call build"


def _statements(cap: int) -> dict[str, str]:
    rows = "FROM range(1000000000) t(i)"
    return {
        "repeat per row": f"SELECT sum(length(repeat('x', {cap} - (i % 2)))) {rows}",
        "lpad per row": f"SELECT sum(length(lpad('x', ({cap // 4} - (i % 2))::INTEGER, 'y'))) {rows}",
        "list_resize per row": f"SELECT sum(len(list_resize([i], {cap // 8} - (i % 2)))) {rows}",
        "repeat 3e9 (refused)": "SELECT length(repeat('x', 3000000000))",
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--timeout`` seconds per statement, ``--repeat`` runs of each."""
    parser.add_argument("--timeout", type=float, default=1.0, help="the statements' timeout in seconds")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each statement")


def run(args: argparse.Namespace) -> dict:
    """Seconds past the timeout per statement (every run, the median and the largest) and how each ended."""
    from consumer import Consumer, QueryError
    from consumer.query.bounds import MAX_GENERATED_BYTES

    with tempfile.TemporaryDirectory() as root:
        for cls in ("a", "b"):
            os.makedirs(os.path.join(root, cls))
            with open(os.path.join(root, cls, "f.txt"), "w") as f:
                f.write(cls * 100)
        ds = Consumer(root, cache_dir=False)
        ds.sql("SELECT 1")  # the engine's first connection, outside the timing
        out: dict = {"timeout_s": args.timeout, "cap_bytes": MAX_GENERATED_BYTES, "load_avg": os.getloadavg()[0],
                     "statements": {}}
        for label, statement in _statements(MAX_GENERATED_BYTES).items():
            over, ends = [], set()
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                try:
                    ds.sql(statement, timeout=args.timeout)
                    ends.add("finished")
                except QueryError as e:
                    ends.add("timeout" if "timeout" in str(e) else "refused (cap)" if "cap of" in str(e) else str(e))
                over.append(max(0.0, time.perf_counter() - t0 - args.timeout))
            out["statements"][label] = {"over_s": [round(x, 3) for x in over], "median_over_s": round(median(over), 3),
                                        "max_over_s": round(max(over), 3), "ended": sorted(ends)}
        ds.close()
    out["max_over_s"] = max(s["max_over_s"] for s in out["statements"].values())
    return out


if __name__ == "__main__":
    import json

    p = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(p)
    print(json.dumps(run(p.parse_args()), indent=1))
