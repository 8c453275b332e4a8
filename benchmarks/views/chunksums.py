"""*Packed store chunk checksums* (suite section ``chunksums``, probe ``chunksums``) and its targets."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import get, head, results, verdict

__all__ = ["render_section", "verdicts"]

_INTRO = ("Packs the given MiB of random files (no headers, `n_bytes=2`) into a Megatron store with chunk sums, and "
          "a twin without them (the same `.bin` hard-linked, the sidecar without its `chunksums` field: a store as "
          "packed before chunk sums, which the fetch serves with its other checks only). Every ratio compares "
          "figures taken in the same process, interleaved, best of the repetitions' medians. The choice of CRC-32C "
          "over XXH3-64 is not about speed (both are far above the 2 GB/s per core needed; see "
          "[packed-checksums.md](packed-checksums.md#why-crc-32c-16-kib)).")


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Packed store chunk checksums", res, "chunksums", _INTRO)
    r = results(res, "chunksums")
    if r is None:
        return out
    chunk = f"{r['chunk_kib']} KiB" if "chunk_kib" in r else f"{r.get('chunk_mib', '—')} MiB"
    out += [f"Store: {fmt(r.get('store_mib'))} MiB of int32 tokens, {r.get('files', 0):,} files, chunks of "
            f"{chunk}.", "",
            "**Checksum algorithms** on the same in-memory bytes (one thread):", ""]
    out += table(["algorithm", "GB/s per core"], [[k, fmt(v)] for k, v in (r.get("algorithms_gbps") or {}).items()])
    ft = r.get("first_touch") or {}
    out += ["", "**First touch** (page cache hot, one thread; target ≥ 2 GB/s per core):", ""]
    out += table(["what", "figure"], [
        ["a fresh verifier over the whole memory-mapped store", f"{fmt(ft.get('verifier_gbps'))} GB/s"],
        ["one pass of fetches over every sample of a freshly opened store (batches of 64): with sums / without",
         f"{fmt(ft.get('first_pass_with_s'), 3)} s / {fmt(ft.get('first_pass_without_s'), 3)} s: the verification "
         f"runs at {fmt(ft.get('first_pass_verify_gbps'))} GB/s"]])
    out += ["", "**After the first touch** (target: under 5 % on a hot-cache fetch). *Every chunk verified*: the "
            "verifier returns after one comparison. *All but one chunk verified*: the batches avoid the samples of "
            "the last chunk, so every batch looks its chunks up in the map (the steady state while a large store "
            "is read for the first time). Differences within ±2 % are noise.", ""]
    rows = [[a.get("case", ""), f"`{a.get('call', '')}`", str(a.get("batch")), fmt(a.get("with_ms"), 3),
             fmt(a.get("without_ms"), 3), f"{100 * a['overhead']:+.1f}%" if "overhead" in a else "—"]
            for a in r.get("after_first_touch") or []]
    return out + table(["state", "call", "batch", "with sums (ms)", "without (ms)", "overhead"], rows) + [""]


def verdicts(res: dict) -> list[dict]:
    """First touch ≥ 2 GB/s per core; fetch overhead after it under 5 %."""
    r = results(res, "chunksums")
    if r is None:
        return []
    gbps = get(r, "first_touch", "verifier_gbps")
    out = [verdict("chunk sums: first-touch verification ≥ 2 GB/s per core",
                   None if gbps is None else f"{fmt(gbps)} GB/s", gbps is not None and gbps >= 2)]
    after = r.get("after_first_touch") or []
    for case in dict.fromkeys(a.get("case") for a in after):
        worst = max((a for a in after if a.get("case") == case), key=lambda a: a.get("overhead", 0))
        ok = worst.get("overhead", 1) < 0.05
        out.append(verdict(f"chunk sums: hot fetch overhead < 5 % ({case})",
                           f"worst {100 * worst.get('overhead', 0):+.1f}% (batch {worst.get('batch')}, "
                           f"`{worst.get('call')}`)", ok,
                           "" if ok else "a fixed cost per batch (the chunk map's lookup) weighs most on the "
                           "cheapest batches; differences within ±2 % are noise"))
    return out
