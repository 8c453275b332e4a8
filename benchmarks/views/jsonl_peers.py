"""*A folder of JSONL shards to the first count* (suite section ``jsonlpeers``, probe ``jsonl_peers``) and its
target (#27: indexing JSONL shards is not slower than Daft's ``read_json`` to the first count)."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import get, head, results, verdict

__all__ = ["render_section", "verdicts"]

_INTRO = ("A folder of JSONL shards (`{\"text\", ...}` records, realistic text lengths), each system in fresh "
          "processes, interleaved, median: from nothing to the first count of records. `consumer`: "
          "`Consumer(folder, documents=\"jsonl\", metadata=None, cache_dir=False)` then `SELECT count(*) FROM "
          "documents` (the whole document index: every record's line and its text's decoded length, each "
          "record parsed and checked, ready to serve); "
          "`consumer_cached`: the same writing the persistent index; `consumer_pool`: the containers indexed on a "
          "`ProcessPoolExecutor` (`engine=`); Daft: `read_json(glob).count()`, and with the sum of text lengths "
          "(every text parsed); DuckDB: `read_json` count, and with the sum of text lengths.")


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("A folder of JSONL shards to the first count, against Daft and DuckDB", res, "jsonlpeers", _INTRO)
    r = results(res, "jsonlpeers")
    if r is None:
        return out
    out += [f"{r.get('records', 0):,} records in {r.get('shards')} shards ({fmt((r.get('bytes') or 0) / 1e6)} MB), "
            f"{r.get('reps')} fresh processes per system.", ""]
    rows = [[name, fmt(m.get("first_count_s"), 2), fmt(m.get("x_consumer")), fmt(m.get("cpu_s"), 2),
             fmt(m.get("cores"), 2), fmt(m.get("import_s"), 2), fmt(m.get("peak_rss_mb"), 0)]
            for name, m in (r.get("systems") or {}).items()]
    rows += [[name, "not measured", why, "", "", "", ""] for name, why in (r.get("absent") or {}).items()]
    out += ["*CPU s*: user and system time of the process's threads during the count (a `consumer_pool` worker's "
            "is not counted: it is another process); *cores*: CPU over wall time.", ""]
    out += table(["system", "first count s", "× consumer", "CPU s", "cores", "import s", "peak RSS MB"], rows) + [""]
    out += _by_cores(r)
    reads = (r.get("reads") or {}).get("reads")
    if reads:
        out += ["Reading the documents back (`cache_dir=False`, one process): each text is decoded again from its "
                "record's line (read by byte range, near lines as one read, one msgspec call per batch), its "
                "length checked against the index; `× lines alone`: the time of the read over the time of reading "
                "the same records' lines without decoding them.", ""]
        out += table(["read", "documents/s", "MB/s of text", "µs a document", "× lines alone"],
                     [[k, fmt(v.get("docs_s"), 0), fmt(v.get("mb_s"), 0), fmt(v.get("us_per_doc"), 1),
                       fmt(1 / v["of_lines"] if v.get("of_lines") else None)] for k, v in reads.items()]) + [""]
    return out


def _by_cores(r: dict) -> list[str]:
    """The table of ``--cores``: each system pinned to the first 1, 2, ... CPUs (median first count, CPU s)."""
    by = r.get("by_cores") or {}
    if not by:
        return []
    rows = [[k, name, fmt(m.get("first_count_s"), 2), fmt(m.get("cpu_s"), 2), fmt(m.get("cores"), 2),
             fmt(m.get("x_consumer"))] for k, systems in by.items() for name, m in systems.items()]
    return ["Each system pinned to the first *n* CPUs (its affinity set before anything is imported, so each "
            "sizes its threads to them), interleaved with the other counts:", ""] + \
        table(["CPUs", "system", "first count s", "CPU s", "cores", "× consumer"], rows) + [""]


def verdicts(res: dict) -> list[dict]:
    """consumer ≤ 1.0× Daft's time to the first count."""
    r = results(res, "jsonlpeers")
    if r is None:
        return []
    x = get(r, "target", "consumer_over_daft")
    shown = None if x is None else f"{fmt(x)}× Daft's time ({get(r, 'target', 'daft_system')})"
    why = _why(r) if x is not None and x > 1.0 else ""
    return [verdict("a folder of JSONL shards to the first count ≤ 1.0× Daft's `read_json`", shown,
                    x is not None and x <= 1.0, why)]


def _why(r: dict) -> str:
    """Why consumer is slower: its CPU time against Daft's, and the cores each kept busy (this run's figures)."""
    systems = r.get("systems") or {}
    ours, daft = systems.get("consumer") or {}, systems.get(get(r, "target", "daft_system") or "") or {}
    text = ("every record is parsed by Arrow's JSON reader (C++, outside the GIL) and each text's UTF-8 checked, "
            "a container per core")
    if ours.get("cpu_s") and daft.get("cpu_s"):
        text += (f": {fmt(ours['cpu_s'], 2)} CPU s against Daft's {fmt(daft['cpu_s'], 2)} "
                 f"({fmt(ours['cpu_s'] / daft['cpu_s'])}×), on {fmt(ours.get('cores'), 2)} cores against Daft's "
                 f"{fmt(daft.get('cores'), 2)}")
    return text + ("; Arrow's parser and its UTF-8 check alone take about as much CPU as all of Daft's count, and "
                   "on two cores CPU time bounds the wall time (docs/records.md, *Indexing on every core*)")
