"""The *Packed fetch against the machine's limits* section (suite section ``limits``) and its targets."""

from __future__ import annotations

from ..markdown import fmt, table

__all__ = ["render_section", "verdicts"]


def render_section(res: dict) -> list[str]:
    """The report's markdown lines of this section (none when it did not run)."""
    lim = res.get("limits")
    if not lim:
        return []
    s = lim["systems"]
    out = ["## Packed fetch against the machine's limits", "",
           "Packed concat store of the small-files corpus, random batches of 20 × 8192, `fetch_numpy` "
           "(no torch). memcpy: `np.copyto` of a hot batch; DRAM gather: 20 random row slices of the store "
           "into a preallocated batch of the same dtype.", ""]
    rows = []
    for k, v in s.items():
        m = s.get("memcpy int32" if "int32" in k else "memcpy int64", {}).get("median_s")
        rows.append([k, fmt(v["median_s"] * 1e3, 4), fmt(m / v["median_s"]) if m else "—"])
    if not lim.get("out_dtype_available"):
        rows.append(["consumer packed int32", "—", "out_dtype not available in this version"])
    out += table(["what", "ms / batch", "memcpy ÷ this (fraction of memcpy speed)"], rows) + [""]
    return out


def _floor_note(memcpy_s, gather_s, first_touch: bool = False) -> str:
    """Why a packed fetch misses a fraction-of-memcpy target: the DRAM-gather floor, measured in the same run;
    ``first_touch``: the figure includes the first reads of chunks (int64 is timed first on a freshly opened store)."""
    touch = ("; the store is opened afresh for this table and every repetition draws new windows, so the median "
             "includes first touches, which check the CRC-32C of each chunk not read before (int32 is timed after "
             "int64 on the same batches: its chunks are checked already)") if first_touch else ""
    if not gather_s:
        return "random windows of a store larger than the cache come from DRAM (gather floor not measured)" + touch
    return (f"memcpy copies a hot batch; any reader of random windows first gathers them from the store, and that "
            f"floor alone (no validation, no allocation) is {memcpy_s / gather_s:.2f} of memcpy in this run" + touch)



def verdicts(res: dict) -> list[dict]:
    """Packed concat fetch as a fraction of memcpy (int64 and int32)."""
    if not res.get("limits"):  # the section did not run: its targets are not in this report
        return []
    out: list[dict] = []
    lim = res.get("limits", {}).get("systems", {})
    m64, f64 = lim.get("memcpy int64", {}).get("median_s"), lim.get("consumer packed int64", {}).get("median_s")
    g64 = lim.get("DRAM gather int64", {}).get("median_s")
    if m64 and f64:
        frac = m64 / f64
        out.append({"target": "packed concat fetch ≥ 0.5 of memcpy (int64)", "figure": f"{frac:.2f} of memcpy "
                    f"({fmt(g64 / f64) if g64 else '—'} of the DRAM-gather floor)", "met": frac >= 0.5,
                    "why": "" if frac >= 0.5 else _floor_note(m64, g64, first_touch=True)})
    m32, f32 = lim.get("memcpy int32", {}).get("median_s"), lim.get("consumer packed int32", {}).get("median_s")
    g32 = lim.get("DRAM gather int32", {}).get("median_s")
    if m32 and f32:
        frac = m32 / f32
        out.append({"target": "packed concat fetch ≥ 0.8 of memcpy (int32 out_dtype)", "figure": f"{frac:.2f} of "
                    f"memcpy ({fmt(g32 / f32) if g32 else '—'} of the DRAM-gather floor)", "met": frac >= 0.8,
                    "why": "" if frac >= 0.8 else _floor_note(m32, g32)})
    else:
        out.append({"target": "packed concat fetch ≥ 0.8 of memcpy (int32 out_dtype)", "figure": "—", "met": False,
                    "why": "out_dtype not available in this version"})

    return out
