"""*The content pass on a large file against its floor* (suite section ``contentfloor``, probe ``content_floor``)
and *Two floors* (section ``floors``: probes ``raw_row_floor`` and ``libmagic_floor``), with their targets."""

from __future__ import annotations

from ..markdown import fmt, table
from .probe_doc import get, head, results, verdict

__all__ = ["render_section", "verdicts"]

_CONTENT = ("One buffer of random bytes (and a file holding it, page cache warm), best of interleaved rounds, GB/s. "
            "The floor the issue set is read + sha256 + `bincount` over byte pairs; *floor with the fastest "
            "histogram* takes the faster of that and Pillow's `Image.histogram` over the bytes as an 8-bit image "
            "sharing the buffer (no int64 copy, as `np.bincount` makes), the kernel "
            "`consumer/catalog/histogram.py` uses when Pillow is installed (the numpy pair count is the fallback).")
_FLOORS = ("Two measured limits. *A raw one-file row*: `ds.fetch_numpy([i])` of a `diff` row (n_bytes=1, seqlen "
           "4096, no header) against `os.open` + `os.read` + `os.close` and the same padded int64 row made by hand, "
           "and the same naive read with the two `fstat`s of the version check (a file changed or replaced since "
           "the build is never served), µs per row, best of interleaved rounds. *The cold build with headers*: "
           "`Consumer(root, metadata=\"file\")` with an empty cache in a fresh process against `describe_files` "
           "alone over the same paths in a fresh process; libmagic's CPU per file on one thread.")
_GBPS = (("read", "read"), ("sha256", "sha256"), ("`bincount` bytes", "bincount_bytes"),
         ("`bincount` pairs", "bincount_pairs"), ("Pillow `histogram`", "pillow"),
         ("floor (read + sha256 + pairs)", "floor_numpy"), ("floor with the fastest histogram", "floor"),
         ("pass, numpy kernel", "pass_numpy"), ("pass, default kernel", "pass"))


def render_section(res: dict) -> list[str]:
    """The report's lines of both sections."""
    out = head("The content pass on a large file against its floor", res, "contentfloor", _CONTENT)
    c = results(res, "contentfloor")
    if c is not None:
        g = c.get("gb_per_s") or {}
        out += [f"{c.get('mib')} MiB:", ""] + table([t for t, _ in _GBPS], [[fmt(g.get(k), 3) for _, k in _GBPS]])
        out += ["", f"The pass against the issue's floor: {fmt(g.get('pass_vs_floor_numpy'))}; against the floor "
                f"with the fastest histogram: {fmt(g.get('pass_vs_floor'))}.", ""]
    out += head("Two floors", res, "floors", _FLOORS)
    raw, magic = results(res, "floors", "raw_row"), results(res, "floors", "libmagic")
    if raw is not None:
        us = raw.get("us_per_row") or {}
        out += [f"- **A raw one-file row** ({raw.get('files', 0):,} files), µs per row: consumer "
                f"{fmt(us.get('consumer'))}, naive {fmt(us.get('naive'))}, naive with the two `fstat`s "
                f"{fmt(us.get('naive_two_fstats'))}. The two `fstat`s cost {fmt(raw.get('two_fstats_vs_naive'))}× the "
                f"naive read; consumer is {fmt(raw.get('consumer_vs_naive_two_fstats'))}× the naive read with them."]
    if magic is not None:
        out += [f"- **The cold build with headers** ({magic.get('files', 0):,} files): build "
                f"{fmt(magic.get('build_s'))} s, libmagic alone {fmt(magic.get('libmagic_s'))} s "
                f"({fmt(magic.get('build_vs_libmagic'))}×); libmagic costs {fmt(magic.get('libmagic_us_per_file'))} "
                "µs of CPU per file on one thread."]
    return out + [""]


def verdicts(res: dict) -> list[dict]:
    """The content pass ≥ 0.8 of its floor; the two floors as measured limits."""
    out = []
    c = results(res, "contentfloor")
    if c is not None:
        x = get(c, "gb_per_s", "pass_vs_floor_numpy")
        out.append(verdict("content pass on a large file ≥ 0.8 of read + sha256 + byte-pair histogram",
                           None if x is None else f"{fmt(x)} of the floor ({fmt(get(c, 'gb_per_s', 'pass'), 3)} GB/s)",
                           x is not None and x >= 0.8))
    raw, magic = results(res, "floors", "raw_row"), results(res, "floors", "libmagic")
    if raw is not None:
        x = raw.get("consumer_vs_naive_two_fstats")
        out.append(verdict("floor: a raw one-file row costs a naive read plus the version check's two `fstat`s",
                           None if x is None else f"{fmt(x)}× the naive read with two `fstat`s", "floor"))
    if magic is not None:
        x = magic.get("build_vs_libmagic")
        out.append(verdict("floor: the cold build with headers costs what libmagic costs",
                           None if x is None else f"build {fmt(x)}× libmagic alone", "floor"))
    return out
