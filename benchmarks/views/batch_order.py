"""*The one batch order* (suite section ``batchorder``, probe ``batch_order``)."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import head, results

__all__ = ["render_section", "verdicts"]

_INTRO = ("One epoch in batches, as `create_batches`/`get_next_batch` and the loader both compute it, against "
          "its floor: one `numpy` permutation cut into batches (what 0.2's cursor did). Best of the repetitions; "
          "ratios to the floor measured in the same run. An epoch's order is computed once per epoch (the cursor "
          "and the loader's sampler keep it), so per batch it is the floor's cost divided by the batches of an "
          "epoch. The token-budget build is fairseq's `batch_by_size` over the length-sorted samples, as 0.2's "
          "`create_token_batches` did once too.")

_ROWS = (("natural (`shuffle=True`)", "natural"), ("rank 1 of 2", "rank_1_of_2"),
         ("`balance=\"uniform\"` over 8 classes", "balanced"),
         ("token budget (`max_tokens=16384`): the batches, built once per plan", "token_budget_build"),
         ("token budget: an epoch's order of those batches", "token_budget"))


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("The one batch order: an epoch plan against a bare permutation", res, "batchorder", _INTRO)
    r = results(res, "batchorder")
    if r is None:
        return out
    out += [f"{r.get('samples', 0):,} samples in batches of {r.get('batch_size')}.", ""]
    rows = [["floor: a permutation cut into batches", fmt(r.get("floor_s"), 3), "1.00"]]
    rows += [[label, fmt(r.get(f"{key}_s"), 3), fmt(r.get(f"{key}_vs_floor"))] for label, key in _ROWS]
    return out + table(["order of one epoch", "seconds", "vs the floor"], rows) + [""]


def verdicts(res: dict) -> list[dict]:
    """No target: the floor is what the figures are read against."""
    return []
