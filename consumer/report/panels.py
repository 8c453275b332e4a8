"""The report's panels: each runs its statements (:mod:`consumer.report.queries`) through ``ds.sql`` and turns the
answers into tables and charts. A table shows an answer exactly as ``ds.sql`` gave it (the statement is beside it);
a chart draws the same numbers. Nothing here lists files one by one beyond a handful of extremes: every panel is an
aggregate, so the page stays small at millions of files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..catalog.rows import display_path
from ..dataset.display import human_bytes
from ..query.rows import Rows
from ..spec import metadata_name
from . import plans
from .page import Panel, table, text
from .queries import Queries
from .samples import sample_html
from .svg import PALETTE, hbars, histogram

__all__ = ["Context", "PANELS"]

_CHART_CLASSES = 24  # classes drawn in a bar chart (the most files first); tables hold them all
_HIST_CLASSES = 12  # classes (or types) drawn as small histograms
_TABLE_ROWS = 500  # rows of an answer written into a table at most
_SAMPLE_CLASSES = 4  # classes whose first sample is shown
_SAMPLE_TOKENS = 384  # tokens of a sample decoded


@dataclass
class Context:
    """What every panel reads: the dataset, its statements, the options, and the per-class answer (the overview,
    balance and padding panels share it)."""

    ds: Any
    queries: Queries
    content: bool
    types: bool
    kind: str
    _per_class: Rows | None = None
    _index_per_class: list[tuple[str, int, float | None]] | None = None

    def run(self, panel: Panel, key: str, statement: str) -> Rows:
        """Run ``statement`` through ``ds.sql`` and record it on ``panel`` under ``key``."""
        panel.statements[key] = statement
        return self.ds.sql(statement, timeout=None)

    def per_class(self, panel: Panel) -> Rows:
        """The per-class answer (run once, shown by every panel that uses it)."""
        statement = self.queries.per_class()
        panel.statements["per_class"] = statement
        if self._per_class is None:
            self._per_class = self.ds.sql(statement, timeout=None)
        return self._per_class

    def index_per_class(self) -> list[tuple[str, int, float | None]]:
        """``(class, samples, pad_pct)`` of every class from the sample index itself: rows from ``class_ptr``, real
        tokens from ``sample_tokens()`` (what a ``packed`` dataset shows where SQL has no formula)."""
        if self._index_per_class is None:
            index = self.ds.index
            ptr = np.asarray(index.class_ptr, dtype=np.int64)
            csum = np.concatenate(([0], np.cumsum(index.sample_tokens(), dtype=np.int64)))
            real, rows, width = csum[ptr[1:]] - csum[ptr[:-1]], np.diff(ptr), int(index.seqlen)
            self._index_per_class = [
                (str(name), int(n), round(100.0 * (1.0 - int(r) / (int(n) * width)), 2) if n else None)
                for name, n, r in zip(self.ds.classes, rows.tolist(), real.tolist())]
        return self._index_per_class

    def samples_pad(self, panel: Panel) -> dict[str, tuple[int, float | None]]:
        """``{class: (samples, pad_pct)}`` at the dataset's ``seqlen``: the per-class answer's columns, or for a
        ``packed`` dataset the sample index's (:meth:`index_per_class`)."""
        if self.queries.style == "packed":
            return {name: (n, pad) for name, n, pad in self.index_per_class()}
        return {str(r[0]): (r[4], r[5]) for r in self.per_class(panel)}


_INDEX_NOTE = ("samples and pad_pct of a packed dataset come from its sample index (rows per class from "
               "ds.index.class_ptr, real tokens from ds.index.sample_tokens()), not from SQL: best-fit packing has no "
               "SQL formula.")


def _index_table(ctx: Context) -> str:
    """The per-class samples and PAD share of the sample index (a ``packed`` dataset), marked as not SQL."""
    return ("<h3>samples and pad_pct per class: from the sample index</h3>"
            + table(("class", "samples", "pad_pct"), ctx.index_per_class(), source="per_class_index"))


def _table(rows: Rows, key: str) -> str:
    note = f"the first {_TABLE_ROWS:,} of {len(rows):,} rows" if len(rows) > _TABLE_ROWS else ""
    return table(rows.columns, rows[:_TABLE_ROWS], key, limit_note=note)


def _charts(*svgs: str) -> str:
    return f'<div class="charts">{"".join(svgs)}</div>'


def _top(rows: Rows, column: int, n: int) -> list[tuple]:
    """The ``n`` rows with the largest value in ``column``, in their original order."""
    order = sorted(range(len(rows)), key=lambda i: -(rows[i][column] or 0))[:n]
    return [rows[i] for i in sorted(order)]


def overview(ctx: Context, settings: dict) -> Panel:
    """Counts of the whole dataset, its settings and its fingerprint."""
    p = Panel("overview", "Overview")
    rows = ctx.run(p, "overview", ctx.queries.overview())
    kv = "".join(f"<tr><td>{text(k)}</td><td data-setting=\"{text(k)}\">{text(v)}</td></tr>"
                 for k, v in settings.items())
    p.parts.append(f'<div class="charts"><div><h3>Counts</h3>{_table(rows, "overview")}</div>'
                   f'<div><h3>Settings (ds.spec.to_dict())</h3><table class="kv">{kv}</table></div></div>')
    p.notes.append("samples: rows the model sees at this seqlen; fingerprint: sha256 of the canonical JSON of the "
                   "settings, the class names and the file table's sha256 (paths, classes, sizes, mtimes): equal "
                   "fingerprints, equal datasets.")
    return p


def balance(ctx: Context) -> Panel:
    """Files, bytes and samples per class, as bars and as a table."""
    p = Panel("balance", "Class balance")
    rows = ctx.per_class(p)
    per = ctx.samples_pad(p)
    cols = rows.columns
    shown = _top(rows, 1, _CHART_CLASSES)
    labels = [str(r[0]) for r in shown]
    p.parts.append(_charts(
        hbars(cols[1], labels, [r[1] for r in shown], lambda v: f"{int(v):,}", color=PALETTE[0]),
        hbars("bytes", labels, [r[2] for r in shown], human_bytes, color=PALETTE[1], exact=lambda v: f"{int(v):,}"),
        hbars("samples", labels, [per[label][0] for label in labels], lambda v: f"{int(v):,}", color=PALETTE[2])))
    if len(rows) > _CHART_CLASSES:
        p.notes.append(f"The charts show the {_CHART_CLASSES} classes with the most {cols[1]} of {len(rows):,}.")
    p.parts.append(_table(rows, "per_class"))
    if ctx.queries.style == "packed":
        p.parts.append(_index_table(ctx))
        p.notes.append(_INDEX_NOTE)
    return p


def file_types(ctx: Context) -> Panel:
    """The most frequent MIME types and descriptions per class (or the headers, without a libmagic pass)."""
    p = Panel("types", "File types")
    metadata = metadata_name(ctx.ds.spec.metadata)
    if ctx.types or ctx.content:
        for column in ("mime", "description"):
            rows = ctx.run(p, f"types_{column}", ctx.queries.types(column))
            p.parts.append(f"<h3>{text(column)}</h3>" + _table(rows, f"types_{column}"))
            if rows and all(r[1] is None for r in rows):
                p.notes.append(f"No {column} is known for these files ({ctx.kind}).")
    elif metadata is None:
        p.notes.append("This dataset was built with metadata=None: no file type was computed. Pass types=True "
                       "(consumer report --types) or content=True to compute them (one libmagic call per file, "
                       "kept in the catalog).")
    else:
        rows = ctx.run(p, "types_header", ctx.queries.types("header"))
        p.notes.append(f"The header each file carries (metadata={metadata!r}), the type the model is told; "
                       "types=True adds libmagic's MIME type and full description.")
        p.parts.append(_table(rows, "types_header"))
    return p


def sizes(ctx: Context) -> Panel:
    """A log-scale size histogram per class and the size quantiles."""
    p = Panel("sizes", "Sizes")
    rows = ctx.run(p, "sizes", ctx.queries.sizes())
    q = ctx.run(p, "size_quantiles", ctx.queries.size_quantiles())
    if rows:
        bins = np.array([r[1] for r in rows], dtype=np.int64)
        lo, hi = int(bins.min()), int(bins.max())
        edges = ["0 B" if b < 0 else human_bytes(2.0 ** b) for b in range(lo, hi + 1)]
        per: dict[str, np.ndarray] = {}
        for cls, b, n in rows:
            per.setdefault(str(cls), np.zeros(hi - lo + 1, dtype=np.int64))[b - lo] += n
        top = sorted(per, key=lambda c: -int(per[c].sum()))[:_HIST_CLASSES]
        axis = (edges[0], human_bytes(2.0 ** (hi + 1)))
        p.parts.append(_charts(*(histogram(c, edges, per[c], color=PALETTE[i % len(PALETTE)], unit=ctx.queries.unit,
                                           axis=axis) for i, c in enumerate(sorted(top)))))
        p.notes.append(f"Columns are powers of two (log scale): a column holds the {ctx.queries.unit} of 2^b to "
                       "2^(b+1) bytes; "
                       "hover a column for its count." + (f" Drawn: the {_HIST_CLASSES} largest classes."
                                                         if len(per) > _HIST_CLASSES else ""))
    p.parts.append(_table(q, "size_quantiles"))
    p.parts.append("<details><summary>histogram numbers</summary>" + _table(rows, "sizes") + "</details>")
    return p


def padding(ctx: Context) -> Panel:
    """The PAD share per class at the dataset's seqlen, what each percentile choice would waste and cut in the
    dataset's style, and diff, concat and packed side by side at every choice."""
    p = Panel("padding", "Padding and seqlen")
    q = ctx.queries
    rows = ctx.per_class(p)
    per = ctx.samples_pad(p)
    shown = [str(r[0]) for r in _top(rows, 1, _CHART_CLASSES)]
    p.parts.append(_charts(hbars(f"PAD % of rows at seqlen {q.seqlen:,}", shown, [per[c][1] or 0.0 for c in shown],
                                 lambda v: f"{v:.2f}%", color=PALETTE[3], width=420)))
    style = q.style + ("" if q.style == "concat" else f", long_files={q.long_files!r}")
    choices = ctx.run(p, "seqlen_choices", q.seqlen_choices())
    p.parts.append(f"<h3>This dataset's style ({text(style)})</h3>" + _table(choices, "seqlen_choices"))
    if q.style == "packed":
        p.notes.append(f"For this dataset's style ({style}): truncated_pct is the share of tokens no row holds "
                       "(cut off); its rows and PAD at each seqlen are packed's columns below. " + _INDEX_NOTE)
    else:
        p.notes.append(f"For this dataset's style ({style}): samples is the number of rows, pad_pct the share of "
                       "their tokens that are PAD (compute spent on nothing), truncated_pct the share of tokens no "
                       "row holds (cut off).")
    p.notes.append("pNN is the length NN % of documents fit in (seqlen='auto:pNN'); max is seqlen='auto'.")
    _styles_side_by_side(ctx, p)
    return p


def _styles_side_by_side(ctx: Context, p: Panel) -> None:
    """diff and concat at every seqlen choice (SQL) beside packed (the sample index or the packing plan)."""
    q = ctx.queries
    styles = ctx.run(p, "style_choices", q.style_choices())
    seqlens = [r[1] for r in styles]
    known = [int(s) for s in seqlens if s is not None]
    figures = dict(zip(known, plans.packed_figures(ctx.ds, known, q.packed_long_files)))
    packed = []
    for choice, seqlen in zip((r[0] for r in styles), seqlens):
        f = figures[int(seqlen)] if seqlen is not None else None
        packed.append((choice, seqlen, f.rows if f else None, f.pad_pct if f else None, f.cut_pct if f else None,
                       f.source if f else None))
    recipe = text(plans.plan_recipe(q.packed_long_files))
    p.parts.append(
        f"<h3>diff (long_files={text(repr(q.diff_long_files))}), concat and packed "
        f"(long_files={text(repr(q.packed_long_files))}) side by side</h3>" + _charts(
            "<div>" + _table(styles, "style_choices") + "</div>",
            "<div>" + table(("choice", "seqlen", "packed_rows", "packed_pad_pct", "packed_cut_pct", "from"), packed,
                            source="packed_choices") + "</div>")
        + '<details class="sql"><summary>packed: <code>packed_choices</code> from the packing plan, not SQL '
          f'(Python)</summary><pre id="plan-packed_choices">{recipe}</pre></details>')
    p.notes.append("Side by side, for every seqlen choice: rows (per epoch), pad_pct (the share of their tokens that "
                   "are PAD) and cut_pct, the share of documents that are not whole in one row. diff cuts the "
                   "documents longer than seqlen (truncated, or split into windows); concat cuts every document "
                   "that crosses a window edge of its class's stream (each class's stream starts on a window "
                   "boundary); packed places whole documents into rows by best-fit decreasing and cuts only those "
                   "longer than seqlen (into seqlen pieces with long_files='windows', only the last piece packed with "
                   "others; or truncated with 'truncate'). diff and concat come from the SQL statement "
                   "style_choices.")
    sources = {f[5] for f in packed if f[5]}
    told = []
    if "index" in sources:
        told.append("at this dataset's own seqlen from its sample index (ds.index: rows from class_ptr, real tokens "
                    "from sample_tokens())")
    if "packing plan" in sources:
        told.append("from the packing plan (consumer.tokens.index.build_index('packed', ...) over the documents' "
                    "lengths: what building the dataset with that seqlen gives)")
    if "lower bound" in sources:
        told.append(f"as a lower bound: this corpus has more than {plans.PLAN_DOCS:,} documents, too many to plan "
                    "every choice, so packed_rows is ceil(sum(tokens) / seqlen) per class over the tokens packed "
                    "keeps (concat's rows: no packing needs fewer) and packed_pad_pct is a lower bound too; "
                    "packed_cut_pct is exact")
    if told:
        p.notes.append("packed's numbers are not SQL: " + "; ".join(told) + ".")


def content(ctx: Context) -> Panel:
    """Entropy and printable distributions per type; duplicate groups and the bytes they waste."""
    p = Panel("content", "Content")
    if not ctx.content:
        p.notes.append("Not computed: pass content=True (consumer report --content) to read every file once "
                       "(sha256, entropy, printable; kept in the catalog) for entropy, printable share and "
                       "duplicates.")
        return p
    known = ctx.run(p, "content_known", ctx.queries.content_known())
    p.parts.append(_table(known, "content_known"))
    if not known or not known[0][0]:
        p.notes.append(f"The content columns need the files' bytes; this dataset's files are {ctx.kind}, so "
                       "entropy, printable share and duplicates can't be shown.")
        return p
    for column, step, top, unit in (("entropy", 0.5, 8.0, "bits/byte"), ("printable", 0.1, 1.0, "share")):
        rows = ctx.run(p, f"content_{column}", ctx.queries.content_histogram(column, step, top))
        per: dict[str, np.ndarray] = {}
        for kind, b, n in rows:
            per.setdefault(str(kind), np.zeros(int(round(top / step)), dtype=np.int64))[int(round(b / step))] += n
        types = sorted(per, key=lambda t: -int(per[t].sum()))[:_HIST_CLASSES]
        edges = [f"{i * step:g}\u2013{(i + 1) * step:g}" for i in range(int(round(top / step)))]
        p.parts.append(f"<h3>{text(column)} ({text(unit)}) per type</h3>" + _charts(
            *(histogram(t, edges, per[t], color=PALETTE[i % len(PALETTE)], unit=ctx.queries.unit,
                        axis=("0", f"{top:g}")) for i, t in enumerate(sorted(types)))))
        p.parts.append(f"<details><summary>{text(column)} numbers</summary>" + _table(rows, f"content_{column}")
                       + "</details>")
    p.parts.append("<h3>Exact duplicates</h3>" + _table(ctx.run(p, "duplicates", ctx.queries.duplicates()),
                                                        "duplicates"))
    p.parts.append(_table(ctx.run(p, "duplicate_groups", ctx.queries.duplicate_groups()), "duplicate_groups"))
    return p


def extremes(ctx: Context) -> Panel:
    """The largest, the smallest and some empty files."""
    p = Panel("extremes", "Extremes")
    for key, title in (("largest", "Largest"), ("smallest", "Smallest (not empty)"), ("empty", "Empty")):
        rows = ctx.run(p, key, getattr(ctx.queries, key)())
        p.parts.append(f"<h3>{title}</h3>" + (_table(rows, key) if rows else '<p class="note">none</p>'))
    return p


def samples(ctx: Context) -> Panel:
    """The first sample of a few classes, decoded, with the header and the special tokens marked."""
    ds = ctx.ds
    p = Panel("samples", "Samples")
    ptr = np.asarray(ds.index.class_ptr, dtype=np.int64)
    headers = ds.spec.metadata is not None
    shown = 0
    for c, name in enumerate(ds.classes):
        if shown == _SAMPLE_CLASSES:
            break
        if ptr[c + 1] <= ptr[c]:
            continue
        sid = int(ptr[c])
        got = ds.fetch_numpy(np.array([sid], dtype=np.int64), ["input_array", "file_id", "offset"])
        fid, offset = int(got["file_id"][0]), int(got["offset"][0])
        body = sample_html(got["input_array"][0], ds.vocab, starts_document=offset == 0, headers=headers,
                           limit=_SAMPLE_TOKENS)
        where = text(display_path(ds.files[fid]))
        p.parts.append(f"<h3>{text(name)}: sample {sid:,}</h3><p class=\"note\">from {where}, "
                       f"token {offset:,}</p><pre class=\"sample\">{body}</pre>")
        shown += 1
    p.notes.append("Shaded: the header (the file type the model reads before SEP). Tags: special tokens. \\xNN: a "
                   f"byte that is not printable. At most {_SAMPLE_TOKENS} tokens of each sample are decoded.")
    return p


PANELS: tuple[Callable[[Context], Panel], ...] = (balance, file_types, sizes, padding, content, extremes, samples)
"""The panels after the overview, in page order."""
