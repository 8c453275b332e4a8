"""*Parquet and compressed containers behind URLs* (suite section ``recremote``, probe ``records_remote``)."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import head, results

__all__ = ["render_section", "verdicts"]

_INTRO = ("Three containers of the same documents (random words): `text.parquet` (one string column, snappy), "
          "`wide.parquet` (the same plus a second string column of the same size that is never read) and "
          "`docs.jsonl.gz`, served by the test suite's `http.server` and by moto's S3 server behind the suite's "
          "counting proxy (both on 127.0.0.1). Counted: what the server sent while `Consumer([url], documents=..., "
          "cache_dir=...)` indexed each object into an empty cache directory (cold), then for a second open with "
          "the same cache directory (warm). Amplification = body bytes sent / bytes of the object. A cold Parquet "
          "open is a listing, the footer, and one GET per row group holding only the text column's chunk (the "
          "largest GET is the memory bound); the gzip object is read once, in large requests; a warm open sends "
          "the listing and reads nothing of the objects. Byte and request counts do not depend on the load.")


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Parquet and compressed containers behind URLs", res, "recremote", _INTRO)
    r = results(res, "recremote")
    if r is None:
        return out
    c = r.get("containers") or {}
    out += [f"Row groups: {c.get('row_groups')}; the largest row group's text chunk: "
            f"{c.get('text_chunk_bytes', 0):,} bytes; objects: " +
            ", ".join(f"{k} {v:,} bytes" for k, v in (c.get("sizes") or {}).items()) + ".", ""]
    rows = []
    for server in ("http", "s3"):
        for name, m in (r.get(server) or {}).items():
            cold, warm = m.get("cold") or {}, m.get("warm") or {}
            rows.append([name, "S3" if server == "s3" else "HTTP", f"{cold.get('gets')} / {cold.get('heads')}",
                         f"{cold.get('bytes', 0):,}", fmt(cold.get("amplification"), 4),
                         f"{cold.get('largest_get', 0):,}", f"{warm.get('gets')} / {warm.get('heads')}",
                         f"{warm.get('bytes', 0):,}"])
    return out + table(["object", "server", "cold GETs / HEADs", "cold bytes sent", "amplification", "largest GET",
                        "warm GETs / HEADs", "warm bytes"], rows) + [""]


def verdicts(res: dict) -> list[dict]:
    """No target of its own: the counts are read in the section."""
    return []
