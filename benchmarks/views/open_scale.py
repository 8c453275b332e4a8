"""*Opening a store of 10^5..10^8 documents against megatron-core* (suite section ``openscale``, probe
``open_scale``) and its targets."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import get, head, results, verdict

__all__ = ["render_section", "verdicts", "series"]

_INTRO = ("Each store is written directly as a Megatron `.bin/.idx` (`IndexedWriter.add_segments`: uint16 ids, "
          "documents of 1-15 tokens, one sequence each; no file is packed), then every figure comes from a fresh "
          "process with the page cache warm. consumer: `Consumer.from_packed(prefix, style, seqlen, cache_dir)`, "
          "first with an empty index cache (the store's full check, the sample index built and both recorded), "
          "then reopened (both mapped); the SQL statement runs after a reopen. megatron-core: `IndexedDataset(prefix)`,"
          " then `GPTDataset` over every document (same `sequence_length`, one epoch, split `1,0,0`) with an empty "
          "cache folder (its document, sample and shuffle indices built and saved), then reopened from that folder. "
          "*Beyond imports*: VmRSS after the open less VmRSS after the process's imports (consumer, torch; "
          "megatron-core, torch); *peak*: VmHWM less the same base (mapped pages of the store count while they are "
          "resident); *first item*: `ds[k]` / `dataset[k]` for `k` in the middle. Ratios are consumer ÷ megatron-core "
          "on the same store in the same run.")

_GIB = 2 ** 30
_MIB = 2 ** 20


def _mib(x) -> str:
    return fmt(x / _MIB) if isinstance(x, (int, float)) else "—"


def _ms(x) -> str:
    return fmt(x * 1e3) if isinstance(x, (int, float)) else "—"


def _sizes(r: dict) -> list[tuple[int, dict]]:
    return sorted(((int(n), row) for n, row in (r.get("sizes") or {}).items()), key=lambda t: t[0])


def series(res: dict) -> dict[str, list[tuple[int, float | None, float | None]]]:
    """``{label: [(documents, seconds, bytes)]}`` of each open measured (for the plot)."""
    r = results(res, "openscale")
    if r is None:
        return {}
    picks = {"consumer first open (peak)": (("consumer", "first_open"), "peak_beyond_imports"),
             "consumer reopen": (("consumer", "reopen_best"), "rss_beyond_imports"),
             "megatron-core IndexedDataset": (("megatron", "reopen_best", "indexed"), "rss_beyond_imports"),
             "megatron-core GPTDataset first build (peak)": (("megatron", "first_open", "gpt"), "peak_beyond_imports"),
             "megatron-core GPTDataset reopen": (("megatron", "reopen_best", "gpt"), "rss_beyond_imports")}
    out: dict[str, list] = {}
    for label, (path, mem) in picks.items():
        pts = [(n, get(row, *path, "open_s"), get(row, *path, mem)) for n, row in _sizes(r)]
        pts = [p for p in pts if p[1] is not None]
        if pts:
            out[label] = pts
    return out


def _consumer_rows(r: dict) -> list[list[str]]:
    rows = []
    for n, row in _sizes(r):
        st, c = row.get("store") or {}, row.get("consumer") or {}
        first, again, sql = c.get("first_open") or {}, c.get("reopen_best") or {}, c.get("sql_best") or {}
        rows.append([f"{n:,}", fmt((st.get("bin_bytes", 0) + st.get("idx_bytes", 0)) / 1e6),
                     f"{fmt(first.get('open_s'))} s / {_mib(first.get('rss_beyond_imports'))} / "
                     f"{_mib(first.get('peak_beyond_imports'))} / {_ms(first.get('first_item_s'))} ms",
                     f"{fmt(again.get('open_s'), 3)} s / {_mib(again.get('rss_beyond_imports'))} / "
                     f"{_ms(again.get('first_item_s'))} ms",
                     f"{fmt(sql.get('sql_s'))} s / {_mib(sql.get('sql_rss_added'))}"])
    return rows


def _megatron_rows(r: dict) -> list[list[str]]:
    rows = []
    for n, row in _sizes(r):
        m = row.get("megatron") or {}
        if not m:
            continue
        ix, gpt, again = get(m, "reopen_best", "indexed") or {}, get(m, "first_open", "gpt") or {}, \
            get(m, "reopen_best", "gpt") or {}
        rows.append([f"{n:,}",
                     f"{fmt(ix.get('open_s'), 4)} s / {_mib(ix.get('rss_beyond_imports'))} / "
                     f"{_ms(ix.get('first_item_s'))} ms",
                     f"{fmt(gpt.get('open_s'))} s / {_mib(gpt.get('rss_beyond_imports'))} / "
                     f"{_mib(gpt.get('peak_beyond_imports'))} / {_ms(gpt.get('first_item_s'))} ms",
                     f"{fmt(again.get('open_s'), 3)} s / {_mib(again.get('rss_beyond_imports'))} / "
                     f"{_ms(again.get('first_item_s'))} ms"])
    return rows


def _ratio_rows(r: dict) -> list[list[str]]:
    return [[f"{n:,}"] + [fmt(get(row, "ratios", k)) for k in ("first_open_vs_gpt_build", "first_peak_vs_gpt_build",
                                                                 "reopen_vs_gpt_reopen", "reopen_rss_vs_gpt_reopen")]
            for n, row in _sizes(r) if row.get("ratios")]


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Opening a .bin/.idx store of 10^5 to 10^8 documents, against megatron-core", res, "openscale",
               _INTRO)
    r = results(res, "openscale")
    if r is None:
        return out
    out += [f"consumer: `style={r.get('style')!r}, seqlen={r.get('seqlen')}`; SQL: `{r.get('statement')}`. "
            "MiB: beyond imports unless said.", ""]
    out += table(["documents", "store (MB)", "consumer first open: s / MiB beyond imports / peak MiB / first item",
                  "reopen: s / MiB beyond imports / first item", "SQL after a reopen: s / MiB added"],
                 _consumer_rows(r)) + [""]
    mrows = _megatron_rows(r)
    if mrows:
        out += table(["documents", "megatron-core IndexedDataset: s / MiB / first item",
                      "GPTDataset first build: s / MiB / peak MiB / first item",
                      "GPTDataset cached reopen: s / MiB / first item"], mrows) + [""]
        out += ["consumer ÷ megatron-core, same store, same run:", ""]
        out += table(["documents", "first open ÷ GPTDataset first build", "its peak ÷ GPTDataset's",
                      "reopen ÷ GPTDataset reopen", "reopen MiB ÷ GPTDataset's"], _ratio_rows(r)) + [""]
    else:
        out += ["megatron-core was not measured in this run.", ""]
    return out  # a --baseline run's figures (an earlier checkout) are not this page's: see docs/design.md


def verdicts(res: dict) -> list[dict]:
    """At 10^8 documents: the SQL statement within 2 s, the first open within 2x GPTDataset's first build and
    its peak within 4 GiB."""
    r = results(res, "openscale")
    row = (r or {}).get("sizes", {}).get(str(10 ** 8))
    if not row:
        return []
    sql = get(row, "consumer", "sql_best", "sql_s")
    ratio = get(row, "ratios", "first_open_vs_gpt_build")
    peak = get(row, "consumer", "first_open", "peak_beyond_imports")
    return [verdict("SQL: `SELECT count(*), sum(length) FROM documents` on 10^8 documents within 2 s",
                    None if sql is None else f"{fmt(sql)} s", sql is not None and sql <= 2.0),
            verdict("first open of a 10^8-document store within 2x megatron-core's GPTDataset first build",
                    None if ratio is None else f"{fmt(ratio)}x", ratio is not None and ratio <= 2.0),
            verdict("peak memory of that first open within 4 GiB",
                    None if peak is None else f"{fmt(peak / _GIB)} GiB beyond imports",
                    peak is not None and peak <= 4 * _GIB)]
