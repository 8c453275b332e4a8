"""*Small batches through the public API* (suite section ``smallbatches``, probe ``small_batches``) and its target."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import get, head, results, verdict

__all__ = ["render_section", "verdicts"]

_INTRO = ("One concat row per call from a warm packed store, readers interleaved round by round on the same random "
          "ids, the median call of the best round; megatron-core's `IndexedDataset.get` of the same tokens copied "
          "into a preallocated int64 row is the reference (a trainer needs int64). `ds[i]`, `ds.fetch([i])` and "
          "`ds.fetch(array of one int64)` of the default query take a per-dataset one-row plan "
          "(`consumer/fetch/one_row.py`): a call checks the key, one `fstat` of the data file held open (what "
          "refuses a store rewritten in place), the chunk sums of the row's chunks not yet verified, then one "
          "converting copy and `torch.from_numpy`; anything else goes the general way, with the same rows and errors.")
_MEGATRON = "megatron get -> int64 row"


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Small batches through the public API", res, "smallbatches", _INTRO)
    r = results(res, "smallbatches")
    if r is None:
        return out
    out += [f"Rows of {r.get('seqlen')} tokens, {r.get('calls', 0):,} calls per reader per round, "
            f"{r.get('rounds')} rounds.", ""]
    rows = [[f"`{k}`", fmt(v), fmt(get(r, "x_megatron", k))] for k, v in (r.get("us_per_call") or {}).items()]
    return out + table(["call", "µs per call", "× megatron"], rows) + [""]


_ARRAY = "np.array([i]) alone"


def verdicts(res: dict) -> list[dict]:
    """``ds[i]``, ``ds.fetch([i])`` and ``ds.fetch(array)`` each ≤ 1.5× megatron-core's get (#27: a list costs
    what an array costs, the fixed path ≤ 1.5× Megatron's)."""
    r = results(res, "smallbatches")
    if r is None:
        return []
    why = "megatron's `get` hands out a view; ours checks the file (`fstat`) and builds a tensor"
    out = []
    for call, shown in (("ds[i]", "`ds[i]`"), ("ds.fetch([i]) list", "`ds.fetch([i])`"),
                        ("ds.fetch(array) numpy", "`ds.fetch(np.array([i]))`")):
        x = get(r, "x_megatron", call)
        figure = None if x is None else (f"{fmt(x)}× ({fmt(get(r, 'us_per_call', call))} µs vs "
                                         f"{fmt(get(r, 'us_per_call', _MEGATRON))} µs)")
        if call == "ds.fetch(array) numpy" and x is not None:
            figure += f"; building `np.array([i])` in the timed call is {fmt(get(r, 'x_megatron', _ARRAY))}× of it"
        met = x is not None and x <= 1.5
        out.append(verdict(f"small batches: {shown} ≤ 1.5× megatron-core's `get` (one row)", figure, met,
                           "" if met else (why if x is not None else "megatron-core not installed")))
    return out
