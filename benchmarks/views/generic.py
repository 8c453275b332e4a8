"""A probe section without a view of its own (``recinterop``): its results' figures as one flat table."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import head, results

__all__ = ["section", "flat"]


def flat(d: dict, prefix: str = "") -> list[tuple[str, object]]:
    """``(dotted.key, value)`` for every number, string or bool of nested dicts (lists of numbers joined)."""
    out: list[tuple[str, object]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out += flat(v, key + ".")
        elif isinstance(v, list) and all(isinstance(x, (int, float)) for x in v):
            out.append((key, ", ".join(fmt(x) for x in v)))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out.append((key, v))
    return out


def section(title: str, name: str, intro: str):
    """``(render_section, verdicts)`` of suite section ``name``: every figure of its results, no targets."""
    def render_section(res: dict) -> list[str]:
        r = results(res, name)
        if r is None:  # a probe another change may add: nothing to say until it ran
            return []
        out = head(title, res, name, intro)
        rows = [[f"`{k}`", fmt(v) if isinstance(v, float) else str(v)] for k, v in flat(r)]
        return out + table(["figure", "value"], rows) + [""]

    return render_section, lambda res: []
