"""Probe: random batches of records, read where they lie, against the same records packed and HF datasets (#35).

Corpus (made under a temporary folder, removed after): ``--records`` JSONL records in ``--shards`` shards, each
``{"id", "text", "source"}`` with a text of realistic length (log-normal, median ``--text-median`` characters:
about 1.4 KB a record at the default; see ``jsonl_peers``), and the same texts one per line in ``.txt`` files
(newlines inside a text made spaces, so each text stays one line). The files are read once first, so every system
finds them in the page cache.

Systems, each in a **fresh process** per repetition (systems interleaved), all reading the same random
documents in batches of ``--batch`` rows of ``--seqlen`` byte tokens (diff style, ``n_bytes=1``, no header):

- ``consumer-jsonl``: ``Consumer(folder, documents="jsonl", style="diff", seqlen=..., cache_dir=...)``, then
  ``ds.fetch_numpy(ids)``: each record's line read from its shard and its text decoded again;
- ``consumer-lines``: the ``.txt`` files with ``documents="lines"`` (each line read by byte range);
- ``consumer-packed``: ``Consumer.from_packed(prefix, style="diff", seqlen=...)`` of ``ds.pack(prefix)`` of the
  JSONL dataset (packed once, before; ``pack_s``);
- ``hf``: ``datasets.load_dataset("json", data_files=shards, split="train", cache_dir=...)``, then ``ds[ids]``'s
  texts UTF-8 encoded into a preallocated ``[B, seqlen]`` int64 row block, EOF after each text, PAD after, a
  long text cut at ``seqlen`` (the collate a user writes; HF datasets' interpreter: ``--peer-python hf=PATH``,
  ``BENCH_PYTHON_HF`` or ``benchmarks/.venvs/hf``; absent, with the reason, where ``datasets`` does not import).

With ``--baseline DIR`` (a folder holding another version's ``consumer`` package, e.g. made with
``git archive <before> consumer | tar -x -C DIR``), ``before-jsonl`` and ``before-lines`` run the same as
``consumer-jsonl`` and ``consumer-lines`` with that version first on the path, interleaved with the others, and
``after_over_before`` compares them.

Each system's cache directory starts empty: the first repetition's ``first_batch_s`` is from nothing (the index,
or HF's Arrow conversion, built), the later ones' (``reopen_first_batch_s``) reuse it; ``import_s`` apart. Per
batch: the median call over ``--passes`` passes of ``--batches`` batches (after one warm pass), the best
repetition. ``digest``: sha256 of the first batch's rows (JSONL, packed and HF must agree). Ratios: each
system's ms per batch over ``consumer-packed``'s and over ``hf``'s.

    python -m benchmarks probe records_fetch --records 200000 --shards 32 --reps 3
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

NAME = "records_fetch"
DESCRIPTION = "random batches of JSONL / lines records read in place vs the same records packed and HF datasets"
SYSTEMS = ("consumer-jsonl", "consumer-lines", "consumer-packed", "hf")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--records", type=int, default=200_000, help="JSONL records in all (default 2x10^5)")
    parser.add_argument("--shards", type=int, default=32, help="JSONL (and .txt) files")
    parser.add_argument("--text-median", type=int, default=1000, help="median text length in characters")
    parser.add_argument("--batch", type=int, default=32, help="rows per batch")
    parser.add_argument("--seqlen", type=int, default=2048, help="tokens per row")
    parser.add_argument("--batches", type=int, default=300, help="random batches per pass")
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the batches per process")
    parser.add_argument("--reps", type=int, default=3, help="fresh processes per system (interleaved)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma list of " + ",".join(SYSTEMS))
    parser.add_argument("--baseline", default=None, metavar="DIR",
                        help="a folder with another version's consumer package: also run before-jsonl, before-lines")
    parser.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH",
                        help="interpreter of HF datasets (default: BENCH_PYTHON_HF, benchmarks/.venvs/hf or this one)")


def _write_lines(shards: str, lines: str) -> None:
    """The texts of the JSONL shards, one per line (newlines inside a text made spaces), one .txt per shard."""
    os.makedirs(lines, exist_ok=True)
    for name in sorted(os.listdir(shards)):
        with open(os.path.join(shards, name), "rb") as f:
            texts = [json.loads(line)["text"].replace("\n", " ").encode() for line in f if line.strip()]
        with open(os.path.join(lines, name.replace(".jsonl", ".txt")), "wb") as f:
            f.write(b"\n".join(texts) + b"\n")


def _child(spec: dict) -> dict:
    """One system in this fresh process: import, open, first batch, then the timed passes."""
    t0 = time.perf_counter()
    if spec["system"] == "hf":
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
        import datasets

        datasets.disable_progress_bars()
    else:
        from consumer import Consumer
    imported = time.perf_counter()
    ids = np.asarray(spec["ids"], dtype=np.int64)
    seqlen, system = spec["seqlen"], spec["system"]
    if system == "hf":
        files = sorted(os.path.join(spec["folder"], n) for n in os.listdir(spec["folder"]))
        hf = datasets.load_dataset("json", data_files=files, split="train", cache_dir=spec["cache"])
        eof, pad = spec["eof"], spec["pad"]

        def fetch(b: np.ndarray) -> np.ndarray:
            texts = hf[b.tolist()]["text"]
            out = np.full((len(texts), seqlen), pad, dtype=np.int64)
            for r, text in enumerate(texts):
                raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)[:seqlen]
                out[r, :raw.size] = raw
                if raw.size < seqlen:
                    out[r, raw.size] = eof
            return out
    else:
        if system == "consumer-packed":
            ds = Consumer.from_packed(spec["prefix"], style="diff", seqlen=seqlen)
        else:
            ds = Consumer(spec["folder"], documents=system.split("-")[-1], style="diff", n_bytes=1, seqlen=seqlen,
                          metadata=None, cache_dir=spec["cache"])

        def fetch(b: np.ndarray) -> np.ndarray:
            return ds.fetch_numpy(b)["input_array"]
    first = fetch(ids[0])
    opened = time.perf_counter()
    import hashlib

    digest = hashlib.sha256(np.ascontiguousarray(first, dtype=np.int64).tobytes()).hexdigest()
    for b in ids:  # warm: every batch once
        fetch(b)
    times = []
    for _ in range(spec["passes"]):
        for b in ids:
            t = time.perf_counter()
            fetch(b)
            times.append(time.perf_counter() - t)
    return {"import_s": imported - t0, "first_batch_s": opened - imported,
            "ms_per_batch": 1e3 * float(np.median(times)), "mean_ms_per_batch": 1e3 * float(np.mean(times)),
            "digest": digest, "shape": list(first.shape)}


def _prepare(tmp: str, args: argparse.Namespace) -> dict:
    """The corpus, its lines twin and the packed store under ``tmp``; paths and the vocabulary's ids."""
    from consumer import Consumer

    from .jsonl_peers import make_shards

    shards = os.path.dirname(make_shards(tmp, args.records, args.shards, args.text_median))
    lines = os.path.join(tmp, "lines")
    _write_lines(shards, lines)
    total = 0
    for folder in (shards, lines):  # warm the page cache for every system alike
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), "rb") as f:
                while chunk := f.read(1 << 24):
                    total += len(chunk)
    ds = Consumer(shards, documents="jsonl", style="diff", n_bytes=1, seqlen=args.seqlen, metadata=None,
                  cache_dir=False)
    t = time.perf_counter()
    prefix = os.path.join(tmp, "packed")
    ds.pack(prefix)
    return {"shards": shards, "lines": lines, "prefix": prefix, "pack_s": time.perf_counter() - t,
            "documents": len(ds), "bytes": total, "eof": int(ds.vocab.eof), "pad": int(ds.vocab.pad)}


def run(args: argparse.Namespace) -> dict:
    """Every system, ``--reps`` fresh processes each (interleaved): first batch and ms per batch (see above)."""
    from ..peers import resolve_python

    systems = [s for s in args.systems.split(",") if s]
    if any(s not in SYSTEMS for s in systems):
        raise SystemExit(f"--systems expects a comma list of {SYSTEMS}, got {args.systems!r}")
    front = {}
    if args.baseline:
        if not os.path.isdir(os.path.join(args.baseline, "consumer")):
            raise SystemExit(f"--baseline expects a folder holding a consumer package, got {args.baseline!r}")
        for s in ("jsonl", "lines"):
            if f"consumer-{s}" in systems:
                systems.insert(systems.index(f"consumer-{s}"), f"before-{s}")
                front[f"before-{s}"] = os.path.abspath(args.baseline)
    given = dict(v.partition("=")[::2] for v in args.peer_python)
    pythons = {s: resolve_python("hf", given) if s == "hf" else sys.executable for s in systems}
    tmp = tempfile.mkdtemp(prefix="records-fetch-")
    try:
        corpus = _prepare(tmp, args)
        rng = np.random.default_rng(7)
        ids = rng.integers(0, corpus["documents"], size=(args.batches, args.batch)).tolist()
        runs: dict[str, list[dict]] = {s: [] for s in systems}
        absent: dict[str, str] = {}
        for rep in range(args.reps):
            for s in systems:
                if s in absent:
                    continue
                spec = {"system": s, "ids": ids, "seqlen": args.seqlen, "passes": args.passes, "eof": corpus["eof"],
                        "pad": corpus["pad"], "prefix": corpus["prefix"], "cache": os.path.join(tmp, "cache-" + s),
                        "folder": corpus["lines" if s.endswith("-lines") else "shards"]}
                r = _run_child(pythons[s], spec, front.get(s))
                if "error" in r:
                    absent[s] = r["error"]
                    continue
                runs[s].append(r)
                print(f"records_fetch rep {rep} {s}: first batch {r['first_batch_s']:.2f} s, "
                      f"{r['ms_per_batch']:.3f} ms a batch", file=sys.stderr, flush=True)
        return {**_summary(runs), "absent": absent, "pythons": pythons, "records": args.records,
                "shards": args.shards, "bytes": corpus["bytes"], "pack_s": round(corpus["pack_s"], 2),
                "batch": [args.batch, args.seqlen]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_child(python: str, spec: dict, front: str | None) -> dict:
    """The JSON line a child process prints for ``spec`` (``front``: a folder put first on its path, holding the
    ``consumer`` package it runs), or ``{"error": ...}``."""
    import subprocess

    from ..peers import ROOT

    path = os.pathsep.join(p for p in (front, ROOT, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, PYTHONWARNINGS="ignore")
    done = subprocess.run([python, "-m", f"benchmarks.probes.{NAME}", "--child", json.dumps(spec)], env=env,
                          capture_output=True, text=True, check=False, cwd=front or ROOT)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if lines:
        return json.loads(lines[-1])
    tail = [ln for ln in done.stderr.strip().splitlines() if "Error" in ln]
    return {"error": (tail[-1] if tail else f"exit status {done.returncode}")[:300]}


def _summary(runs: dict[str, list[dict]]) -> dict:
    """Per system: first batch from nothing and reopened, best ms per batch; ratios to packed and HF."""
    out: dict[str, dict] = {}
    for s, rs in runs.items():
        if rs:
            later = [r["first_batch_s"] for r in rs[1:]]
            out[s] = {"ms_per_batch": round(min(r["ms_per_batch"] for r in rs), 4),
                      "runs_ms": [round(r["ms_per_batch"], 4) for r in rs],
                      "first_batch_s": round(rs[0]["first_batch_s"], 3),
                      "reopen_first_batch_s": round(float(np.median(later)), 3) if later else None,
                      "import_s": round(float(np.median([r["import_s"] for r in rs])), 3),
                      "digest": rs[0]["digest"][:16]}
    for base in ("consumer-packed", "hf"):
        if base in out:
            for row in out.values():
                row[f"over_{base}"] = round(row["ms_per_batch"] / out[base]["ms_per_batch"], 2)
    digests = {s: r["digest"] for s, r in out.items() if not s.endswith("-lines")}
    lines = {r["digest"] for s, r in out.items() if s.endswith("-lines")}
    after = {s: round(out[f"consumer-{s}"]["ms_per_batch"] / out[f"before-{s}"]["ms_per_batch"], 2)
             for s in ("jsonl", "lines") if f"before-{s}" in out and f"consumer-{s}" in out}
    return {"systems": out, "same_rows": len(set(digests.values())) <= 1 and len(lines) <= 1,
            "after_over_before": after or None}


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(_child(json.loads(sys.argv[2]))), flush=True)
        sys.stdout.flush()
        os._exit(0)
    _parser = argparse.ArgumentParser(prog=f"python -m benchmarks.probes.{NAME}", description=DESCRIPTION)
    add_arguments(_parser)
    print(json.dumps(run(_parser.parse_args()), indent=1))
