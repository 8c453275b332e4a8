"""What the commands print: plain-text tables, CSV/JSON cells, the one-line summary on stderr and the content
summary of ``consumer info``."""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict

import numpy as np

from ..dataset.display import human_bytes as _human

__all__ = ["content_summary"]

_MEMBERS = 6  # members of one duplicate group listed by content_summary; the rest are counted


def _unit(ds) -> str:
    """What one row of ``documents`` is called: ``"files"``, or ``"documents"`` inside container files."""
    return "documents" if ds.spec.records.records else "files"


def _summary(ds, seconds: float, extra_calls: int = 0) -> str:
    """One line: files (or documents and their containers), bytes, index cache hit or miss, libmagic calls, wall
    time."""
    info = ds.build_info
    what = f"{len(ds.files)} files"
    if ds.spec.records.records:
        containers = int(ds.sql("SELECT count(*) FROM files")[0][0])
        what = f"{len(ds.files)} documents in {containers} container{'s' * (containers != 1)}"
    return (f"{what}, {_human(float(ds.documents.doc_size.sum()))}, index cache {info['cache']}, "
            f"libmagic calls {info['libmagic_calls'] + extra_calls}, {seconds:.2f} s")


def _finish(ds, args: argparse.Namespace, t0: float, extra_calls: int = 0) -> None:
    """The summary line on stderr (not with ``--quiet``), after the command's output."""
    sys.stdout.flush()
    if not args.quiet:
        print(f"consumer: {_summary(ds, time.perf_counter() - t0, extra_calls)}", file=sys.stderr)


def _table(header: list[str], rows: list[tuple]) -> str:
    cells = [[str(c) for c in header]] + [["NULL" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value):
    """A value for CSV / JSON output: bytes (BLOBs) as hex, everything else as it is."""
    return value.hex() if isinstance(value, bytes) else value


def content_summary(rows, groups, *, top: int = 5, unit: str = "files") -> str:
    """The content part of ``consumer info``: per class the 10th, 50th and 90th percentiles of entropy
    (bits per byte) and of the printable fraction (as %), then the duplicate summary.

    ``rows``: ``(class, entropy, printable)`` per file (or document), e.g.
    ``ds.sql("SELECT class, entropy, printable FROM documents")`` (rows with NULLs are skipped);
    ``groups``: :class:`~consumer.catalog.duplicates.DuplicateGroup` list (``find_duplicates``); at most
    ``top`` cross-class groups are listed, each with at most six members; ``unit`` heads the count column.
    """
    per: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for cls, ent, prn in rows:
        if ent is not None and prn is not None:
            per[cls].append((ent, prn))
    q = [0.1, 0.5, 0.9]
    table = []
    for cls in sorted(per):
        vals = np.array(per[cls], dtype=np.float64)
        ent = np.quantile(vals[:, 0], q)
        prn = np.quantile(vals[:, 1], q) * 100
        table.append((cls, len(vals), *(f"{v:.2f}" for v in ent), *(f"{v:.1f}" for v in prn)))
    out = ["content (entropy in bits/byte, printable in %)",
           _table(["class", unit, "entropy p10", "p50", "p90", "printable p10", "p50", "p90"], table)]
    copies = sum(len(g.members) - 1 for g in groups)
    wasted = sum(g.size * (len(g.members) - 1) for g in groups)
    cross = [g for g in groups if g.cross_class]
    out.append(f"\nduplicates: {len(groups)} groups of equal content, {copies} redundant copies "
               f"({_human(wasted)}), {len(cross)} groups across classes")
    for g in cross[:top]:
        members = ", ".join(f"{m.path} [{m.cls}]" for m in g.members[:_MEMBERS])
        more = f", ... and {len(g.members) - _MEMBERS} more" if len(g.members) > _MEMBERS else ""
        out.append(f"  {g.sha256[:12]} {_human(g.size)}: {members}{more}")
    if len(cross) > top:
        out.append(f"  ... and {len(cross) - top} more cross-class groups")
    return "\n".join(out)

