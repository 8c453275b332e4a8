"""Planning the ``packed`` style (best-fit decreasing, consumer/tokens/packing.py) against ``concat``, same lengths.

``--docs`` document lengths are drawn once per run (seeded): lognormal (``--median`` tokens, ``--sigma``), rounded
and clipped to ``[1, 4 * seqlen]``, a long tail of documents longer than a row; classes are ``--classes`` equal
shares (documents grouped by class, as a corpus orders them). For each class count and style,
``build_index(style, ...)`` runs in a fresh child process (``packed`` with its default ``long_files="windows"``: no
token lost, as concat), which reports the wall time of the build (the lengths drawn before the clock starts), the
rows, the PAD share of all rows, the share of documents cut (held by more than one row), and its peak RSS (VmHWM).
No file is read: this is the plan alone, the cost ``Consumer(..., style="packed")`` adds over concat.

    python -m benchmarks probe packed_plan --docs 10000000 --seqlen 2048 --classes 1,8
"""

from __future__ import annotations

import argparse
import sys

from ..children import STATUS, child_json

NAME = "packed_plan"
DESCRIPTION = "plan the packed style (best-fit decreasing) of 10^7 document lengths against concat: time, PAD, cuts"

CHILD = STATUS + """
import json, sys, time
import numpy as np
from consumer.tokens.index import build_index, padding_share
style, n, seqlen, classes, median, sigma, seed = sys.argv[1], *map(int, sys.argv[2:5]), *map(float, sys.argv[5:7]), \
    int(sys.argv[7])
rng = np.random.default_rng(seed)
doc_len = np.clip(np.rint(rng.lognormal(np.log(median), sigma, n)), 1, 4 * seqlen).astype(np.int64)
doc_class = (np.arange(n, dtype=np.int64) * classes) // n
t0 = time.perf_counter()
index = build_index(style, doc_len, doc_class, classes, seqlen, long_files=None)
seconds = time.perf_counter() - t0
cut = int((np.bincount(index.seg_doc, minlength=n) > 1).sum())
peak = status("VmHWM")
print(json.dumps({"seconds": seconds, "rows": len(index), "pad_pct": 100 * padding_share(index),
                  "cut_pct": 100 * cut / n, "longer_than_seqlen_pct": 100 * float((doc_len > seqlen).mean()),
                  "tokens": int(doc_len.sum()), "peak_rss": peak}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--docs", type=int, default=10_000_000, help="documents planned")
    parser.add_argument("--seqlen", type=int, default=2048, help="tokens per row")
    parser.add_argument("--classes", default="1,8", help="comma-separated class counts, one plan each")
    parser.add_argument("--median", type=float, default=600.0, help="median document length in tokens")
    parser.add_argument("--sigma", type=float, default=1.5, help="sigma of the lognormal lengths")
    parser.add_argument("--seed", type=int, default=0, help="seed of the lengths")


def _child(*args: str) -> dict:
    return child_json(["-c", CHILD, *args], check=True)


def run(args: argparse.Namespace) -> dict:
    """Each (classes, style) plan in a fresh child on the same seeded lengths; packed ÷ concat time per class count."""
    out: dict = {"docs": args.docs, "seqlen": args.seqlen, "median": args.median, "sigma": args.sigma, "plans": []}
    for classes in (int(c) for c in str(args.classes).split(",")):
        row: dict = {"classes": classes}
        for style in ("packed", "concat"):
            row[style] = _child(style, str(args.docs), str(args.seqlen), str(classes), str(args.median),
                                str(args.sigma), str(args.seed))
            r = row[style]
            print(f"{classes} class(es), {style}: {r['seconds']:.2f} s, {r['rows']:,} rows, PAD {r['pad_pct']:.4f} %, "
                  f"documents cut {r['cut_pct']:.2f} %, peak RSS {r['peak_rss'] / 2**20:.0f} MiB", file=sys.stderr)
        row["time_ratio"] = row["packed"]["seconds"] / row["concat"]["seconds"]
        out["plans"].append(row)
    return out
