"""The *Fetch on the same bytes* section (suite section ``workloads``) and its targets."""

from __future__ import annotations

from ..markdown import GPERC, fmt, ms_of, ratio, si, table

__all__ = ["render_section", "verdicts"]


_SYSTEM_NOTES = {
    "consumer raw": "`ds.fetch(ids)` reading the files (no header: same rows as the peers)",
    "consumer raw +header": "`ds.fetch(ids)` with libmagic headers (what gperc does; rows differ)",
    "consumer packed": "`Consumer.from_packed(.bin/.idx)` then `ds.fetch(ids)`",
    "naive reader": "open/seek/read/frombuffer/pad per file (diff) or per file a window spans (concat)",
    "gperc 0.7": "`x[[ids]]`; builds its own rows (path in header), checked for shape only",
    "HF datasets (numpy)": "`ds.with_format('numpy')[ids]` over an Arrow token column, padded",
    "HF datasets (torch)": "`ds.with_format('torch')[ids]`, padded",
    "Megatron IndexedDataset": "`IndexedDataset.get(doc, offset, length)` per piece, padded",
    "Megatron GPTDataset": "`GPTDataset[i]` (tokens + last label), stacked",
    "litdata": "`StreamingDataset[i]` (random access, outside its loader) after `litdata.optimize`, padded",
    "mosaic streaming": "`StreamingDataset.get_item(i)` over MDS shards, padded",
    "memcpy (limit)": "`np.copyto` of a hot B × L int64 batch",
    "DRAM gather (limit)": "B random row slices of the store into a preallocated int64 batch",
}


def render_section(res: dict) -> list[str]:
    """The report's markdown lines of this section (none when it did not run)."""
    wl = res.get("workloads", {})
    if not wl:
        return []
    out = ["## Fetch on the same bytes", "",
           f"Random batches (seeded permutations) of `n_bytes={2}`, `seqlen=8192` rows, query `None` "
           "(`input_array`, int64 `[B, L]`), delivered to the caller. *rows = ours*: the rows' sha256 equals "
           "`consumer raw`'s for the first batches of the run. Peers read the `.bin/.idx` store `consumer` packed "
           "(the same tokens) after their own convert step, timed below. `tokens/s` counts real (non-PAD) tokens.",
           ""]
    out += table(["system", "what is timed"], [[k, v] for k, v in _SYSTEM_NOTES.items()]) + [""]
    for key, w in wl.items():
        c = w.get("corpus")
        title = f"### {key}: {w.get('style', 'concat, Megatron GPT order')}"
        out += [title, ""]
        if c:
            out += [f"{c['files']:,} files, {c['bytes'] / 1e6:.1f} MB, classes {c['classes']}; "
                    f"{w['samples']:,} samples.", ""]
        else:
            out += [f"Megatron's GPT sample order (`sampling=\"megatron\"`, seed 1234): {w['samples']:,} samples of "
                    f"{w['seqlen']} tokens (`seq_length` + 1).", ""]
        b = "20" if "20" in w["batch"] else min(w["batch"], key=int)
        bb = w["batch"][b]
        ref = ms_of(w, b, "consumer raw")
        rows = []
        for label, row in bb["systems"].items():
            ms = row["median_s"] * 1e3 if row.get("per_rep") else None
            eq = row.get("equal_rows")
            rows.append([label, fmt(ms, 3), si(int(b) / ms * 1e3) if ms else "—",
                         si(bb["real_tokens_per_batch"] / ms * 1e3) if ms else "—",
                         f"{ms / ref:.2f}" if ms and ref else "—",
                         {True: "yes", False: "**no**", None: "—"}[eq] if not row.get("error") else
                         f"error: {row['error'][:80]}"])
        out += [f"Batch of {b}:", ""]
        out += table(["system", "ms / batch", "samples/s", "tokens/s", "time ÷ consumer raw", "rows = ours"], rows)
        sizes = sorted(w["batch"], key=int)
        if len(sizes) > 1:
            labels = list(w["batch"][sizes[-1]]["systems"])
            rows = []
            for label in labels:
                cells = [label]
                for s_ in sizes:
                    ms = ms_of(w, s_, label)
                    cells.append(si(int(s_) / ms * 1e3) if ms else "—")
                rows.append(cells)
            out += ["", "Samples/s by batch size:", ""]
            out += table(["system"] + [f"B={s_}" for s_ in sizes], rows)
        conv = w.get("convert", {})
        if conv:
            out += ["", "Set-up / convert steps (seconds): " + "; ".join(
                f"{k} {fmt(v)}" for k, v in conv.items() if v is not None) + ". (The consumer builds of a run share "
                "one catalog, so libmagic runs only for files it has not described yet; cold builds are measured "
                "in *Build and reopen*.)"]
        out += [""]
    return out


def verdicts(res: dict) -> list[dict]:
    """Fetch against gperc (with headers) and against the naive reader."""
    if not res.get("workloads"):  # the section did not run: its targets are not in this report
        return []
    out: list[dict] = []
    wl = res.get("workloads", {})
    b = "20"

    # fetch >= 100x gperc
    ratios = {}
    for key, w in wl.items():
        g = ms_of(w, b, GPERC)
        ours = ms_of(w, b, "consumer raw +header")
        if g and ours:
            ratios[key] = g / ours
    if ratios:
        worst = min(ratios, key=ratios.get)
        out.append({"target": "fetch ≥ 100× gperc 0.7 everywhere (raw files, with headers, 20 × 8192)",
                    "figure": ", ".join(f"{k} {v:,.0f}×" for k, v in ratios.items()), "met": ratios[worst] >= 100,
                    "why": f"lowest: {worst}"})
    else:
        out.append({"target": "fetch ≥ 100× gperc 0.7", "figure": "—", "met": None,
                    "why": res["peers"].get("gperc", {}).get("reason", "gperc not measured")})

    w = wl.get("small-diff")  # a floor, not a target: a one-file row is one open/read/close plus two fstats
    r = ratio(ms_of(w, b, "naive reader"), ms_of(w, b, "consumer raw")) if w else None
    out.append({"target": "floor: a raw one-file row (diff) stays near a naive open/read/close",
                "figure": f"{fmt(r)}× the naive reader's speed (small files)" if r else "—",
                "met": "floor" if r else None,
                "why": "the version checks cost two `fstat`s per file (before and after the read), on top of the "
                       "naive reader's open, read and close"})
    w = wl.get("small-concat")
    r = ratio(ms_of(w, b, "naive reader"), ms_of(w, b, "consumer raw")) if w else None
    other = wl.get("lognormal-concat")
    r2 = ratio(ms_of(other, b, "naive reader"), ms_of(other, b, "consumer raw")) if other else None
    extra = f"; log-normal corpus {r2:.2f}×" if r2 else ""
    out.append({"target": "raw concat fetch ≥ 3× the naive reader", "figure": f"{fmt(r)}× (small files){extra}"
                if r else "—", "met": (r >= 3.0) if r else None,
                "why": "" if r is None or r >= 3.0 else
                "a raw fetch pays five system calls per file (open, fstat for the catalog check, preadv, fstat "
                "after the read for a write while it ran, close), the byte-order conversion and the output write; "
                "the naive reader pays the same reads. A ratio of wall times: on a loaded machine the naive "
                "reader's longer calls are preempted more often, which raises it"})
    return out
