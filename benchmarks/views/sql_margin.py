"""*SQL timeout margin* (suite section ``sqlmargin``, probe ``sql_timeout_margin``) and its target."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import head, results, verdict

__all__ = ["render_section", "verdicts"]

_INTRO = ("A two-file dataset; each statement runs with the given `timeout` and is run several times; *past* is "
          "the wall time after the timeout until `ds.sql` raised. Each of the first three builds the largest "
          "value one call may build (`MAX_GENERATED_BYTES`) over a billion rows; the last asks for more and is "
          "refused before it runs. The documented margin (`TIMEOUT_MARGIN_SECONDS`, [query.md](query.md)) must "
          "stay above the largest overshoot.")


def _margin() -> float | None:
    try:
        from consumer.query.bounds import TIMEOUT_MARGIN_SECONDS
    except ImportError:
        return None
    return float(TIMEOUT_MARGIN_SECONDS)


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("SQL timeout margin (DuckDB allocation bound)", res, "sqlmargin", _INTRO)
    r = results(res, "sqlmargin")
    if r is None:
        return out
    out += [f"Timeout {fmt(r.get('timeout_s'))} s, cap {r.get('cap_bytes', 0):,} bytes per call.", ""]
    rows = [[label, ", ".join(s.get("ended") or []), ", ".join(fmt(x) for x in s.get("over_s") or []) + " s"]
            for label, s in (r.get("statements") or {}).items()]
    return out + table(["statement", "ended with", "past the timeout (each run)"], rows) + [""]


def verdicts(res: dict) -> list[dict]:
    """The largest overshoot stays under the documented margin."""
    r = results(res, "sqlmargin")
    if r is None:
        return []
    worst, margin = r.get("max_over_s"), _margin()
    return [verdict(f"SQL: a statement ends within the documented timeout margin ({fmt(margin)} s)",
                    None if worst is None else f"largest overshoot {fmt(worst)} s",
                    worst is not None and margin is not None and worst < margin)]
