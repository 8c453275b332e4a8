"""The *consumer across settings* section (suite section ``grid``)."""

from __future__ import annotations

from ..markdown import fmt, si, table

__all__ = ["render_section", "verdicts"]


def render_section(res: dict) -> list[str]:
    """The report's markdown lines of this section (none when it did not run)."""
    g = res.get("grid")
    if not g:
        return []
    out = ["## consumer across settings", "",
           "Small-files corpus with libmagic headers, random batches, `ds.fetch(ids, query)` (torch tensors); "
           "`supervised`: input + class, `mlm`: masked input, attention mask, labels. tokens/s counts real tokens.",
           ""]
    rows = [[r["source"], r["style"], str(r["n_bytes"]), str(r["seqlen"]), str(r["batch"]), r["query"],
             fmt(r["ms"], 3), si(r["samples_per_s"]), si(r["tokens_per_s"])] for r in g]
    out += table(["source", "style", "n_bytes", "seqlen", "batch", "query", "ms / batch", "samples/s", "tokens/s"],
                  rows) + [""]
    return out


def verdicts(res: dict) -> list[dict]:
    """This section has no target of its own."""
    return []
