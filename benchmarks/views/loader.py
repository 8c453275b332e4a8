"""The *Loaders* section (suite section ``loader``) and its targets."""

from __future__ import annotations

from ..markdown import OURS_LOADER, PEER_LOADERS, TRANSPORT, fmt, table

__all__ = ["render_section", "verdicts"]


def render_section(res: dict) -> list[str]:
    """The report's markdown lines of this section (none when it did not run)."""
    ld = res.get("loader")
    if not ld:
        return []
    b, L = ld["batch"], ld["seqlen"]
    out = ["## Loaders: what reaches the training loop", "",
           f"Packed diff store of the small-files corpus, batches of {b} × {L} int64 ({b * L * 8 / 1e6:.1f} MB), "
           f"{ld['batches']} batches after the first, per worker count; batches/s (median over repetitions; "
           f"× {b} for samples/s, × {b * L:,} for row tokens/s). "
           "*first batch*: seconds until the first batch (worker start-up). "
           "The transport row is torch's DataLoader moving batches that cost one memcpy each: no loader built on "
           "torch's worker transport can beat it. `ds.dataloader` with workers hands batches over through its own "
           "shared-memory ring (no allocation, no pickling per batch); the *copied out* row adds a copy of every "
           "batch into fresh tensors in the loop, the *transport='torch'* row uses torch's workers.", ""]
    workers = sorted({w for v in ld["systems"].values() for w in v}, key=int)
    rows = []
    for label, per_w in ld["systems"].items():
        cells = [label + (f" ({ld['notes'][label]})" if label in ld.get("notes", {}) else "")]
        for w in workers:
            v = per_w.get(w)
            cells.append(f"{fmt(v['batches_per_s'])} ({fmt(v['first_batch_s'], 2)} s)" if v else "—")
        rows.append(cells)
    for label, why in ld.get("absent", {}).items():
        rows.append([label] + [why] + ["—"] * (len(workers) - 1))
    for label, why in ld.get("errors", {}).items():
        rows.append([label + " (failed)"] + [why[:120]] + ["—"] * (len(workers) - 1))
    out += table(["system"] + [f"{w} workers: batches/s (first batch)" for w in workers], rows) + [""]
    return out


def verdicts(res: dict) -> list[dict]:
    """The loader against the peer loaders and against torch's transport."""
    if not res.get("loader"):  # the section did not run: its targets are not in this report
        return []
    out: list[dict] = []
    ld = res.get("loader", {})
    sysl = ld.get("systems", {})
    if OURS_LOADER in sysl:
        behind, ratios2 = [], []
        for w, v in sysl[OURS_LOADER].items():
            for peer in PEER_LOADERS:
                p = sysl.get(peer, {}).get(w)
                if p and p["batches_per_s"] >= v["batches_per_s"]:
                    behind.append(f"{peer} at {w} workers")
            t = sysl.get(TRANSPORT, {}).get(w)
            if t and w != "0":
                ratios2.append(v["batches_per_s"] / t["batches_per_s"])
        out.append({"target": "loader ahead of every peer loader (same store, same workers)",
                    "figure": "behind: " + ", ".join(behind) if behind else "ahead everywhere measured",
                    "met": not behind, "why": ""})
        r = min(ratios2) if ratios2 else None
        out.append({"target": "loader ≥ 2× torch's default worker transport (1.3 MB batches, 1-2 workers)",
                    "figure": f"{fmt(r)}×" if r else "—", "met": (r >= 2) if r else None, "why": ""})
    else:
        why = ld.get("absent", {}).get(OURS_LOADER, "loader section not run")
        out.append({"target": "loader ahead of every peer loader (same store, same workers)", "figure": "—",
                    "met": False, "why": why})
        out.append({"target": "loader ≥ 2× torch's default worker transport", "figure": "—", "met": False,
                    "why": why})

    return out
