"""*Corpus report* (suite section ``corpusreport``, probe ``report``) and its targets."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import head, results, verdict

__all__ = ["render_section", "verdicts"]

_INTRO = ("`ds.report(path)` on a folder of small files in 20 classes (`metadata=None`, no content pass; sizes "
          "log-normal, median about 1 KB), warm: the dataset is built and the page's statements have run once. "
          "`sql` runs the page's own statements (read back from the page) through `ds.sql`; `report` writes the "
          "whole page (those statements, the title's statement, the fingerprint, charts, samples, escaping). "
          "Every panel is an aggregate (per class, per size bin, per type) plus five extremes and four samples, "
          "so the page grows slowly with the corpus; the charts are drawn as hand-written SVG, not with a plotting "
          "library ([report.md](report.md)).")


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Corpus report", res, "corpusreport", _INTRO)
    r = results(res, "corpusreport")
    if r is None:
        return out
    ms = {k: f"{fmt(1e3 * r[k])} ms" if k in r else "—" for k in ("sql_s", "report_s")}
    out += table(["files", "statements", "`sql`", "`report`", "report / sql", "page"],
                 [[f"{r.get('files', 0):,}", str(r.get("statements")), ms["sql_s"], ms["report_s"],
                   fmt(r.get("report_over_sql")), f"{fmt(r.get('page_bytes', 0) / 1e3)} KB"]])
    out += ["", f"The page at a tenth of the files is {fmt(r.get('page_bytes_small', 0) / 1e3)} KB; extrapolated "
            f"linearly, {fmt(r.get('page_bytes_at_1e6_extrapolated', 0) / 1e6)} MB at 10^6 files (bound: 5 MB)."]
    if "svg_matplotlib_bytes" in r:
        out.append(f"The page's charts drawn by hand as SVG: {fmt(r['svg_handwritten_bytes'] / 1e3)} KB in "
                   f"{fmt(1e3 * r['svg_handwritten_s'])} ms; with matplotlib's SVG backend "
                   f"{fmt(r['svg_matplotlib_bytes'] / 1e3)} KB ({fmt(r.get('matplotlib_over_handwritten_bytes'))}×) "
                   f"in {fmt(r['svg_matplotlib_s'], 3)} s.")
    rec = r.get("records")
    if isinstance(rec, dict):
        out.append(f"A JSONL records dataset of {rec.get('documents', 0):,} documents in 16 shards (`class_field`): "
                   f"{rec.get('statements')} statements in {fmt(1e3 * rec.get('sql_s', 0))} ms, the Containers "
                   f"panel's {rec.get('container_statements')} joins {fmt(1e3 * rec.get('containers_sql_s', 0))} ms "
                   f"of them; the page {fmt(1e3 * rec.get('report_s', 0))} ms ({fmt(rec.get('report_over_sql'))}× its "
                   f"statements), {fmt(rec.get('page_bytes', 0) / 1e3)} KB.")
    return out + [""]


def verdicts(res: dict) -> list[dict]:
    """The page costs ≤ 3× its statements; the page at 10^6 files ≤ 5 MB."""
    r = results(res, "corpusreport")
    if r is None:
        return []
    x, size = r.get("report_over_sql"), r.get("page_bytes_at_1e6_extrapolated")
    return [verdict("corpus report ≤ 3× the time of its own SQL statements",
                    None if x is None else f"{fmt(x)}× ({r.get('files', 0):,} files)", x is not None and x <= 3),
            verdict("corpus report page ≤ 5 MB at 10^6 files", None if size is None else
                    f"{fmt(size / 1e6)} MB (extrapolated)", size is not None and size <= 5e6)]
