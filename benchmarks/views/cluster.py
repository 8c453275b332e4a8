"""*Listing a local folder on Dask workers* (suite section ``clusterlisting``, probe ``cluster_listing``)."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import head, results

__all__ = ["render_section", "verdicts"]

_INTRO = ("Small files in class folders two levels deep (`nested`) and in one flat folder (`flat`); the local "
          "`scan_directory` against the same listing on a `LocalCluster` of 1 and 2 worker processes, each listing in "
          "a fresh client process and checked equal to the local one. With an engine, each class folder is walked "
          "in slices (contiguous runs of its sorted entries) on the workers, a flat root too, and the client only "
          "joins the parts. Two workers plus the client on 2 cores cannot show real scaling: what carries to a real "
          "cluster is the client's share of the CPU and of the memory, the per-file `stat` having moved to the "
          "workers. Reading one directory itself cannot be split, so a flat folder's slices each read it again.")


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Listing a local folder on Dask workers", res, "clusterlisting", _INTRO)
    r = results(res, "clusterlisting")
    if r is None:
        return out
    rows = []
    for layout in ("nested", "flat"):
        per = r.get(layout) or {}
        for k, v in per.items():
            if isinstance(v, dict):
                rows.append([layout, k, fmt(v.get("wall_s"), 3), fmt(v.get("wall_vs_local")),
                             fmt(v.get("cpu_vs_local")), fmt(v.get("client_peak_rss_above_start_mb")),
                             fmt(v.get("mem_vs_local"))])
    out += [f"{r.get('files', 0):,} files, {r.get('classes')} class folders (nested).", ""]
    return out + table(["layout", "configuration", "wall s", "wall / local", "client CPU / local",
                        "client peak RSS above start MB", "client memory / local"], rows) + [""]


def verdicts(res: dict) -> list[dict]:
    """No target on a 2-core machine (see the section)."""
    return []
