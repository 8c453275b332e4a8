"""*Cold catalog to the first GROUP BY* (suite section ``coldcatalog``, probe ``cold_catalog``) and its targets."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import head, results, verdict

__all__ = ["render_section", "verdicts", "SIZES", "SYSTEMS"]

SIZES = (("1e5", "10^5"), ("1e6", "10^6"))
SYSTEMS = (("consumer_nocache", "consumer, `cache_dir=False`"), ("consumer_cache", "consumer, empty `cache_dir`"),
           ("daft", "Daft"), ("duckdb", "DuckDB"))
_INTRO = ("From nothing (a fresh process: interpreter start and imports included) to the answer of "
          "`SELECT class, count(*), sum(size) FROM files GROUP BY class`, `metadata=None`, one run each, the "
          "folder's metadata warm in the kernel's caches (one untimed walk first); Daft `from_glob_path` + "
          "`groupby` in its own venv; DuckDB `read_blob` (filename and size only). The build lists the folder once "
          "with `os.scandir` (each file's `stat` from its `DirEntry`, the paths already sorted), opens no file and "
          "writes no catalog rows when no libmagic column is asked for. On a loaded 2-core machine a "
          "single-threaded Python process gets a smaller share of the cores than Daft's many threads: read the "
          "ratios with the load average above.")


def _seconds(r: dict, key: str):
    e = r.get(key)
    if not isinstance(e, dict):
        return "—"
    return fmt(e["seconds"]) + " s" if "seconds" in e else f"failed: {e.get('error', '')[:80]}"


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Cold catalog to the first GROUP BY", res, "coldcatalog", _INTRO)
    rows = []
    for sub, label in SIZES:
        r = results(res, "coldcatalog", sub)
        if r is None:
            continue
        rows.append([f"{r['files']:,}" if "files" in r else label] + [_seconds(r, k) for k, _ in SYSTEMS] +
                    [f"{fmt(r.get('consumer_nocache_vs_daft'))} / {fmt(r.get('consumer_cache_vs_daft'))}",
                     str(r.get("answers_agree"))])
    if not rows:
        return out
    return out + table(["files"] + [t for _, t in SYSTEMS] + ["consumer ÷ Daft (no cache / cache)",
                                                                  "answers agree"], rows) + [""]


def verdicts(res: dict) -> list[dict]:
    """Cold catalog ≤ 1.0× Daft at 10^5 and 10^6 files."""
    out = []
    for sub, label in SIZES:
        r = results(res, "coldcatalog", sub)
        if r is None:
            continue
        x = r.get("consumer_nocache_vs_daft")
        if x is None:
            why = (r.get("daft") or {}).get("error") or "Daft was not run (no Daft interpreter in this run)"
        else:
            why = "" if x <= 1.0 else "the `stat` system call per file and the imports; see the run's load average"
        files = f"{r['files']:,}" if "files" in r else label
        out.append(verdict(f"cold catalog to the first GROUP BY ≤ 1.0× Daft ({files} files, fresh processes)",
                           None if x is None else f"{fmt(x)}× Daft's time", x is not None and x <= 1.0, why))
    return out
