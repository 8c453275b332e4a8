"""The *Fetch against file size* section (suite section ``filesize``)."""

from __future__ import annotations

from ..markdown import fmt, si, table

__all__ = ["render_section", "verdicts"]


def render_section(res: dict) -> list[str]:
    """The report's markdown lines of this section (none when it did not run)."""
    fs = res.get("filesize")
    if not fs:
        return []
    out = ["## Fetch against file size", "",
           "Corpora whose files are uniform in one size band; 20 × 8192 at `n_bytes=2`, no header.", ""]
    rows = [[f"{r['band'][0]:,}–{r['band'][1]:,}", r["style"], r["system"], fmt(r["ms"], 3), si(r["tokens_per_s"]),
             "yes" if r["equal_rows"] else "**no**"] for r in fs]
    out += table(["file bytes", "style", "system", "ms / batch", "tokens/s", "rows = ours"], rows) + [""]
    return out


def verdicts(res: dict) -> list[dict]:
    """This section has no target of its own."""
    return []
