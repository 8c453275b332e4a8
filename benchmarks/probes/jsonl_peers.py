"""A folder of JSONL shards from nothing to the first record count: consumer against Daft and DuckDB.

Corpus: ``--records`` records in ``--shards`` ``.jsonl`` files (generated once under ``--data``, reused), each
``{"id": int, "text": str, "source": str}`` with a ``text`` of realistic length (log-normal, median
``--text-median`` characters, a few non-ASCII characters, quotes and newlines that JSON escapes). The shards are
read once before the first repetition, so every system finds them in the page cache (otherwise the first system
of the first repetition reads them from the device and the others do not). Per system and repetition a **fresh
process** (:mod:`benchmarks.peers.firstcount`), systems interleaved, from nothing (library imported, import timed
apart) to the number of records, with the CPU time of the process's threads during the count (``cores``: CPU over
wall time):

- ``consumer``: ``Consumer(folder, documents="jsonl", metadata=None, cache_dir=False)`` +
  ``ds.sql("SELECT count(*) FROM documents")``; ``consumer_cached``: the same writing its per-container indexes
  to an empty cache dir (what a first build does by default); ``consumer_pool``: ``engine=ProcessPoolExecutor(cores)``;
- ``daft``: ``daft.read_json(glob).count_rows()`` (Daft's own venv, ``BENCH_PYTHON_DAFT``); ``daft_text``: the count
  and the sum of the texts' lengths (every text parsed, as consumer's index must);
- ``duckdb``: ``SELECT count(*) FROM read_json_auto(glob)``; ``duckdb_text``: ``count(*), sum(length(text))``.

Every count must equal ``--records``. ``x_consumer`` > 1: consumer is faster. ``--cores 1,2``: every system also
runs on the first 1, then 2 CPUs (``by_cores``: the same figures per core count, interleaved with the others; the
main table is then the last count's), which shows how each scales with cores. ``--baseline DIR`` (a folder holding
another version's ``consumer`` package, e.g. made with ``git archive <before> consumer | tar -x -C DIR``):
``before`` and ``before_cached`` run ``consumer`` and ``consumer_cached`` with that version first on the path,
interleaved with the others (``after_over_before``: the median first counts, after over before).

Then the price of not storing the texts twice (:mod:`benchmarks.peers.jsonlreads`, one fresh process): documents
read back through the source, random and in order, in documents/s and MB/s of text, against reading their lines
alone (``--no-reads`` skips it).

    python -m benchmarks probe jsonl_peers --records 1000000 --shards 64 --reps 3
    python -m benchmarks probe jsonl_peers --records 200000 --shards 32 --text-median 1000 --reps 5 --cores 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from ..children import peer_json
from ..measure import median
from ..peers import ROOT, resolve_python

NAME = "jsonl_peers"
DESCRIPTION = "a folder of JSONL shards to the first count(*): consumer documents='jsonl' vs Daft read_json, DuckDB"
SYSTEMS = ("consumer", "consumer_cached", "consumer_pool", "daft", "daft_text", "duckdb", "duckdb_text")
_WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at which but have an "
          "they you were her she there been one all we their has would when if so no will more its about what "
          "naïve café données über 東京 «quoted» \"quote\" line\nbreak tab\there").split(" ")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--records", type=int, default=1_000_000, help="records in all (default 10^6)")
    parser.add_argument("--shards", type=int, default=64, help="JSONL files (default 64)")
    parser.add_argument("--text-median", type=int, default=400, help="median text length in characters")
    parser.add_argument("--reps", type=int, default=3, help="fresh processes per system (interleaved)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma list of " + ",".join(SYSTEMS))
    parser.add_argument("--no-reads", action="store_true", help="skip reading the documents back")
    parser.add_argument("--baseline", default=None, metavar="DIR",
                        help="a folder holding another version's consumer package, run as before, before_cached")
    parser.add_argument("--cores", default="", help="comma list of CPU counts to pin every system to, e.g. 1,2 "
                        "(default: every CPU this process may use)")
    parser.add_argument("--data", default=os.path.join(ROOT, "benchmarks", ".data"), help="generated corpora")
    parser.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH",
                        help="interpreter of daft (default: BENCH_PYTHON_DAFT, benchmarks/.venvs/daft or this one)")


def make_shards(data: str, records: int, shards: int, median_chars: int) -> str:
    """The folder of ``shards`` JSONL files under ``data`` (generated once; reused): its glob."""
    root = os.path.join(data, f"jsonl-peers-{records}-{shards}-{median_chars}")
    glob = os.path.join(root, "shards", "*.jsonl")
    if os.path.exists(os.path.join(root, ".complete")):
        return glob
    os.makedirs(os.path.join(root, "shards"), exist_ok=True)
    rng = np.random.default_rng(7)
    pool = " ".join(rng.choice(_WORDS, size=2_000_000))
    lengths = np.minimum(rng.lognormal(np.log(median_chars), 0.8, size=records).astype(np.int64) + 1,
                         len(pool) // 2)
    starts = rng.integers(0, len(pool) - lengths, dtype=np.int64)
    bounds = np.linspace(0, records, shards + 1).astype(np.int64)
    for s in range(shards):
        with open(os.path.join(root, "shards", f"part-{s:05d}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"id": i, "text": pool[starts[i]:starts[i] + lengths[i]], "source": f"s{s}"},
                                    ensure_ascii=False) + "\n" for i in range(int(bounds[s]), int(bounds[s + 1])))
    open(os.path.join(root, ".complete"), "w").close()
    return glob


def _child(python: str, system: str, glob: str, cores: int | None = None, front: str | None = None) -> dict:
    return peer_json(python, "benchmarks.peers.firstcount", [system, glob, *([str(cores)] if cores else [])],
                     front)


def _summary(runs: dict[str, list[dict]]) -> dict[str, dict]:
    """Per system: the median first count, its runs, import, peak RSS, CPU s and the cores kept busy."""
    out: dict[str, dict] = {}
    for s, rs in runs.items():
        if rs:
            out[s] = {"first_count_s": median(r["first_count_s"] for r in rs),
                      "runs_s": [r["first_count_s"] for r in rs], "import_s": median(r["import_s"] for r in rs),
                      "peak_rss_mb": median(r.get("peak_rss_mb", float("nan")) for r in rs),
                      "cpu_s": median(r.get("cpu_s", float("nan")) for r in rs)}
            out[s]["cores"] = out[s]["cpu_s"] / out[s]["first_count_s"]  # the cores the count kept busy
    ours = out.get("consumer")
    for row in out.values():
        row["x_consumer"] = round(row["first_count_s"] / ours["first_count_s"], 2) if ours else None
    return out


def run(args: argparse.Namespace) -> dict:
    """Every system, ``--reps`` fresh processes each (interleaved): median first count, × consumer."""
    systems = [s for s in args.systems.split(",") if s]
    bad = [s for s in systems if s not in SYSTEMS]
    if bad:
        raise SystemExit(f"--systems expects a comma list of {SYSTEMS}, got {args.systems!r}")
    front = {}
    if args.baseline:
        if not os.path.isdir(os.path.join(args.baseline, "consumer")):
            raise SystemExit(f"--baseline expects a folder holding a consumer package, got {args.baseline!r}")
        for s in ("consumer", "consumer_cached"):
            if s in systems:
                before = s.replace("consumer", "before")
                systems.insert(systems.index(s), before)
                front[before] = os.path.abspath(args.baseline)
    given = dict(v.partition("=")[::2] for v in args.peer_python)
    pythons = {s: resolve_python("daft", given) if s.startswith("daft") else sys.executable for s in systems}
    glob = make_shards(args.data, args.records, args.shards, args.text_median)
    folder = os.path.dirname(glob)
    total = 0
    for name in sorted(os.listdir(folder)):  # warm the page cache for every system alike (see the docstring)
        with open(os.path.join(folder, name), "rb") as f:
            while chunk := f.read(1 << 24):
                total += len(chunk)
    counts: list[int | None] = [int(c) for c in args.cores.split(",") if c] or [None]
    runs: dict[int | None, dict[str, list[dict]]] = {k: {s: [] for s in systems} for k in counts}
    absent: dict[str, str] = {}
    load = [os.getloadavg()[0]]
    for rep in range(args.reps):
        for k in counts:  # interleaved: a change of the machine's load falls on every system and core count
            for s in systems:
                if s in absent:
                    continue
                r = _child(pythons[s], s.replace("before", "consumer"), glob, k, front.get(s))
                if "error" in r or r["count"] != args.records:
                    absent[s] = r.get("error", f"counted {r.get('count')} records, not {args.records}")
                    continue
                runs[k][s].append(r)
                print(f"jsonl_peers rep {rep} {s}{'' if k is None else f' on {k} cores'}: first count "
                      f"{r['first_count_s']:.2f} s", file=sys.stderr, flush=True)
        load.append(os.getloadavg()[0])
    by_cores = {k: _summary(runs[k]) for k in counts}
    out = by_cores[counts[-1]]
    ours = out.get("consumer")
    daft = out.get("daft_text") or out.get("daft")
    target = None if not (ours and daft) else {
        "consumer_over_daft": round(ours["first_count_s"] / daft["first_count_s"], 2),
        "daft_system": "daft_text" if "daft_text" in out else "daft",
        "met": ours["first_count_s"] <= daft["first_count_s"]}  # #27: not slower than Daft's read_json
    reads = None if args.no_reads else peer_json(sys.executable, "benchmarks.peers.jsonlreads", [folder])
    return {"target": target, "reads": reads, "records": args.records, "shards": args.shards, "bytes": total,
            "text_median": args.text_median, "reps": args.reps, "systems": out, "absent": absent,
            "pythons": pythons, "load_avg": load,
            **({"by_cores": {str(k): v for k, v in by_cores.items()}} if counts != [None] else {}),
            **({"after_over_before": {s: round(out[s]["first_count_s"] / out[b]["first_count_s"], 2)
                                      for b in front for s in [b.replace("before", "consumer")]
                                      if s in out and b in out}} if front else {})}
