"""*Causal labels and document columns against the plain query* (suite section ``objectives``, probe
``objective_costs``, issue #36) and its targets."""

from __future__ import annotations

from ..markdown import fmt, table
from .pretraining import caption, mark
from .probe_doc import get, head, results, verdict

__all__ = ["render_section", "verdicts", "SECTION"]

SECTION = "objectives"

_INTRO = ("What the pretraining objectives cost over the plain query on a warm packed store: the generated `small` "
          "corpus packed once (`ds.pack`, read through into the page cache), opened with `Consumer.from_packed(prefix,"
          " style=S, seqlen=8192)` for `S` in concat and packed, every row fetched once before timing. The same "
          "random batches for every query of a repetition, timed three ways: *interleaved* (the queries in turn on "
          "each batch, their order rotated), *back to back* (each query over all the batches in a run of its own, as "
          "a training loop asks one query step after step) and *fresh process* (each query alone in a new process, "
          "numpy, with glibc's default malloc settings and with `MALLOC_TRIM_THRESHOLD_` and "
          "`MALLOC_MMAP_THRESHOLD_` at 256 MiB, freed memory kept). Each cell: median µs per batch (× the plain "
          "query of the same API and order: the median of the per-batch ratios, paired on the same ids; in fresh "
          "processes the ratio of the medians), with the minor page faults per call where there are any (memory "
          "taken fresh from the kernel).")

_LABELS = {"plain": "plain (`None`)", "causal": "causal (`\"causal\"`)",
           "causal+doc": "causal + document columns", "doc": "document columns"}
_ORDERS = (("interleaved", "numpy"), ("back_to_back", "numpy"), ("interleaved", "torch"), ("back_to_back", "torch"))
_FRESH = ("default_malloc", "keep_memory_malloc")
_CU = ("plain", "input_array+cu_seqlens", "layout+cu_seqlens", "layout only", "cu_seqlens of a made layout")


def _cell(c: dict | None, ratio_key: str = "ratio") -> str:
    if not c:
        return "—"
    text = f"{fmt(c.get('median_us'))} ({fmt(c.get(ratio_key))}×)"
    return text + (f", {fmt(c['faults_per_call'], 0)} faults" if c.get("faults_per_call") else "")


def _query_spec(q) -> str:
    return "`None`" if q is None else f"`{q!r}`".replace("'", '"')


def _style_table(s: dict) -> list[str]:
    rows = []
    for name in dict.fromkeys([*_LABELS, *(get(s, "interleaved", "numpy") or {})]):
        rows.append([_LABELS.get(name, name)]
                    + [_cell(get(s, order, api, name)) for order, api in _ORDERS]
                    + [_cell(get(s, "fresh_process", env, name), "ratio_of_medians") for env in _FRESH])
    return table(["query", "numpy interleaved", "numpy back to back", "torch interleaved", "torch back to back",
                  "fresh process, default malloc", "fresh process, memory kept"], rows)


def _ratios(r: dict | None, query: str) -> list[tuple[str, str, float]]:
    """(style, api, interleaved ratio to plain) of every style and API measured."""
    out = []
    for style, s in ((r or {}).get("styles") or {}).items():
        for api in ("numpy", "torch"):
            x = get(s, "interleaved", api, query, "ratio")
            if x is not None:
                out.append((style, api, x))
    return out


def _objective_verdict(r: dict | None, query: str) -> tuple[str | None, bool]:
    xs = _ratios(r, query)
    if not xs:
        return None, False
    by_style: dict[str, list[str]] = {}
    for style, _, x in xs:
        by_style.setdefault(style, []).append(f"{fmt(x)}×")
    figure = "numpy/torch, interleaved: " + ", ".join(f"{style} {'/'.join(v)}" for style, v in by_style.items())
    return figure, max(x for _, _, x in xs) <= 1.15


def _cu_verdict(r: dict | None) -> tuple[str | None, bool]:
    cu = (r or {}).get("cu_seqlens") or {}
    added = get(cu, "interleaved", "query_minus_plain_us")
    alone = get(cu, "interleaved", "timings", "layout+cu_seqlens", "median_us")
    if added is None or alone is None:
        return None, False
    figure = (f"{fmt(added)} µs added to the query (paired median; back to back "
              f"{fmt(get(cu, 'back_to_back', 'query_minus_plain_us'))} µs), {fmt(alone)} µs from the index alone")
    return figure, max(added, alone) <= 50.0


def _cu(res: dict, r: dict) -> list[str]:
    cu = r.get("cu_seqlens") or {}
    if not cu:
        return []
    figure, met = _cu_verdict(r)
    band = cu.get("band") or ["—", "—"]
    out = [f"**`cu_seqlens` of a {cu.get('batch')} × {cu.get('seqlen')} batch**: a `band` corpus of "
           f"{cu.get('files', 0):,} files of {band[0]}-{band[1]} bytes in its own store, `style=\"packed\"`, "
           f"{cu.get('rows', 0):,} rows, {fmt(cu.get('pieces_per_batch'), 0)} document pieces per batch. "
           "`input_array+cu_seqlens`: the query `[\"input_array\", \"cu_seqlens\"]`; `layout+cu_seqlens`: "
           "`batch_layout(ds.index, ids, seqlen).cu_seqlens()` (the two halves next). Target: `cu_seqlens` ≤ 50 µs "
           "(both what it adds to the query and its computation from the index): "
           f"{mark(met if figure else None)}" + (f" ({figure})." if figure else "."), ""]
    rows = []
    for name in _CU:
        i, b = get(cu, "interleaved", "timings", name), get(cu, "back_to_back", "timings", name)
        rows.append([f"`{name}`", f"{fmt(get(i, 'median_us'))} ({fmt(get(i, 'best_us'))})",
                     f"{fmt(get(b, 'median_us'))} ({fmt(get(b, 'best_us'))})"])
    rows.append(["query − plain, paired median (of medians; of bests)",
                 *[f"{fmt(get(cu, o, 'query_minus_plain_us'))} ({fmt(get(cu, o, 'query_minus_plain_of_medians_us'))};"
                   f" {fmt(get(cu, o, 'query_minus_plain_of_bests_us'))})" for o in ("interleaved", "back_to_back")]])
    return out + table(["call", "interleaved µs, median (best)", "back to back µs, median (best)"], rows) + [""]


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Causal labels and document columns against the plain query (issue #36)", res, SECTION, _INTRO)
    r = results(res, SECTION)
    if r is None:
        return out
    marks = []
    for query in ("causal", "doc", "causal+doc"):
        figure, met = _objective_verdict(r, query)
        marks.append(f"{_LABELS[query]} {mark(met if figure else None)}" + (f" ({figure})" if figure else ""))
    queries = r.get("queries") or {}
    out += [f"Store: {r.get('files', 0):,} files, {fmt(r['corpus_bytes'] / 1e6) if 'corpus_bytes' in r else '—'} MB;"
            f" batches of {r.get('batch')} rows of {r.get('seqlen')} tokens, {r.get('reps')} repetitions. Queries: "
            + "; ".join(f"{_LABELS.get(k, k)}: {_query_spec(q)}" for k, q in queries.items())
            + f". Copy floor: `np.copyto` of one [{r.get('batch')}, {r.get('seqlen')}] int64 batch, "
            f"{fmt(r.get('copy_floor_us'))} µs (the causal query's `labels` is a second array of that size).", "",
            f"Run: {caption(res, SECTION, '')}. Targets, causal and the document columns ≤ 1.15× the plain query: "
            + "; ".join(marks) + ".", ""]
    for style, s in (r.get("styles") or {}).items():
        out += [f"`style=\"{style}\"`: {s.get('rows', 0):,} rows, {s.get('pieces_per_batch', '—')} document pieces "
                "per batch.", ""]
        out += _style_table(s) + [""]
    return out + _cu(res, r)


def verdicts(res: dict) -> list[dict]:
    """Causal labels, the document columns and both together within 1.15× the plain query (every style and API,
    interleaved); ``cu_seqlens`` of a 256 × 2048 batch within 50 µs."""
    r = results(res, SECTION)
    if r is None:
        return []
    plain = get(r, "styles", "concat", "interleaved", "numpy", "plain", "median_us")
    why = "" if plain is None else (f"the plain query (concat, numpy) is {fmt(plain)} µs per batch against a copy "
                                    f"floor of {fmt(r.get('copy_floor_us'))} µs")
    out = []
    for query, target in (("causal", "causal labels (`\"causal\"`)"),
                          ("doc", "document columns (`document_ids`, `cu_seqlens`)"),
                          ("causal+doc", "causal labels and all document columns together")):
        figure, met = _objective_verdict(r, query)
        out.append(verdict(f"{target} ≤ 1.15× the plain query, warm packed store", figure, met,
                           "" if met else why))
    figure, met = _cu_verdict(r)
    batch = get(r, "cu_seqlens", "batch") or 256
    seqlen = get(r, "cu_seqlens", "seqlen") or 2048
    out.append(verdict(f"`cu_seqlens` of a {batch} × {seqlen} batch ≤ 50 µs", figure, met))
    return out
