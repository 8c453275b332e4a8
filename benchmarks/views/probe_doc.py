"""Reading the probe documents of a suite section (:mod:`benchmarks.suite_probe_runs`) for a view.

A section's results are ``{"runs": {sub: doc}}``; each view asks for the probe's results of one run with
:func:`results` (None when the run is absent, failed or the section did not run) and opens its section with
:func:`head`, which names the commands, the load average and how long each run took, or says the section was
not measured in this run. Every figure a view prints comes from these documents.
"""

from __future__ import annotations

from ..markdown import fmt

__all__ = ["NOT_MEASURED", "runs", "results", "head", "get", "verdict", "num"]

NOT_MEASURED = "not measured in this run"


def runs(res: dict, section: str) -> dict:
    """The run documents of ``section`` (empty when it did not run)."""
    return (res.get(section) or {}).get("runs") or {}


def results(res: dict, section: str, sub: str = "") -> dict | None:
    """The probe's results of run ``sub`` of ``section``; None when absent or failed."""
    doc = runs(res, section).get(sub) or {}
    out = doc.get("results")
    return out if isinstance(out, dict) else None


def get(d: dict | None, *keys):
    """``d[k0][k1]...``, None when any level is missing."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def num(x, digits: int = 2, unit: str = "") -> str:
    """A figure with its unit, or the words for a figure this run did not measure."""
    return NOT_MEASURED if x is None else f"{fmt(x, digits)}{unit}"


def head(title: str, res: dict, section: str, intro: str) -> list[str]:
    """The section's heading, then (when it ran) its commands, load and time, then ``intro``; when it did not
    run, one line saying so and how to run it."""
    out = [f"## {title}", ""]
    docs = runs(res, section)
    ran = {sub: d for sub, d in docs.items() if "results" in d}
    if not ran:
        why = "; ".join(d.get("absent") or d.get("error", "") for d in docs.values() if d) or \
            (res.get("failed_sections") or {}).get(section, {}).get("reason", "")
        return out + [f"Not measured in this run{': ' + why if why else ''} (suite section `{section}`: "
                      f"`python -m benchmarks run --full --sections {section}`).", ""]
    out += ["```", *[d["command"] for d in docs.values() if d.get("command")], "```", ""]
    alone = [d["started"] for d in ran.values() if d.get("alone")]  # added by `report --add-probe`
    mixed = 0 < len(alone) < len(ran)  # some runs of the section added alone, the others from the suite run
    timing = [f"{d['command'].split()[4]}" + (f" ({sub})" if sub else "") +
              (f" run alone ({d['started']})" if mixed and d.get("alone") else "") +
              f": {d['duration_s']:.0f} s, load average at its start {d['load_average']}" for sub, d in ran.items()]
    failed = [f"{sub}: {d['error']}" for sub, d in docs.items() if "error" in d]
    absent = [f"{sub or d.get('probe')}: {d['absent']}" for sub, d in docs.items() if "absent" in d]
    how = f"Run alone ({', '.join(alone)}), not in the suite run of the rest of this page, as suite section `" \
        if alone and not mixed else "Run as suite section `"
    out += [how + section + "` — " + "; ".join(timing) + "." +
            (" Failed: " + "; ".join(failed) + "." if failed else "") +
            (" Not run: " + "; ".join(absent) + "." if absent else ""), ""]
    return out + [intro, ""] if intro else out


def verdict(target: str, figure: str | None, met, why: str = "") -> dict:
    """One row of the *Targets* table (``met``: True, False, None for not measured, or "floor")."""
    return {"target": target, "figure": figure or "—", "met": None if figure is None else met, "why": why}
