"""The report's charts as inline SVG written by hand: horizontal bars and small histograms.

No plotting library: a chart is a few dozen ``<rect>`` and ``<text>`` elements whose geometry numpy computes, so a
page stays small and renders the same everywhere, without JavaScript (docs/report.md has the measurement that chose
this over matplotlib's SVG backend). Every bar carries a ``<title>`` with its exact value (a tooltip in a browser,
and what the report's tests read). Every label goes through :func:`consumer.report.page.text`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .page import text

__all__ = ["PALETTE", "hbars", "histogram"]

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")
_FONT = 'font-family="system-ui,sans-serif" font-size="11"'


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def hbars(title: str, labels: Sequence[str], values: Sequence[float], show: Callable[[float], str], *,
          color: str = PALETTE[0], width: int = 300, exact: Callable[[float], str] | None = None) -> str:
    """A horizontal bar chart: one bar per label, the value written at its end (``show``), the exact value
    (``exact``, default ``show``) in each bar's ``<title>``."""
    exact = exact or show
    bar_h, gap, label_w, value_w, top = 14, 4, 96, 64, 18
    n = len(labels)
    height = top + n * (bar_h + gap) + 4
    v = np.asarray(values, dtype=np.float64)
    peak = float(v.max()) if v.size and v.max() > 0 else 1.0
    lengths = np.maximum(v / peak * (width - label_w - value_w), 0.0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" {_FONT}>',
             f'<text x="0" y="12" font-weight="600">{text(title)}</text>']
    for i, (label, value, length) in enumerate(zip(labels, v.tolist(), lengths.tolist())):
        y = top + i * (bar_h + gap)
        short = label if len(label) <= 14 else label[:13] + "\u2026"
        parts.append(f'<text x="{label_w - 4}" y="{y + bar_h - 3}" text-anchor="end">{text(short)}</text>'
                     f'<rect x="{label_w}" y="{y}" width="{_num(length)}" height="{bar_h}" fill="{color}">'
                     f'<title>{text(label)}: {text(exact(value))}</title></rect>'
                     f'<text x="{_num(label_w + length + 3)}" y="{y + bar_h - 3}" fill="#333">'
                     f'{text(show(value))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(title: str, edges: Sequence[str], counts: Sequence[float] | np.ndarray, *, color: str = PALETTE[0],
              width: int = 260, height: int = 96, unit: str = "files", axis: tuple[str, str] | None = None) -> str:
    """A small histogram: one column per bin (``edges[i]`` names bin ``i``), each column's ``<title>`` holds its
    bin and count; ``axis`` the labels under both ends of the axis (default: the first and the last bin)."""
    c = np.asarray(counts, dtype=np.float64)
    n = max(len(c), 1)
    top, bottom = 16, 14
    plot_h = height - top - bottom
    peak = float(c.max()) if c.size and c.max() > 0 else 1.0
    col_w = width / n
    heights = c / peak * plot_h
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" {_FONT}>',
             f'<text x="0" y="11" font-weight="600">{text(title)}</text>',
             f'<line x1="0" y1="{top + plot_h}" x2="{width}" y2="{top + plot_h}" stroke="#999"/>']
    for i, (edge, count, h) in enumerate(zip(edges, c.tolist(), heights.tolist())):
        if count <= 0:
            continue
        x = i * col_w
        parts.append(f'<rect x="{_num(x + 0.5)}" y="{_num(top + plot_h - h)}" width="{_num(max(col_w - 1, 1))}" '
                     f'height="{_num(h)}" fill="{color}"><title>{text(edge)}: {int(count):,} {text(unit)}</title>'
                     f'</rect>')
    ends = axis if axis is not None else (edges[0], edges[-1]) if len(edges) else None
    if ends is not None:
        parts.append(f'<text x="0" y="{height - 2}" fill="#555">{text(ends[0])}</text>'
                     f'<text x="{width}" y="{height - 2}" text-anchor="end" fill="#555">{text(ends[1])}</text>')
    parts.append("</svg>")
    return "".join(parts)
