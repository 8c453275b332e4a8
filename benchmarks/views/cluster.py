"""*Listing a local folder on Dask workers* (suite section ``clusterlisting``, probe ``cluster_listing``)."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import get, head, results

__all__ = ["render_section", "verdicts"]

_INTRO = ("Small files in class folders two levels deep; the local `scan_directory` against the same scan with each "
          "class folder walked on a `LocalCluster` of 1 and 2 worker processes; best of interleaved repetitions, each "
          "cluster listing checked equal to the local one first. Two workers plus the client on 2 cores cannot show "
          "real scaling: what carries to a real cluster is the client's share of the CPU (listing the root, joining "
          "the parts), the per-file `stat` having moved to the workers.")


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Listing a local folder on Dask workers", res, "clusterlisting", _INTRO)
    r = results(res, "clusterlisting")
    if r is None:
        return out
    per = r.get("results") or {}
    local_cpu = get(per, "local", "client_cpu_s")
    rows = [[k, fmt(v.get("wall_s"), 3), fmt(v.get("vs_local")),
             fmt(v["client_cpu_s"] / local_cpu) if local_cpu and "client_cpu_s" in v else "—"] for k, v in per.items()]
    out += [f"{r.get('files', 0):,} files in {r.get('classes')} class folders.", ""]
    return out + table(["configuration", "wall s", "wall / local", "client CPU / local scan's CPU"], rows) + [""]


def verdicts(res: dict) -> list[dict]:
    """No target on a 2-core machine (see the section)."""
    return []
