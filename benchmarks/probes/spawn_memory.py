"""Memory of ``spawn`` loader workers over a mapped store: what N workers add, against one process's own memory.

A file of ``--docs`` one-line documents is packed as a Megatron store and opened once, as a first run would (its
index cached, the files' fingerprint recorded). Then a fresh child opens it again (a reopen: the index mapped),
records its proportional and unique memory (PSS and USS, ``/proc/<pid>/smaps_rollup``), makes
``ds.dataloader(--batch, num_workers=--workers, multiprocessing_context="spawn", persistent_workers=True)``, takes
``--batches`` batches, and records every worker's PSS, USS and anonymous memory, and its own. The figure to watch
is ``workers_anon_over_main_anon``: the workers' heap (anonymous memory: private, their interpreters and imports
included) in total, against the main process's before the loader (the target: at most 1.3). A third child only
imports consumer and torch, for scale. Pages the processes map from the same files (the store, the index entry)
are the page cache, shared and reclaimable: PSS splits each page between the processes mapping it
(``workers_file_pss``; the kernel's read-around maps more of the store than the rows read).

    python -m benchmarks probe spawn_memory --docs 10000000 [--workers 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

NAME = "spawn_memory"
DESCRIPTION = "what spawn loader workers add to memory (heap, mapped pages) over a mapped store, against one process"

CHILD = r"""
import json, os, sys, time

def rollup(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            p = line.split()
            if p[0] in ("Rss:", "Pss:", "Private_Clean:", "Private_Dirty:", "Anonymous:"):
                out[p[0][:-1]] = int(p[1]) * 1024
    return {"rss": out["Rss"], "pss": out["Pss"], "uss": out["Private_Clean"] + out["Private_Dirty"],
            "anon": out["Anonymous"]}

def workers(pid):
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            kids += [int(k) for k in f.read().split()]
    def spawned(k):
        with open(f"/proc/{k}/cmdline", "rb") as f:
            return b"spawn_main" in f.read()
    return [k for k in kids if spawned(k)]

if __name__ == "__main__":
    import consumer, torch
    if sys.argv[1] == "--baseline":
        print(json.dumps(rollup(os.getpid())))
        os._exit(0)
    prefix, cache = sys.argv[1], sys.argv[2]
    n_workers, batch, batches = (int(a) for a in sys.argv[3:6])
    t0 = time.perf_counter()
    ds = consumer.Consumer.from_packed(prefix, style="concat", seqlen=2048, cache_dir=cache)
    opened = time.perf_counter() - t0
    ds[len(ds) // 2]
    alone = rollup(os.getpid())
    t0 = time.perf_counter()
    loader = ds.dataloader(batch, num_workers=n_workers, multiprocessing_context="spawn", persistent_workers=True,
                           seed=0)
    made = time.perf_counter() - t0
    it = iter(loader)
    t0 = time.perf_counter()
    next(it)
    first = time.perf_counter() - t0
    for _ in range(batches - 1):
        next(it)
    kids = workers(os.getpid())
    per = [rollup(k) for k in kids]
    print(json.dumps({"open_s": opened, "loader_made_s": made, "first_batch_s": first, "main_alone": alone,
                      "main_after": rollup(os.getpid()), "workers": per,
                      "workers_pss": sum(p["pss"] for p in per), "workers_uss": sum(p["uss"] for p in per),
                      "samples": len(ds)}))
    os._exit(0)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--docs", type=int, default=100_000, help="one-line documents in the store")
    parser.add_argument("--workers", type=int, default=4, help="spawn workers of the loader")
    parser.add_argument("--batch", type=int, default=32, help="samples per batch")
    parser.add_argument("--batches", type=int, default=20, help="batches taken before measuring")
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")


def run(args: argparse.Namespace) -> dict:
    """Build and pack the corpus, open it once (the index cached), then measure a fresh child's loader."""
    from consumer import Consumer

    from .open_packed import _lines

    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        src, prefix = os.path.join(work, "lines.txt"), os.path.join(work, "store")
        cache = os.path.join(work, "cache")
        _lines(src, args.docs)
        Consumer(src, documents="lines", n_bytes=1, seqlen=2048, cache_dir=False).pack(prefix)
        # a first run: the index cached, the files' fingerprint (every loader's state holds it) recorded
        Consumer.from_packed(prefix, style="concat", seqlen=2048, cache_dir=cache).get_dict()
        child = os.path.join(work, "child.py")
        with open(child, "w") as f:
            f.write(CHILD)
        proc = subprocess.run([sys.executable, child, prefix, cache, str(args.workers), str(args.batch),
                               str(args.batches)], capture_output=True, text=True, check=True)
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        base = json.loads(subprocess.run([sys.executable, child, "--baseline"], capture_output=True, text=True,
                                         check=True).stdout.strip().splitlines()[-1])
    # the heap: anonymous memory (private, never the page cache), the interpreter and its imports included
    main_anon = out["main_alone"]["anon"]
    workers_anon = sum(w["anon"] for w in out["workers"])
    out.update({"documents": args.docs, "workers_n": args.workers, "imports_only": base,
                "workers_anon": workers_anon, "workers_anon_over_main_anon": workers_anon / main_anon,
                "workers_file_pss": out["workers_pss"] - workers_anon})
    mib = 2 ** 20
    print(f"{args.workers} spawn workers: heap {workers_anon / mib:.0f} MiB in total against the main process's "
          f"{main_anon / mib:.0f} MiB ({out['workers_anon_over_main_anon']:.2f}x; a process importing consumer and "
          f"torch alone: {base['anon'] / mib:.0f} MiB); mapped file pages (the shared page cache, PSS) "
          f"{out['workers_file_pss'] / mib:.0f} MiB; loader made in {out['loader_made_s']:.2f} s, first batch "
          f"{out['first_batch_s']:.2f} s", file=sys.stderr)
    return out
