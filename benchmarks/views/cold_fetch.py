"""*Cold random fetch* (suite section ``coldfetch``, probe ``cold_fetch``) and *Warm fetch per chunk size*
(section ``warmfetch``, probe ``warm_fetch`` on the stores ``coldfetch`` packed), with their targets."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import get, head, results, verdict

__all__ = ["render_section", "verdicts", "OURS"]

OURS = "consumer-16k"  # the store new packs write (16 KiB chunk sums)

_COLD = ("Each trial drops the store's own pages from the page cache (`posix_fadvise(POSIX_FADV_DONTNEED)` on its "
         "files) before each reader, which then runs in a fresh process that opens the store and fetches the same "
         "random rows, counting the bytes it read from the device (`/proc/self/io` `read_bytes`) per byte served; "
         "every figure is the median over trials, every ratio is to the `pread` floor of the same trial. `pread`: "
         "`os.pread` of exactly each row's byte range (the floor); `mmap`: slices of a `numpy.memmap` of the `.bin`; "
         "`megatron`: megatron-core's `IndexedDataset` reader (an mmap too); `consumer-<C>k`: `from_packed` + "
         "`fetch` on the same `.bin` under sums of C KiB chunks (`0k`: a store packed before chunk sums); "
         "`loader-<C>k`: `ds.dataloader` with worker processes over that store (its own random rows; steady ms "
         "between batches, the first batch apart). Through a memory map each cold random row faults in the "
         "kernel's read-ahead (tens of times the bytes served); the first touch of a chunk with sums is a `preadv` "
         "of just the batch's chunks, checked, then copied from the map whose pages it has just brought in, so at "
         "16 KiB chunks (the default for new stores) a row costs about its own bytes.")
_WARM = ("The store of *Cold random fetch*, in the page cache, under 16 KiB sums (what new packs "
         "write) and under 1 MiB sums (what stores packed before the cold-read work have): a fresh process per "
         "store and round, alternated; each fetches every batch once (chunks verified) then times every "
         "`fetch_numpy` call three more times; the figure is the median call of the best round.")


_SUBS = (("", "Concat rows on chunk boundaries"),
         ("8000", "Rows of 8,000 tokens (most not on a chunk boundary: a row costs at most one chunk more)"),
         ("advise", "No read-ahead and the second epoch: `advise-<C>k` opens the store with `readahead=False` (each "
                    "batch's ranges advised with `POSIX_FADV_WILLNEED`, then copied from the map: the setting of a "
                    "store bigger than memory); `again-<C>k` / `again-advise-<C>k` fetch the batches once (chunks "
                    "verified), evict the store's pages in the process, then time the same batches"))


def _cold(res: dict) -> list[str]:
    out = head("Cold random fetch: a store evicted from the page cache", res, "coldfetch", _COLD)
    for sub, caption in _SUBS:
        r = results(res, "coldfetch", sub)
        if r is None:
            continue
        out += [f"{caption}. Store: {fmt(r.get('store_bytes', 0) / 1e6)} MB of int32 tokens, rows of "
                f"{r.get('seqlen')} tokens; {r.get('batches')} batches of {r.get('batch')} rows per process, "
                f"{r.get('trials')} trials; every fetching reader returned the same rows: {r.get('same_rows')}.", ""]
        rows = []
        for label, e in (r.get("readers") or {}).items():
            ms = fmt(e.get("ms_per_batch"))
            if "first_batch_ms" in e:
                ms += f" (first batch {fmt(e['first_batch_ms'])} ms)"
            rows.append([label, ms, fmt(e.get("x_pread")), fmt(e.get("amplification"))])
        out += table(["reader", "ms per batch", "× `pread` floor", "bytes read per byte served"], rows) + [""]
    return out


def _warm(res: dict) -> list[str]:
    out = head("Warm fetch: 16 KiB chunk sums against 1 MiB", res, "warmfetch", _WARM)
    r = results(res, "warmfetch")
    if r is None:
        return out
    us = r.get("us_per_call") or {}
    after, before = us.get("after") or {}, us.get("before") or {}
    rows = [[b, fmt(before.get(b)), fmt(after.get(b)), fmt(get(r, "after_over_before", b))] for b in after]
    return out + table(["batch", "1 MiB sums (µs / call)", "16 KiB sums (µs / call)", "16 KiB ÷ 1 MiB"], rows) + [""]


def render_section(res: dict) -> list[str]:
    """The report's lines of both sections."""
    return _cold(res) + _warm(res)


def verdicts(res: dict) -> list[dict]:
    """Cold fetch ≤ 1.3× pread with amplification ≤ 2.0; warm fetch at 16 KiB within 5 % of 1 MiB (20, 256 rows)."""
    out = []
    r = results(res, "coldfetch")
    if r is not None:
        e = get(r, "readers", OURS) or {}
        x, amp = e.get("x_pread"), e.get("amplification")
        ok = x is not None and amp is not None and x <= 1.3 and amp <= 2.0
        out.append(verdict(f"cold fetch ≤ 1.3× the pread floor, read amplification ≤ 2.0 (`{OURS}`, coldfetch)",
                           None if x is None or amp is None else f"{fmt(x)}× the floor, {fmt(amp)} bytes read per "
                           "byte served", ok, "" if ok else "see *Cold random fetch*"))
    w = results(res, "warmfetch")
    if w is not None:
        ratios = {b: get(w, "after_over_before", b) for b in ("20", "256")}
        have = {b: v for b, v in ratios.items() if v is not None}
        ok = bool(have) and all(v <= 1.05 for v in have.values())
        out.append(verdict("warm fetch on 16 KiB sums ≤ 1.05× the 1 MiB-sums store (20 and 256 rows)",
                           ", ".join(f"{b} rows {fmt(v)}×" for b, v in have.items()) or None, ok))
    return out
