"""The report's HTML: escaping, tables, panels and the page around them.

Everything that comes from a dataset (class names, paths, libmagic's descriptions, a file's bytes) reaches the page
through :func:`text`: control characters, lone surrogates (names that are not UTF-8) and the other code points a page
must not hold become visible ``\\xNN`` / ``\\uNNNN`` escapes, then ``<``, ``>``, ``&`` and quotes become entities.
So no name or content can open a tag, close the ``<pre>`` it sits in, or end a comment. The page's
Content-Security-Policy forbids every script and every request (only inline styles and ``data:`` images), so even a
mistake here could neither run code nor reach the network.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CSP", "Panel", "cell", "page", "table", "text"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
"""The page's Content-Security-Policy: no script, no font, no frame, no request of any kind."""

_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]")


def _escape_char(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def text(value: Any) -> str:
    """``value`` as HTML text that is safe anywhere in the page (element content or a quoted attribute)."""
    return html.escape(_UNSAFE.sub(_escape_char, str(value)), quote=True)


def cell(value: Any) -> str:
    """How a value of an SQL answer is written on the page: ints with thousands separators, floats with two
    decimals, NULL as ``NULL``, bytes as hex, text escaped."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return text(value)


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], query: str | None = None, *,
          limit_note: str = "", source: str | None = None) -> str:
    """An HTML table of an SQL answer (``query``: the id of the statement it answers, ``data-query`` on the
    table, so a reader, or a test, can find the statement ``sql-<id>``), or of numbers that come from elsewhere
    (``source``: their id, ``data-source`` on the table; the page says where they come from)."""
    attr = f' data-query="{text(query)}"' if query else ""
    attr += f' data-source="{text(source)}"' if source else ""
    head = "".join(f"<th>{text(c)}</th>" for c in columns)
    body = []
    for r in rows:
        body.append("<tr>" + "".join(
            f'<td class="n">{cell(v)}</td>' if isinstance(v, (int, float)) and not isinstance(v, bool)
            else f"<td>{cell(v)}</td>" for v in r) + "</tr>")
    note = f'<p class="note">{text(limit_note)}</p>' if limit_note else ""
    return f'<table{attr}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{note}'


@dataclass
class Panel:
    """One section of the page: a title, HTML parts (already escaped), notes (plain text) and the statements
    (``{id: sql}``) that produced its numbers."""

    key: str
    title: str
    parts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    statements: dict[str, str] = field(default_factory=dict)

    def html(self) -> str:
        """The section's HTML."""
        notes = "".join(f'<p class="note">{text(n)}</p>' for n in self.notes)
        sql = "".join(f'<details class="sql"><summary>SQL <code>{text(k)}</code> (copy into ds.sql)</summary>'
                      f'<pre id="sql-{text(k)}">{text(s)}</pre></details>' for k, s in self.statements.items())
        return (f'<section id="{text(self.key)}"><h2>{text(self.title)}</h2>{notes}{"".join(self.parts)}{sql}'
                "</section>")


_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#222;background:#f6f7f9}
header{background:#1f3a5f;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;opacity:.85}nav{padding:8px 28px;background:#e8ecf2;font-size:13px}
nav a{margin-right:14px;color:#1f3a5f;text-decoration:none}main{padding:8px 28px 40px;max-width:1200px}
section{background:#fff;border:1px solid #dde2ea;border-radius:6px;padding:12px 18px;margin:14px 0}
h2{font-size:17px;margin:2px 0 8px;color:#1f3a5f}h3{font-size:14px;margin:10px 0 4px}
table{border-collapse:collapse;margin:6px 0;font-size:12.5px}th,td{padding:2px 10px;border-bottom:1px solid #eee;
text-align:left;vertical-align:top}th{background:#f0f3f7;font-weight:600}td.n{text-align:right;
font-variant-numeric:tabular-nums}td{max-width:520px;overflow-wrap:anywhere}
.charts{display:flex;flex-wrap:wrap;gap:14px 26px;margin:6px 0}.note{color:#555;font-size:12.5px;margin:4px 0}
details.sql{margin:6px 0}details.sql summary{cursor:pointer;color:#1f3a5f;font-size:12.5px}
pre{background:#f4f6f9;padding:8px;border-radius:4px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px;
margin:4px 0}pre.sample{background:#fbfbf8;border:1px solid #e6e4da;line-height:1.5}
.tok{border-radius:3px;padding:0 3px;font-size:10.5px;font-weight:600;color:#fff}.EOF{background:#c0392b}
.PAD{background:#95a5a6}.SEP{background:#8e44ad}.TAIL{background:#d35400}.CLS,.MASK{background:#2c3e50}
.hdr{background:#e3edf9;color:#1f3a5f}.esc{color:#b35c00}.kv td:first-child{color:#555}
"""


def page(title: str, subtitle: str, panels: Sequence[Panel]) -> str:
    """The whole HTML document: head (charset, CSP, inline style), a header, a table of contents, the panels."""
    nav = "".join(f'<a href="#{text(p.key)}">{text(p.title)}</a>' for p in panels)
    body = "".join(p.html() for p in panels)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{text(title)}</title><style>{_STYLE}</style></head><body>"
            f"<header><h1>{text(title)}</h1><p>{text(subtitle)}</p></header><nav>{nav}</nav>"
            f"<main>{body}</main></body></html>\n")
