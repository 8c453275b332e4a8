"""Reading a report page the way a person sees it: ``html.parser`` collects its tables, the SQL statement of each,
its settings, the ``<title>`` of every chart mark and every element and attribute, so the tests can check each
number against ``ds.sql`` and that no name or content became markup."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import unescape
from html.parser import HTMLParser

import numpy as np


@dataclass
class Table:
    """One ``<table>`` of the page: its ``data-query`` id (or None), header cells and body rows (text), and the
    ``data-source`` id of a table whose numbers are not SQL (or None)."""

    query: str | None
    source: str | None = None
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


class PageReader(HTMLParser):
    """Collects tables, ``<pre id="sql-...">`` statements, ``data-setting`` cells, SVG ``<title>`` texts per
    section, every start tag with its attributes, and the text of each section."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self.statements: dict[str, str] = {}
        self.settings: dict[str, str] = {}
        self.titles: dict[str, list[str]] = {}
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.section_text: dict[str, str] = {}
        self._table: Table | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._head = False
        self._pre: str | None = None
        self._setting: str | None = None
        self._title: list[str] | None = None
        self._section = ""
        self._in_svg = 0
        self._buf: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        a = dict(attrs)
        if tag == "section":
            self._section = a.get("id") or ""
        elif tag == "table":
            self._table = Table(a.get("data-query"), a.get("data-source"))
        elif tag == "thead":
            self._head = True
        elif tag == "tbody":
            self._head = False
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
            self._setting = a.get("data-setting")
        elif tag == "pre" and (a.get("id") or "").startswith("sql-"):
            self._pre = a["id"][4:]
            self._buf = []
        elif tag == "svg":
            self._in_svg += 1
        elif tag == "title" and self._in_svg:
            self._title = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            value = "".join(self._cell)
            self._row.append(value)
            if self._setting is not None:
                self.settings[self._setting] = value
            self._cell, self._setting = None, None
        elif tag == "tr" and self._row is not None and self._table is not None:
            if self._head:
                self._table.header.extend(self._row)
            else:
                self._table.rows.append(self._row)
            self._row = None
        elif tag == "table" and self._table is not None:
            self.tables.append(self._table)
            self._table = None
        elif tag == "pre" and self._pre is not None:
            self.statements[self._pre] = "".join(self._buf)
            self._pre = None
        elif tag == "title" and self._title is not None:
            self.titles.setdefault(self._section, []).append("".join(self._title))
            self._title = None
        elif tag == "svg":
            self._in_svg -= 1

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._pre is not None:
            self._buf.append(data)
        if self._title is not None:
            self._title.append(data)
        self.section_text[self._section] = self.section_text.get(self._section, "") + data


def read_page(html: str) -> PageReader:
    """The parsed page."""
    reader = PageReader()
    reader.feed(html)
    reader.close()
    return reader


def shown(value) -> object:
    """What a cell showing ``value`` must read as (numbers parsed back for comparison)."""
    from consumer.report.page import text  # noqa: PLC0415

    if value is None:
        return "NULL"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return unescape(text(value))


def same(cell: str, value) -> bool:
    """Whether the cell text ``cell`` shows ``value`` (ints exactly, floats to the two decimals shown)."""
    want = shown(value)
    if isinstance(want, bool) or not isinstance(want, (int, float)):
        return cell == want
    try:
        got = float(cell.replace(",", ""))
    except ValueError:
        return False
    return got == want if isinstance(want, int) else abs(got - want) <= 0.005 + 1e-9


def check_numbers(ds, page: PageReader) -> int:
    """Run every table's statement through ``ds.sql`` and compare each cell; returns the cells compared.
    Raises AssertionError naming the first difference."""
    compared = 0
    for t in page.tables:
        if t.query is None:
            continue
        statement = page.statements[t.query]
        rows = ds.sql(statement, timeout=None)
        assert t.header == list(rows.columns), (t.query, t.header, rows.columns)
        assert len(t.rows) == min(len(rows), 500), (t.query, len(t.rows), len(rows))
        for r, (got, want) in enumerate(zip(t.rows, rows)):
            assert len(got) == len(want), (t.query, r)
            for c, (g, w) in enumerate(zip(got, want)):
                assert same(g, w), f"{t.query} row {r} column {rows.columns[c]}: page {g!r}, ds.sql {w!r}"
                compared += 1
    return compared


def number(cell: str) -> float:
    """A number cell's value (thousands separators dropped)."""
    return float(cell.replace(",", ""))


def styles_tables(page: PageReader) -> tuple[Table, Table]:
    """The padding panel's side-by-side tables: ``style_choices`` (diff and concat, SQL) and ``packed_choices``
    (packed, not SQL), their headers and choices checked (the same as ``seqlen_choices``)."""
    sql = next(t for t in page.tables if t.query == "style_choices")
    plan = next(t for t in page.tables if t.source == "packed_choices")
    assert sql.header == ["choice", "seqlen", "diff_rows", "diff_pad_pct", "diff_cut_pct", "concat_rows",
                          "concat_pad_pct", "concat_cut_pct"]
    assert plan.header == ["choice", "seqlen", "packed_rows", "packed_pad_pct", "packed_cut_pct", "from"]
    assert [r[:2] for r in sql.rows] == [r[:2] for r in plan.rows] == \
        [r[:2] for r in next(t for t in page.tables if t.query == "seqlen_choices").rows]
    return sql, plan


def built_figures(fps, style: str, long_files: str, seqlen: int, **options) -> tuple[int, float, float]:
    """Rows, PAD share (%) and documents cut (%) of the dataset built with ``style`` at ``seqlen``: what the padding
    panel must show. A document is cut when it is not whole in one row: not exactly one segment holding all of it."""
    from consumer import Consumer  # noqa: PLC0415

    ds = Consumer(fps, style=style, long_files=long_files, seqlen=seqlen, cache_dir=False, **options)
    index, doc_len = ds.index, np.asarray(ds.documents.doc_len, dtype=np.int64)
    rows = len(ds)
    pad = 100 * (1 - int(index.sample_tokens().sum(dtype=np.int64)) / (rows * seqlen))
    segments = np.bincount(index.seg_doc, minlength=doc_len.size)
    held = np.bincount(index.seg_doc, weights=index.seg_len, minlength=doc_len.size)
    cut = 100 * np.count_nonzero((segments != 1) | (held != doc_len)) / doc_len.size
    return rows, pad, cut
