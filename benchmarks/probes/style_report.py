"""What each style makes of a corpus: padding, documents cut, rows per epoch (diff, concat, packed).

Two corpora:

- ``demo``: the corpus of ``consumer demo`` (:func:`consumer.cli.demo.stdlib_corpus`: files of the Python standard
  library, one class per file type, at most ``--demo-max-files`` per class), ``n_bytes=--demo-n-bytes``;
- ``jsonl``: ``--records`` generated JSONL records (``--shards`` files) whose ``"text"`` field has lognormal lengths
  (``--median`` bytes, ``--sigma``; lowercase words), ``Consumer(glob, documents="jsonl", text_field="text",
  n_bytes=1)``.

For each corpus, seqlen (``--demo-seqlens``, ``--jsonl-seqlens``) and style: ``diff`` with ``long_files="windows"``
and ``"truncate"``, ``concat``, ``packed`` (its default ``"windows"``; ``"truncate"`` too), the figures of the
index (no fetch): padding % (PAD share of all rows' tokens), documents cut % (a document is cut when no row holds it
whole: no segment of it starts at its token 0 with its full length, from ``ds.index`` and
``ds.documents.doc_len``), tokens left out % (truncation), rows per epoch (``len(ds)``), and the build time.

Run: ``python -m benchmarks probe style_report [--records 50000] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time

import numpy as np

from ._styles import index_figures

NAME = "style_report"
DESCRIPTION = "padding %, documents cut %, rows per epoch of diff / concat / packed on the demo and a JSONL corpus"

CONFIGS = (("diff", "windows"), ("diff", "truncate"), ("concat", None), ("packed", "windows"), ("packed", "truncate"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--demo-max-files", type=int, default=200, help="files per class of the demo corpus")
    parser.add_argument("--demo-n-bytes", type=int, default=2, help="bytes per token of the demo corpus")
    parser.add_argument("--demo-seqlens", default="2048,512", help="comma-separated seqlens of the demo corpus")
    parser.add_argument("--records", type=int, default=50_000, help="JSONL records")
    parser.add_argument("--shards", type=int, default=5, help="JSONL files")
    parser.add_argument("--median", type=float, default=800.0, help="median text length in bytes")
    parser.add_argument("--sigma", type=float, default=1.0, help="sigma of the lognormal text lengths")
    parser.add_argument("--jsonl-seqlens", default="2048", help="comma-separated seqlens of the JSONL corpus")
    parser.add_argument("--keep", default=None, help="keep the JSONL corpus and the caches in this directory")
    parser.add_argument("--seed", type=int, default=0, help="seed of the JSONL corpus")


def make_jsonl(root: str, records: int, shards: int, median: float, sigma: float, seed: int) -> tuple[str, dict]:
    """``shards`` JSONL files under ``root`` holding ``records`` records ``{"id": i, "text": ...}`` of lognormal text
    lengths (clipped to [1, 1 MB]); reused when present. The glob of the files and the lengths' figures."""
    tag = f"jsonl_{records}_{shards}_m{median:g}_s{sigma:g}_r{seed}"
    folder = os.path.join(root, tag)
    rng = np.random.default_rng([seed, records])
    lengths = np.clip(np.rint(rng.lognormal(np.log(median), sigma, records)), 1, 1 << 20).astype(np.int64)
    marker = os.path.join(folder, ".complete")
    if not os.path.exists(marker):
        os.makedirs(folder, exist_ok=True)
        words = ["alpha", "beta", "gamma", "delta", "file", "byte", "token", "model", "row", "the", "of", "a", "data"]
        pool = " ".join(rng.choice(words, 1 << 20).tolist())
        pool = pool * (int(lengths.max()) // len(pool) + 2)
        offsets = rng.integers(0, 1 << 16, records)
        per = -(-records // shards)
        for k in range(shards):
            with open(os.path.join(folder, f"shard-{k:03d}.jsonl"), "w", encoding="ascii") as f:
                for i in range(k * per, min((k + 1) * per, records)):
                    o = int(offsets[i])
                    f.write(f'{{"id": {i}, "text": "{pool[o:o + int(lengths[i])]}"}}\n')
        with open(marker, "w", encoding="ascii") as f:
            f.write("ok\n")
    figures = {"records": records, "text_bytes": int(lengths.sum()), "median_bytes": float(np.median(lengths)),
               "mean_bytes": float(lengths.mean()), "p99_bytes": float(np.percentile(lengths, 99))}
    return os.path.join(folder, "*.jsonl"), figures


def _rows(make, seqlens: list[int], label: str) -> list[dict]:
    out = []
    for seqlen in seqlens:
        for style, long_files in CONFIGS:
            t0 = time.perf_counter()
            ds = make(style=style, seqlen=seqlen, long_files=long_files)
            kept = ds.long_files if style != "concat" else None  # concat cuts every document into windows
            row = {"style": style, "long_files": kept, "seqlen": seqlen, **index_figures(ds),
                   "build_s": time.perf_counter() - t0}
            out.append(row)
            print(f"{label:5s} seqlen {seqlen:5d} {style:6s} {kept or '-':8s}: padding {row['padding_pct']:6.2f} %, "
                  f"cut {row['cut_pct']:6.2f} %, left out {row['tokens_left_out_pct']:6.2f} %, "
                  f"{row['rows']:,} rows", file=sys.stderr)
    return out


def run(args: argparse.Namespace) -> dict:
    """Index figures of each (corpus, seqlen, style, long_files)."""
    from consumer import Consumer
    from consumer.cli.demo import stdlib_corpus

    def seqlens(text: str) -> list[int]:
        return [int(x) for x in str(text).split(",") if x]

    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        cache = os.path.join(work, "cache")
        fps = stdlib_corpus(args.demo_max_files)
        demo = {"classes": len(fps), "files": sum(len(v) for v in fps.values()), "n_bytes": args.demo_n_bytes}

        def make_demo(**kw):
            return Consumer(fps, n_bytes=args.demo_n_bytes, cache_dir=cache, **kw)

        demo["table"] = _rows(make_demo, seqlens(args.demo_seqlens), "demo")
        pattern, figures = make_jsonl(os.path.join(work, "data"), args.records, args.shards, args.median,
                                      args.sigma, args.seed)

        def make_jsonl_ds(**kw):
            return Consumer(pattern, documents="jsonl", text_field="text", n_bytes=1, cache_dir=cache, **kw)

        jsonl = {**figures, "files": len(glob.glob(pattern)), "n_bytes": 1,
                 "table": _rows(make_jsonl_ds, seqlens(args.jsonl_seqlens), "jsonl")}
        return {"demo": demo, "jsonl": jsonl}
