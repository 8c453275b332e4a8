"""*Pretraining rows: packed against concat and diff* (suite section ``styles``; probes ``packed_plan``,
``style_report`` and ``style_fetch``, issue #36) and its targets."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import get, head, results, runs, verdict

__all__ = ["render_section", "verdicts", "SECTION", "mark", "caption"]

SECTION = "styles"
_MIB = 2 ** 20

_INTRO = ("The row styles of a pretraining corpus: `diff` (one document per row, the rest PAD; a longer document "
          "in windows or truncated), `concat` (documents back to back, cut at every row boundary) and `packed` "
          "(best-fit decreasing of whole documents into rows, `consumer/tokens/packing.py`; a document longer than a "
          "row in full windows and its last piece packed). Three probes: the cost of planning `packed` over "
          "`concat` at 10^7 documents, what each style makes of two corpora (no fetch), and fetching packed rows "
          "against concat rows of the same corpus. Each table names its probe's command, the load average at its "
          "start and its verdict.")


def mark(met) -> str:
    """The verdict of one target in words: **met**, **missed** or not measured."""
    return {True: "**met**", False: "**missed**"}.get(met, "not measured")


def caption(res: dict, section: str, sub: str) -> str:
    """The command of run ``sub`` of ``section`` and the load average at its start, as one sentence."""
    doc = runs(res, section).get(sub) or {}
    return f"`{doc.get('command', '')}`, load average at its start {doc.get('load_average')}"


def _plan_verdict(r: dict | None) -> tuple[str | None, bool]:
    plans = (r or {}).get("plans") or []
    times = [(p.get("classes"), get(p, "packed", "seconds")) for p in plans]
    times = [(c, s) for c, s in times if s is not None]
    if not times or (r or {}).get("docs", 0) < 10 ** 7:
        return None, False
    worst = max(s for _, s in times)
    figure = ", ".join(f"{fmt(s)} s with {c} class{'es' if c != 1 else ''}" for c, s in times)
    return figure, worst <= 10.0


def _plan(res: dict) -> list[str]:
    r = results(res, SECTION, "plan")
    if r is None:
        return []
    plans = r.get("plans") or []
    longer = get(plans[0] if plans else None, "packed", "longer_than_seqlen_pct")
    figure, met = _plan_verdict(r)
    out = [f"**Planning {r.get('docs', 0):,} documents** ({caption(res, SECTION, 'plan')}): lengths lognormal "
           f"(median {fmt(r.get('median'))} tokens, sigma {fmt(r.get('sigma'))}), clipped to [1, 4 × seqlen], "
           f"{fmt(longer)} % longer than a row of {r.get('seqlen')} tokens; classes in equal shares; each "
           f"`build_index` in a fresh process (no file read). Target: the packed plan of 10^7 documents ≤ 10 s: "
           f"{mark(met if figure else None)}" + (f" ({figure})." if figure else "."), ""]
    rows = []
    for p in plans:
        for style in ("packed", "concat"):
            s = p.get(style) or {}
            rows.append([str(p.get("classes")), style, fmt(s.get("seconds")),
                         f"{s['rows']:,}" if "rows" in s else "—", fmt(s.get("pad_pct"), 4), fmt(s.get("cut_pct")),
                         fmt(s["peak_rss"] / _MIB) if "peak_rss" in s else "—",
                         fmt(p.get("time_ratio")) if style == "packed" else ""])
    return out + table(["classes", "style", "seconds", "rows", "PAD %", "documents cut %", "peak RSS (MiB)",
                        "packed ÷ concat time"], rows) + [""]


def _report_rows(table_rows: list[dict]) -> list[list[str]]:
    return [[str(t.get("seqlen")), t.get("style", "—"), t.get("long_files") or "—",
             f"{t['rows']:,}" if "rows" in t else "—", fmt(t.get("padding_pct")), fmt(t.get("cut_pct")),
             fmt(t.get("tokens_left_out_pct")), fmt(t.get("longer_than_row_pct")), fmt(t.get("build_s"), 3)]
            for t in table_rows]


def _report(res: dict) -> list[str]:
    r = results(res, SECTION, "report")
    if r is None:
        return []
    demo, jsonl = r.get("demo") or {}, r.get("jsonl") or {}
    out = [f"**What each style makes of a corpus** ({caption(res, SECTION, 'report')}; no target: figures of the "
           "index, nothing fetched). *Padding*: PAD share of all rows' tokens; *documents cut*: no row holds the "
           "document whole; *tokens left out*: truncated away; *build*: the dataset made, its index included.", ""]
    header = ["seqlen", "style", "long_files", "rows per epoch", "padding %", "documents cut %", "tokens left out %",
              "documents longer than a row %", "build (s)"]
    out += [f"The `consumer demo` corpus (Python standard library files, one class per file type): "
            f"{demo.get('files', 0):,} files, {demo.get('classes')} classes, `n_bytes={demo.get('n_bytes')}`.", ""]
    out += table(header, _report_rows(demo.get("table") or [])) + [""]
    out += [f"A JSONL corpus: {jsonl.get('records', 0):,} records in {jsonl.get('files')} files, `text` of "
            f"{fmt(jsonl['text_bytes'] / 1e6) if 'text_bytes' in jsonl else '—'} MB (median "
            f"{fmt(jsonl.get('median_bytes'))} B, mean {fmt(jsonl.get('mean_bytes'))} B, p99 "
            f"{fmt(jsonl.get('p99_bytes'))} B), `documents=\"jsonl\", n_bytes=1`.", ""]
    return out + table(header, _report_rows(jsonl.get("table") or [])) + [""]


# (source, label, its packed dataset, its concat dataset)
_SOURCES = (("own_store", "warm stores, each style's own (`pack` of a packed dataset for packed)", "own store packed",
             "store concat"),
            ("store", "one warm store (`pack` of a concat dataset) for both styles", "store packed", "store concat"),
            ("files", "raw files (`Consumer(root, ...)`)", "files packed", "files concat"))


def _fetch_verdicts(r: dict | None) -> list[tuple[str, str | None, bool, str]]:
    """(label, figure, met, why) per source measured (a source a document lacks is left out)."""
    out = []
    pieces = (r or {}).get("pieces_per_batch") or {}
    for source, label, packed, concat in _SOURCES:
        x = get(r, "interleaved", f"{source}_packed_over_concat")
        if x is None and source == "own_store":
            continue  # a document of the probe before the packed dataset's own store was measured
        b2b = get(r, "back_to_back", f"{source}_packed_over_concat")
        figure = None if x is None else f"{fmt(x)}× interleaved, {fmt(b2b)}× back to back"
        met = x is not None and x <= 1.10
        why = "" if met or figure is None else \
            f"document pieces per batch: packed {pieces.get(packed, '—')}, concat {pieces.get(concat, '—')}"
        out.append((label, figure, met, why))
    return out


def _fetch(res: dict) -> list[str]:
    r = results(res, SECTION, "fetch")
    if r is None:
        return []
    marks = "; ".join(f"{label}: {mark(met if figure else None)}" + (f" ({figure})" if figure else "")
                      for label, figure, met, _ in _fetch_verdicts(r))
    out = [f"**Fetching packed rows against concat rows** ({caption(res, SECTION, 'fetch')}): the generated `small` "
           f"corpus ({r.get('files', 0):,} files, {fmt(r['corpus_bytes'] / 1e6) if 'corpus_bytes' in r else '—'} MB,"
           " `n_bytes=2`); *store*: `Consumer.from_packed` of the store a concat dataset's `pack` writes, "
           "*own store packed*: of the store the packed dataset's own `pack` writes (its documents in the order of "
           "its rows); *files*: `Consumer(root, ...)`. Batches of "
           f"{r.get('batch')} random rows of {r.get('seqlen')} tokens (the same ids for "
           f"every dataset), plain query `fetch_numpy(ids, None)`, {r.get('reps')} repetitions, every row "
           "fetched once before timing; *interleaved*: the datasets in turn on each batch, *back to back*: each "
           "over all the batches in a run of its own. Packed ÷ concat is the median of the per-batch ratios. "
           f"Target: packed ≤ 1.10× concat. Verdicts: {marks}.", ""]
    rows = []
    for name, n in (r.get("rows") or {}).items():
        i, b = get(r, "interleaved", "timings", name) or {}, get(r, "back_to_back", "timings", name) or {}
        rows.append([name, f"{n:,}", str(get(r, "pieces_per_batch", name) or "—"),
                     f"{fmt(i.get('median_us'))} ({fmt(i.get('best_us'))})",
                     f"{fmt(b.get('median_us'))} ({fmt(b.get('best_us'))})"])
    out += table(["dataset", "rows", "document pieces per batch", "interleaved µs per batch, median (best)",
                  "back to back µs, median (best)"], rows) + [""]
    ratio_rows = [[f"{label}: `{packed}` ÷ `{concat}`", fmt(get(r, "interleaved", f"{s}_packed_over_concat")),
                   fmt(get(r, "interleaved", f"{s}_packed_over_concat_best")),
                   fmt(get(r, "back_to_back", f"{s}_packed_over_concat")),
                   fmt(get(r, "back_to_back", f"{s}_packed_over_concat_best"))]
                  for s, label, packed, concat in _SOURCES if packed in (r.get("rows") or {})]
    return out + table(["packed ÷ concat", "interleaved (paired median)", "interleaved best ÷ best",
                        "back to back (paired median)", "back to back best ÷ best"], ratio_rows) + [""]


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Pretraining rows: packed against concat and diff (issue #36)", res, SECTION, _INTRO)
    return out + _plan(res) + _report(res) + _fetch(res)


def verdicts(res: dict) -> list[dict]:
    """The packed plan of 10^7 documents within 10 s; packed rows within 1.10× concat rows (store, files)."""
    out = []
    r = results(res, SECTION, "plan")
    if r is not None:
        figure, met = _plan_verdict(r)
        out.append(verdict("packed style: planning 10^7 documents (best-fit decreasing) ≤ 10 s", figure, met,
                           "" if figure or r.get("docs", 0) >= 10 ** 7 else
                           f"this run planned {r.get('docs', 0):,} documents"))
    r = results(res, SECTION, "fetch")
    if r is not None:
        for label, figure, met, why in _fetch_verdicts(r):
            out.append(verdict(f"packed rows ≤ 1.10× concat rows, {label}", figure, met, why))
    return out
