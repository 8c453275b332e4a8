"""Random fetch, cold then warm, against Lance's ``take`` on the same rows (and the ``os.pread`` floor).

The store of the cold_store probe (int32 tokens, ``concat`` rows of ``--seqlen``; ``--store-mib`` MiB, generated
once under ``--data``), and the same rows written once with ``lance.write_dataset`` as ``fixed_size_list<int32>``.
Per batch size of ``--batch-sizes`` and repetition, each reader runs in a **fresh process** after the store's
pages were evicted (``posix_fadvise`` on the benchmark's own files only), fetching ``--batches`` batches of random
rows twice: the first pass is the cold fetch, the second (the same rows, now in the page cache) the warm one.
Rows come out as int64: ``Consumer.from_packed`` + ``fetch``; Lance ``take`` converted to an int64 torch tensor
(the conversion timed); ``pread`` of exactly the rows' byte ranges.

    python -m benchmarks probe lance_fetch --batch-sizes 20,1
"""

from __future__ import annotations

import argparse

from ..measure import median
from .cold_store import add_arguments as _store_arguments
from .cold_store import measure_readers, prepared

NAME = "lance_fetch"
DESCRIPTION = "random fetch cold and warm: consumer from_packed + fetch against Lance take (int64 out) and pread"
READERS = ("consumer", "lance", "pread")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options (the store's options are the cold_store probe's)."""
    _store_arguments(parser)
    parser.set_defaults(store_mib=256, batches=20, readers=",".join(READERS))
    parser.add_argument("--batch-sizes", default="20,1", help="comma list of rows per batch")


def _summary(runs: dict[str, list[dict]]) -> dict:
    out: dict[str, dict] = {}
    for reader, rs in runs.items():
        out[reader] = {"cold_ms": 1e3 * median(median(r["seconds"]) for r in rs),
                       "warm_ms": 1e3 * median(median(r["warm_seconds"]) for r in rs), "processes": len(rs)}
    ours = out.get("consumer")
    for row in out.values():
        row["cold_x_consumer"] = row["cold_ms"] / ours["cold_ms"] if ours else None
        row["warm_x_consumer"] = row["warm_ms"] / ours["warm_ms"] if ours else None
    return out


def run(args: argparse.Namespace) -> dict:
    """Every batch size, every reader, ``--reps`` fresh processes each (interleaved), two passes each."""
    readers, paths, pythons, absent, work = prepared(args, READERS)
    by_batch = {}
    for b in (int(x) for x in args.batch_sizes.split(",") if x):
        m = measure_readers(paths, readers, pythons, b, args.batches, args.reps, work, passes=2)
        by_batch[str(b)] = {"readers": _summary(m["runs"]), "absent": {**m["absent"], **absent}}
    return {"seqlen": args.seqlen, "batches": args.batches, "reps": args.reps, "batch": by_batch}


def render_section(res: dict | None) -> list[str]:
    """The report's markdown lines for these results (none when the section did not run)."""
    if not res:
        return []
    out = ["## Random fetch against Lance, cold and warm", "",
           f"The cold-store section's rows, also written with `lance.write_dataset` as `fixed_size_list<int32>`; "
           f"per batch size, each reader in a fresh process after eviction fetches {res['batches']} batches of "
           "random rows twice (first pass cold, second warm), int64 out (Lance: `take` converted to an int64 torch "
           f"tensor, conversion timed). Median of {res['reps']} processes per reader, interleaved; × consumer > 1: "
           "consumer is faster.", "",
           "| rows × 8192 | reader | cold ms / batch | × consumer | warm ms / batch | × consumer |",
           "|---|---|---|---|---|---|"]
    for b, entry in res["batch"].items():
        for reader, r in entry["readers"].items():
            out.append(f"| {b} | {reader} | {r['cold_ms']:.3f} | {r['cold_x_consumer']:.2f} | {r['warm_ms']:.3f} | "
                       f"{r['warm_x_consumer']:.2f} |")
        out += [f"| {b} | {reader} | not measured: {why[:100]} | | | |" for reader, why in entry["absent"].items()]
    return out + [""]


def verdicts(res: dict | None) -> list[dict]:
    """The target of this section: the warm fetch ahead of Lance's ``take`` at every batch size."""
    if not res:
        return []
    ratios = {b: e["readers"]["lance"]["warm_x_consumer"] for b, e in res["batch"].items()
              if "lance" in e["readers"] and "consumer" in e["readers"]}
    if not ratios:
        return [{"target": "warm random fetch ahead of Lance's take", "figure": "—", "met": None,
                 "why": "Lance not measured"}]
    return [{"target": "warm random fetch ahead of Lance's take (int64 out)",
             "figure": ", ".join(f"{b} rows: Lance {r:.1f}× our time" for b, r in ratios.items()),
             "met": min(ratios.values()) > 1.0, "why": ""}]
