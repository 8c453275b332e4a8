"""What a mixture (``consumer.mix``, issue #37) costs over its parts: a batch's fetch and the open.

**Fetch.** The generated ``small`` corpus (``--files`` files of 256 B .. 4 KB, three classes), ``n_bytes=2``, packed
twice (``ds.pack``, read through into the page cache): one store of every file, and ``--parts`` stores of a
``1/parts`` share of the files each (``ds.split`` by file, stratified per class), so both hold the same data.
Opened with ``Consumer.from_packed(prefix, style=--style, seqlen=--seqlen)``: *one store*, and *mixture*:
``consumer.mix`` of the part stores (natural weights: each part by its samples). Every row of every dataset is
fetched once before timing. ``--reps`` repetitions of a batch of ``--batch`` rows, plain query ``fetch_numpy(ids,
None)``: *one store* reads random ids of its own, *mixture random* random global ids of the mixture, *mixture steps*
the ids of the mixture loader's global steps (``m.dataloader(batch).plan``, in order: what its loader fetches).
Timed interleaved (the cases in turn on each repetition, their order rotated) and back to back (each case over all
the repetitions in a run of its own). Then the loaders themselves (``ds.dataloader(batch, query=None)`` and
``m.dataloader(batch, query=None)``, in-process, torch tensors), their ``next()`` interleaved. Mixture ÷ one store is
the median of the per-repetition ratios (target <= 1.10).

**Open.** For each ``--open-samples`` total, ``--open-parts`` Megatron ``.bin/.idx`` stores are written directly
(``IndexedWriter.add_segments``, uint16 ids, documents of 1-15 tokens, seeded: nothing packed) with ``samples /
parts`` rows of ``--open-seqlen`` tokens each in the ``--open-style`` style (short rows: many samples from a small
store). A fresh process opens each part once (``Consumer.from_packed``, the sample index built and cached), then
``--open-repeat`` fresh processes (page cache and index cache warm) each time ``Consumer.from_packed`` of every part
(a warm reopen), ``consumer.mix(parts)`` (and its VmRSS added), ``m.dataloader(batch)`` and the loader's first batch,
and a first ``m.fetch_numpy`` of random ids. ``mix`` reads nothing per sample if its time does not grow with the
samples.

    python -m benchmarks probe mixture_costs [--files 10000] [--reps 100] [--open-samples 100000,1000000]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..children import STATUS, child_json
from ..measure import median
from ._styles import back_to_back, interleaved, read_through, summary, warm_rows, warm_store

NAME = "mixture_costs"
DESCRIPTION = "a mixture of packed stores against one store of the same data (20 x 8192 batch); a mixture's open"

OPEN = STATUS + """
import json, sys, time
import numpy as np
import consumer, torch
prefixes, style, seqlen, cache, batch = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], \\
    int(sys.argv[5])
t0 = time.perf_counter()
import consumer.mixtures  # consumer.mix's module loads on first use: its import is not the open
import_s = time.perf_counter() - t0
base = status("VmRSS")
parts, opens = {}, []
for i, prefix in enumerate(prefixes):
    t0 = time.perf_counter()
    parts[f"part{i}"] = consumer.Consumer.from_packed(prefix, style=style, seqlen=seqlen, cache_dir=cache)
    opens.append(time.perf_counter() - t0)
rss = status("VmRSS")
t0 = time.perf_counter()
m = consumer.mix(parts)
mix_s = time.perf_counter() - t0
mix_rss = status("VmRSS") - rss
t0 = time.perf_counter()
loader = m.dataloader(batch, seed=0, query=None)
loader_s = time.perf_counter() - t0
t0 = time.perf_counter()
first = next(iter(loader))
first_batch_s = time.perf_counter() - t0
ids = np.random.default_rng(0).choice(len(m), batch, replace=False)
t0 = time.perf_counter()
m.fetch_numpy(ids, None)
fetch_s = time.perf_counter() - t0
print(json.dumps({"import_s": import_s, "part_open_s": opens, "opens_s": sum(opens), "mix_s": mix_s,
                  "mix_rss_added": mix_rss, "loader_s": loader_s, "first_batch_s": first_batch_s,
                  "first_fetch_s": fetch_s,
                  "samples": len(m), "part_samples": [len(p) for p in parts.values()],
                  "rss_beyond_imports": status("VmRSS") - base, "batch_shape": list(first["input_array"].shape)}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--files", type=int, default=10_000, help="files of the small corpus (fetch)")
    parser.add_argument("--parts", type=int, default=3, help="part stores of the mixture (fetch)")
    parser.add_argument("--batch", type=int, default=20, help="rows per batch")
    parser.add_argument("--seqlen", type=int, default=8192, help="tokens per row (fetch)")
    parser.add_argument("--style", default="concat", help="style the stores are opened with (fetch)")
    parser.add_argument("--reps", type=int, default=100, help="repetitions (batches) of the fetch")
    parser.add_argument("--loader-reps", type=int, default=None, help="batches of each loader (default: --reps)")
    parser.add_argument("--open-samples", default="100000,1000000", help="comma list of total samples (open); "
                        "empty: no open measured")
    parser.add_argument("--open-parts", type=int, default=3, help="part stores of the mixture (open)")
    parser.add_argument("--open-seqlen", type=int, default=16, help="tokens per row (open)")
    parser.add_argument("--open-style", default="concat", help="style of the stores (open)")
    parser.add_argument("--open-repeat", type=int, default=5, help="fresh processes of warm reopens (open)")
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the corpus and stores (under --dir)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the batches and the open stores")


def _fetch(args: argparse.Namespace, work: str) -> dict:
    """One store against the mixture of the part stores: plain fetch and the loaders (see the module docstring)."""
    import consumer
    from consumer import Consumer

    info, prefix = warm_store(work, "small", args.files, seqlen=args.seqlen)
    names = [f"part{i}" for i in range(args.parts)]
    prefixes = {name: os.path.join(work, f"{os.path.basename(prefix)}_{name}of{args.parts}") for name in names}
    if not all(os.path.exists(p + ".idx") for p in prefixes.values()):
        ds = Consumer(info.root, style="concat", n_bytes=2, seqlen=args.seqlen, cache_dir=os.path.join(work, "cache"))
        for name, part in ds.split({n: 1 / args.parts for n in names}, seed=args.seed).items():
            part.pack(prefixes[name])
    for p in prefixes.values():
        read_through(glob.glob(p + ".*"))
    one = Consumer.from_packed(prefix, style=args.style, seqlen=args.seqlen)
    parts = {name: Consumer.from_packed(p, style=args.style, seqlen=args.seqlen) for name, p in prefixes.items()}
    m = consumer.mix(parts)
    warm_rows(one, args.batch)
    warm_rows(m, args.batch)
    rng = np.random.default_rng(args.seed)
    n = args.reps + 3
    steps = m.dataloader(args.batch, seed=args.seed, query=None).plan.plan
    ids = {"one store": [rng.choice(len(one), args.batch, replace=False) for _ in range(n)],
           "mixture random": [rng.choice(len(m), args.batch, replace=False) for _ in range(n)],
           "mixture steps": [steps.rank_batches(k, k + 1, 0)[0] for k in range(n)]}
    sets = {"one store": one, "mixture random": m, "mixture steps": m}
    cases = {name: (lambda r, name=name: sets[name].fetch_numpy(ids[name][r], None)) for name in sets}
    out: dict = {"files": info.n_files, "corpus_bytes": info.total_bytes, "parts": args.parts, "batch": args.batch,
                 "seqlen": args.seqlen, "style": args.style, "reps": args.reps,
                 "rows": {"one store": len(one), **{name: len(p) for name, p in parts.items()}, "mixture": len(m)},
                 "weights": m.weights}
    for order, timer in (("interleaved", interleaved), ("back_to_back", back_to_back)):
        times = timer(cases, list(range(n)))
        res = out[order] = {"timings": summary(times, "one store")}
        for case in ("mixture random", "mixture steps"):
            res[f"{case.replace(' ', '_')}_over_one"] = res["timings"][case]["ratio"]
        print(f"{order:12s} " + ", ".join(f"{k} {v['median_us']:.0f} µs (x{v['ratio']:.3f})"
                                          for k, v in res["timings"].items()), file=sys.stderr)
    out["loader"] = _loaders(one, m, args)
    return out


def _endless(loader: Any) -> Iterator[Any]:
    """The batches of a loader, epoch after epoch."""
    while True:
        yield from loader


def _loaders(one: Any, m: Any, args: argparse.Namespace) -> dict:
    """``next()`` of each loader in turn (order rotated), in process, plain query: µs per batch and the ratio."""
    reps = args.loader_reps if args.loader_reps is not None else args.reps
    its = {"one store": _endless(one.dataloader(args.batch, seed=args.seed, query=None, drop_last=True)),
           "mixture": _endless(m.dataloader(args.batch, seed=args.seed, query=None))}
    for it in its.values():
        for _ in range(3):
            next(it)
    names = list(its)
    seconds: dict[str, list[float]] = {k: [] for k in names}
    for r in range(reps):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            t0 = time.perf_counter()
            next(its[name])
            seconds[name].append(time.perf_counter() - t0)
    a, b = np.asarray(seconds["mixture"]), np.asarray(seconds["one store"])
    out = {"reps": reps, "timings": {k: {"median_us": median(v) * 1e6, "best_us": float(min(v)) * 1e6}
                                     for k, v in seconds.items()},
           "mixture_over_one": median(a / b) if reps else None}
    if reps:
        print(f"loaders      one store {out['timings']['one store']['median_us']:.0f} µs, mixture "
              f"{out['timings']['mixture']['median_us']:.0f} µs (x{out['mixture_over_one']:.3f})", file=sys.stderr)
    return out


def _write_part(prefix: str, samples: int, seqlen: int, seed: int) -> dict:
    """A ``.bin/.idx`` of documents of 1-15 uint16 ids holding at least ``samples`` rows of ``seqlen`` tokens."""
    from consumer.formats.mmidx import IndexedWriter

    rng = np.random.default_rng(seed)
    need = samples * seqlen + 1  # concat rows: a row needs seqlen tokens (and the next one's first)
    tokens = docs = 0
    with IndexedWriter(prefix, np.uint16) as w:
        while tokens < need:
            m = max(1, min(1 << 22, (need - tokens) // 8 + 1))
            lengths = rng.integers(1, 16, m)
            tokens += int(lengths.sum())
            docs += m
            w.add_segments(rng.integers(0, 50_000, int(lengths.sum()), dtype=np.uint16), lengths,
                           np.ones(m, dtype=bool))
        w.end_document()
    return {"documents": docs, "tokens": tokens, "bin_bytes": os.path.getsize(prefix + ".bin"),
            "idx_bytes": os.path.getsize(prefix + ".idx")}


def _open(args: argparse.Namespace, work: str) -> dict:
    """Each total size: the part stores written, a first open, then warm reopens in fresh processes."""
    out: dict = {"parts": args.open_parts, "seqlen": args.open_seqlen, "style": args.open_style,
                 "repeat": args.open_repeat, "batch": args.batch, "sizes": {}}
    for total in (int(x) for x in str(args.open_samples).split(",") if x):
        folder = os.path.join(work, f"open_{total}")
        os.makedirs(folder, exist_ok=True)
        prefixes = [os.path.join(folder, f"part{i}") for i in range(args.open_parts)]
        stores = [_write_part(p, -(-total // args.open_parts), args.open_seqlen, args.seed + i)
                  for i, p in enumerate(prefixes)]
        cache = os.path.join(folder, "cache")
        argv = [json.dumps(prefixes), args.open_style, str(args.open_seqlen), cache, str(args.batch)]
        first = child_json(["-c", OPEN, *argv])
        again = [child_json(["-c", OPEN, *argv]) for _ in range(args.open_repeat)]
        ok = [r for r in again if "mix_s" in r]
        row: dict = {"stores": stores, "first_open": first, "reopens": again}
        if ok:
            keys = ("import_s", "opens_s", "mix_s", "mix_rss_added", "loader_s", "first_batch_s", "first_fetch_s")
            row["median"] = {k: median([r[k] for r in ok]) for k in keys}
            row["median"]["part_open_s"] = [median([r["part_open_s"][i] for r in ok])
                                            for i in range(args.open_parts)]
            row["samples"] = ok[0]["samples"]
            row["mix_over_opens"] = row["median"]["mix_s"] / row["median"]["opens_s"]
            med = row["median"]
            print(f"open {row['samples']:,} samples in {args.open_parts} parts: opens {med['opens_s'] * 1e3:.2f} ms, "
                  f"mix {med['mix_s'] * 1e3:.3f} ms (+{med['mix_rss_added'] / 2**20:.1f} MiB), loader "
                  f"{med['loader_s'] * 1e3:.1f} ms, first batch {med['first_batch_s'] * 1e3:.1f} ms",
                  file=sys.stderr)
        out["sizes"][str(total)] = row
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    rows = [r for r in out["sizes"].values() if "median" in r]
    if len(rows) >= 2:
        out["mix_growth"] = rows[-1]["median"]["mix_s"] / rows[0]["median"]["mix_s"]
        out["samples_growth"] = rows[-1]["samples"] / rows[0]["samples"]
    return out


def run(args: argparse.Namespace) -> dict:
    """The fetch of a mixture's batch against one store's, and a mixture's open against its parts' opens."""
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="mixture_costs-", dir=args.dir)
    try:
        out = {"fetch": _fetch(args, work) if args.reps > 0 else None}
        out["open"] = _open(args, work) if args.open_samples else None
        return out
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
