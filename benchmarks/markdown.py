"""Markdown helpers and the system labels shared by the report and the section views."""

from __future__ import annotations

import math
import re

__all__ = ["fmt", "si", "table", "ms_of", "ratio", "keep_hand_added", "GPERC", "PEER_LOADERS", "TRANSPORT",
           "OURS_LOADER"]

GPERC = "gperc 0.7"
PEER_LOADERS = ("HF datasets DataLoader", "Megatron GPTDataset DataLoader", "litdata StreamingDataLoader",
                "mosaic StreamingDataset DataLoader")
TRANSPORT = "torch DataLoader transport (memcpy dataset)"
OURS_LOADER = "consumer ds.dataloader"


def fmt(x, digits: int = 2) -> str:
    """A number with about 3 significant digits (— for none or nan)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def si(x) -> str:
    """A number with a k/M/G suffix (— for none or nan)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.1f}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def ms_of(w: dict, b: str, label: str):
    """Median ms per batch of system ``label`` at batch size ``b`` of workload ``w`` (None if not measured)."""
    row = w["batch"].get(b, {}).get("systems", {}).get(label)
    if not row or not row.get("per_rep"):
        return None
    return row["median_s"] * 1e3


def ratio(a, b):
    """a / b, None when either is missing or zero."""
    return a / b if a and b else None


_HAND_ADDED = re.compile(r"<!-- hand-added section.*?<!-- end of the hand-added section[^>]*-->\n*", re.S)


def keep_hand_added(old: str, new: str) -> str:
    """``new`` (a rendered report) with the hand-added sections of ``old`` (the report it replaces) kept: each block
    from ``<!-- hand-added section ... -->`` to ``<!-- end of the hand-added section ... -->`` goes back before the
    heading that followed it in ``old`` (at the end when ``new`` lacks that heading), unless ``new`` has it already."""
    out = new
    for block in _HAND_ADDED.finditer(old):
        text = block.group(0)
        if text.strip() in out:
            continue
        after = re.search(r"^#{1,6} .*$", old[block.end():], re.M)
        anchor = after.group(0) if after else None
        if anchor is not None and anchor + "\n" in out:
            i = out.index(anchor + "\n")
            out = out[:i] + text.rstrip("\n") + "\n\n" + out[i:]
        else:
            out = out.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    return out
