"""*Documents inside containers* (suite section ``records``, probe ``records_index``) and its targets (#26)."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import get, head, results, verdict

__all__ = ["render_section", "verdicts"]

_INTRO = ("A text file of short lines and the same lines as JSONL records (`{\"id\", \"text\", \"lang\"}`), measured "
          "within one run. Lines: from nothing (an empty cache dir) to the first `SELECT count(*) FROM documents`, "
          "against the floor of a plain read plus one numpy newline scan (`np.fromfile` + `flatnonzero(data == 10)`). "
          "JSONL: MB/s of JSONL on one core for the parser candidates (decoding alone over lines split beforehand), "
          "our scanner (the whole indexer of one container: reading, newline scan, decoding, each text's length) "
          "and the whole build. msgspec was chosen: its typed decoder skips the fields it is not asked for in "
          "C and names the field in its errors; pyarrow's reader is as fast on one thread but cannot name the bad "
          "line. Memory: peak RSS of a fresh child process that builds the dataset into an empty cache directory, runs "
          "the first `count(*)` and one `ds.fetch`, measured at the size given (10^7 documents in a full run): lines, "
          "JSONL, and JSONL with `class_field` (two interleaved classes: the documents are reordered). The baseline "
          "is the same child's peak after doing all that with a two-document file first (imports, torch, DuckDB's "
          "first statement).")


def _rss_row(name: str, m: dict | None) -> list[str]:
    m = m or {}
    return [name, f"{m['docs']:,}" if m.get("docs") else "—", fmt(m.get("peak_mib")), fmt(m.get("baseline_mib")),
            fmt(m.get("bytes_per_doc"))]


_PEAKS = (("lines", "lines"), ("jsonl", "JSONL"), ("jsonl_class_field", "JSONL, class_field"))


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Documents inside containers: indexing lines and JSONL (#26)", res, "records", _INTRO)
    r, j = results(res, "records"), results(res, "records", "jsonl")
    if r is None and j is None:
        return out
    if r is not None:
        out += [f"{r.get('docs', 0):,} lines ({fmt(r.get('lines_file_mb'))} MB), the same as JSONL "
                f"({fmt(r.get('jsonl_file_mb'))} MB).", ""]
        out += table(["lines", "seconds", "× the floor"], [
            ["floor: read + newline scan", fmt(r.get("floor_read_scan_s"), 3), "1.00"],
            ["`Consumer(file, documents=\"lines\")` to the first `count(*)`, empty cache dir",
             fmt(r.get("lines_first_count_s"), 3), fmt(r.get("lines_ratio_to_floor"))],
            ["the same, `cache_dir=False`", fmt(r.get("lines_in_memory_s"), 3), fmt(r.get("lines_in_memory_ratio"))],
            ["the same, index reused from the cache dir", fmt(r.get("lines_index_reused_s"), 3),
             fmt(r.get("lines_reused_ratio"))]])
        rates = [[f"parser candidate: {k}", fmt(v)] for k, v in (r.get("jsonl_parsers_mb_s") or {}).items()]
        rates += [["our scanner", fmt(r.get("jsonl_scanner_mb_s"))], ["whole build to the first `count(*)`",
                                                                      fmt(r.get("jsonl_build_mb_s"))]]
        out += [""] + table(["JSONL", "MB/s"], rates)
    m = results(res, "records", "memory")
    if m is not None:
        out += [""] + table(["peak RSS", "documents", "peak MiB", "baseline MiB", "bytes per document"],
                            [_rss_row(label, m.get(f"rss_{key}")) for key, label in _PEAKS])
    if j is not None:
        out += ["", f"Realistic JSONL: {j.get('docs', 0):,} records `{{\"id\", \"text\", \"lang\"}}` of 200-2000 "
                f"bytes ({fmt(j.get('jsonl_file_mb'))} MB; one in 20 with an escape, one in 20 non-ASCII), timed "
                "alternately in one run: the whole scanner (file to document index) against msgspec alone on the same "
                "bytes already in memory (the scanner's own typed struct, 16 MiB at a time). Parser: "
                f"{j.get('parser', '—')}.", ""]
        out += table(["realistic JSONL", "MB/s (wall)", "MB/s (CPU time)"], [
            ["msgspec alone", fmt(j.get("msgspec_alone_mb_s")), fmt(j.get("msgspec_alone_cpu_mb_s"))],
            [f"**our scanner** ({fmt(j.get('scanner_to_msgspec'))} of msgspec alone)", fmt(j.get("scanner_mb_s")),
             fmt(j.get("scanner_cpu_mb_s"))],
            ["whole build to the first `count(*)` (`cache_dir=False`)", fmt(j.get("build_to_first_count_mb_s")), "—"]])
    return out + [""]


def _jsonl_rate(res: dict) -> tuple[float | None, str]:
    j = results(res, "records", "jsonl")
    if j is not None and j.get("scanner_mb_s") is not None:
        return j["scanner_mb_s"], "realistic records, whole scanner"
    return get(results(res, "records"), "jsonl_scanner_mb_s"), "whole scanner"


def verdicts(res: dict) -> list[dict]:
    """Lines first build ≤ 5× the floor; JSONL ≥ 200 MB/s; 10^7 documents < 2 GiB."""
    r, m = results(res, "records"), results(res, "records", "memory")
    if r is None and m is None and results(res, "records", "jsonl") is None:
        return []
    x = get(r, "lines_ratio_to_floor")
    out = [verdict("lines: first build to `count(*)` ≤ 5× read + newline scan", None if x is None else
                   f"{fmt(x)}× (in memory {fmt(get(r, 'lines_in_memory_ratio'))}×, reused "
                   f"{fmt(get(r, 'lines_reused_ratio'))}×)", x is not None and x <= 5)]
    rate, what = _jsonl_rate(res)
    out.append(verdict("JSONL indexing ≥ 200 MB/s per core", None if rate is None else f"{fmt(rate)} MB/s ({what})",
                       rate is not None and rate >= 200))
    peaks = {label: (get(m, f"rss_{key}", "peak_mib"), get(m, f"rss_{key}", "docs")) for key, label in _PEAKS}
    have = {k: v for k, v in peaks.items() if v[0] is not None}
    docs = min((int(n) for _, n in have.values() if n), default=0)
    shown = ", ".join(f"{k} {fmt(p / 1024)} GiB" for k, (p, _) in have.items()) + f" at {docs:,} documents"
    out.append(verdict("10^7 documents < 2 GiB peak RSS", shown if have else None,
                       bool(have) and docs >= 10**7 and all(p < 2048 for p, _ in have.values())))
    return out
