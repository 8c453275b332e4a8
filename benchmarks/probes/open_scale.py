"""Opening a Megatron ``.bin/.idx`` store of 10^5..10^8 short documents: consumer against megatron-core.

For each ``--docs`` size a store is written directly as ``.bin/.idx`` (``IndexedWriter.add_segments``, uint16 ids,
documents of 1-15 tokens, seeded: no file is packed), then each measurement runs in a fresh process, page cache warm
(the store was just written):

- consumer: ``Consumer.from_packed(prefix, style, seqlen, cache_dir)`` with an empty index cache (the first open
  checks the store, builds the sample index and records both), then ``--repeat`` reopens (the index mapped);
  ``ds.sql(--sql)`` after a reopen;
- megatron-core (in ``--megatron-python``): ``IndexedDataset(prefix)``, then ``GPTDataset`` over all of it
  (``sequence_length`` = the seqlen, one epoch, split ``1,0,0``) with an empty cache folder (its document, sample
  and shuffle indices built and saved), then ``--repeat`` reopens (the indices loaded from that folder).

Each process reports the open's wall time, VmRSS after the open less VmRSS after its imports ("beyond imports"),
its peak (VmHWM, less the same base), and the time of its first item (``ds[k]`` / ``dataset[k]``, ``k`` in the
middle). The SQL process reports the statement's time and the VmRSS it added. ``--baseline ROOT`` measures consumer
imported from another checkout too (e.g. ``git archive`` of an older commit), on the same stores in the same run.
The store is removed after each size (``--keep`` keeps the largest). Ratios (consumer ÷ megatron-core) are taken
from the figures of the one run.

    python -m benchmarks probe open_scale --docs 100000,1000000,10000000,100000000 [--dir DIR] [--baseline ROOT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from ..children import STATUS, child_json

NAME = "open_scale"
DESCRIPTION = "open a .bin/.idx store of 10^5..10^8 documents: consumer against megatron-core, time, RSS, SQL"

CONSUMER = STATUS + """
import json, sys, time
import consumer, torch
base = status("VmRSS")
prefix, style, seqlen, cache, statement = sys.argv[1:6]
t0 = time.perf_counter()
ds = consumer.Consumer.from_packed(prefix, style=style, seqlen=int(seqlen), cache_dir=cache)
t1 = time.perf_counter()
ds[len(ds) // 2]
t2 = time.perf_counter()
out = {"open_s": t1 - t0, "first_item_s": t2 - t1, "rss_beyond_imports": status("VmRSS") - base,
       "peak_beyond_imports": status("VmHWM") - base, "samples": len(ds), "index": ds.build_info.get("index")}
if statement:
    before = status("VmRSS")
    t3 = time.perf_counter()
    out["answer"] = [list(r) for r in ds.sql(statement)]
    out["sql_s"] = time.perf_counter() - t3
    out["sql_rss_added"] = status("VmRSS") - before
print(json.dumps(out))
"""

MEGATRON = STATUS + """
import json, logging, sys, time, types, warnings
warnings.simplefilter("ignore")
import numpy as np, torch
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
from megatron.core.datasets.indexed_dataset import IndexedDataset
from megatron.core.datasets.utils import Split
logging.getLogger("megatron").setLevel(logging.WARNING)
prefix, seqlen, cache = sys.argv[1:4]
base = status("VmRSS")
t0 = time.perf_counter()
ix = IndexedDataset(prefix)
t1 = time.perf_counter()
ix[len(ix) // 2]
t2 = time.perf_counter()
out = {"indexed": {"open_s": t1 - t0, "first_item_s": t2 - t1, "rss_beyond_imports": status("VmRSS") - base}}
tok = types.SimpleNamespace(eod=0, pad=1, vocab_size=None, unique_identifiers={"class": "ids", "eod": 0, "pad": 1})
config = GPTDatasetConfig(random_seed=1234, sequence_length=int(seqlen), split="1,0,0", tokenizer=tok,
                          path_to_cache=cache, create_attention_mask=False, reset_position_ids=False,
                          reset_attention_mask=False, eod_mask_loss=False)
t3 = time.perf_counter()
gpt = GPTDataset(ix, prefix, np.arange(len(ix), dtype=np.int32), None, Split.train, config)
t4 = time.perf_counter()
gpt[len(gpt) // 2]
t5 = time.perf_counter()
out["gpt"] = {"open_s": t4 - t0, "build_s": t4 - t3, "first_item_s": t5 - t4,
              "rss_beyond_imports": status("VmRSS") - base, "peak_beyond_imports": status("VmHWM") - base,
              "samples": len(gpt)}
print(json.dumps(out))
"""


def write_store(prefix: str, n: int, seed: int = 0, chunk: int = 1 << 22) -> dict:
    """A Megatron ``.bin/.idx`` of ``n`` documents of 1-15 uint16 ids (one sequence each), ``chunk`` at a time."""
    from consumer.formats.mmidx import IndexedWriter

    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    tokens = 0
    with IndexedWriter(prefix, np.uint16) as w:
        for lo in range(0, n, chunk):
            m = min(chunk, n - lo)
            lengths = rng.integers(1, 16, m)
            tokens += int(lengths.sum())
            w.add_segments(rng.integers(0, 50_000, int(lengths.sum()), dtype=np.uint16), lengths,
                           np.ones(m, dtype=bool))
        w.end_document()
    return {"documents": n, "tokens": tokens, "write_s": time.perf_counter() - t0,
            "bin_bytes": os.path.getsize(prefix + ".bin"), "idx_bytes": os.path.getsize(prefix + ".idx")}


def _child(python: str, script: str, argv: list[str], root: str | None = None) -> dict:
    return child_json(["-c", script, *argv], python=python, front=root)


def _best(runs: list[dict], key: str = "open_s") -> dict:
    ok = [r for r in runs if key in r]
    return min(ok, key=lambda r: r[key]) if ok else (runs[0] if runs else {})


def _consumer(prefix: str, work: str, args: argparse.Namespace, root: str | None = None) -> dict:
    """First open, reopens and the statement, each in a fresh process (``root``: a checkout to import consumer
    from, for a baseline)."""
    style, seqlen = args.style, str(args.seqlen)
    cache = os.path.join(work, "consumer-cache")
    shutil.rmtree(cache, ignore_errors=True)
    argv = [prefix, style, seqlen, cache]
    first = _child(sys.executable, CONSUMER, [*argv, ""], root)
    again = [_child(sys.executable, CONSUMER, [*argv, ""], root) for _ in range(args.repeat)]
    sql = [_child(sys.executable, CONSUMER, [*argv, args.sql], root) for _ in range(args.repeat)]
    shutil.rmtree(cache, ignore_errors=True)
    return {"first_open": first, "reopen_best": _best(again), "reopens_s": [r.get("open_s") for r in again],
            "sql_best": _best(sql, "sql_s"), "sql_s": [r.get("sql_s") for r in sql]}


def _megatron(prefix: str, work: str, args: argparse.Namespace) -> dict:
    cache = os.path.join(work, "megatron-cache")
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    first = _child(args.megatron_python, MEGATRON, [prefix, str(args.seqlen), cache])
    again = [_child(args.megatron_python, MEGATRON, [prefix, str(args.seqlen), cache]) for _ in range(args.repeat)]
    shutil.rmtree(cache, ignore_errors=True)
    ok = [r for r in again if "gpt" in r]
    return {"first_open": first, "reopen_best": min(ok, key=lambda r: r["gpt"]["open_s"]) if ok else
            (again[0] if again else {}), "reopens_s": [r.get("gpt", {}).get("open_s") for r in again]}


def _ratios(ours: dict, theirs: dict) -> dict:
    """consumer ÷ megatron-core, from the figures of this one run (None where either is missing)."""
    def div(a, b):
        return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else None

    first, gpt_first = ours.get("first_open", {}), theirs.get("first_open", {}).get("gpt", {})
    again, gpt_again = ours.get("reopen_best", {}), theirs.get("reopen_best", {}).get("gpt", {})
    return {"first_open_vs_gpt_build": div(first.get("open_s"), gpt_first.get("open_s")),
            "first_peak_vs_gpt_build": div(first.get("peak_beyond_imports"), gpt_first.get("peak_beyond_imports")),
            "reopen_vs_gpt_reopen": div(again.get("open_s"), gpt_again.get("open_s")),
            "reopen_rss_vs_gpt_reopen": div(again.get("rss_beyond_imports"), gpt_again.get("rss_beyond_imports"))}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--docs", default="100000,1000000,10000000,100000000",
                        help="comma list of store sizes (documents)")
    parser.add_argument("--style", default="concat", help="consumer's style (concat: rows like GPTDataset's)")
    parser.add_argument("--seqlen", type=int, default=2048, help="row length, both systems")
    parser.add_argument("--repeat", type=int, default=2, help="reopens per system (the best is reported)")
    parser.add_argument("--sql", default="SELECT count(*), sum(length) FROM documents",
                        help="the statement timed after a reopen")
    parser.add_argument("--megatron-python", default=sys.executable,
                        help="interpreter with megatron-core (default: this one)")
    parser.add_argument("--skip-megatron", action="store_true", help="measure consumer only")
    parser.add_argument("--baseline", default=None, metavar="ROOT",
                        help="also measure consumer imported from this checkout (e.g. an older commit)")
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the stores (under --dir)")


def run(args: argparse.Namespace) -> dict:
    """Write each store, measure both systems on it, remove it."""
    sizes = [int(x) for x in str(args.docs).split(",") if x]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"--docs expects a comma list of positive sizes, got {args.docs!r}")
    out: dict = {"style": args.style, "seqlen": args.seqlen, "statement": args.sql, "baseline": args.baseline,
                 "sizes": {}}
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="open_scale-", dir=args.dir)
    try:
        for n in sizes:
            prefix = os.path.join(work, f"store{n}")
            row: dict = {"store": write_store(prefix, n)}
            row["consumer"] = _consumer(prefix, work, args)
            if args.baseline:
                row["baseline"] = _consumer(prefix, work, args, os.path.abspath(args.baseline))
            if not args.skip_megatron:
                row["megatron"] = _megatron(prefix, work, args)
                row["ratios"] = _ratios(row["consumer"], row["megatron"])
            out["sizes"][str(n)] = row
            print(f"{n:,} documents: " + json.dumps({k: row.get(k) for k in ("store", "ratios")}), file=sys.stderr)
            if not (args.keep and n == max(sizes)):
                for suffix in (".bin", ".idx"):
                    os.remove(prefix + suffix)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return out
