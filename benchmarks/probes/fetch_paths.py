"""Fetch paths (issue 20, items 1-3): per-call latency, packed throughput against the gather floor, raw reads.

Three tables, every ratio taken inside this one run (systems interleaved inside every repetition; each figure is
the median over repetitions of the median seconds per call of a repetition):

1. **Per call, batch 1 and 4** on packed stores of the small-files corpus (``n_bytes=2``; ``diff`` at 512 and 8192
   tokens, ``concat`` at 8192): ``ds.fetch(ids)`` (tensors), ``ds[i]`` / ``ds[[i, ...]]`` and
   ``ds.fetch_numpy(ids)`` against Megatron-core's ``IndexedDataset.get`` (one call per piece, padded into an int64
   row: the peer adapter of the main suite) and mosaic streaming's ``StreamingDataset.get_item`` (padded), each peer
   in its own process (:mod:`benchmarks.peers`) over the same ``.bin/.idx`` store. A peer that cannot run is listed
   with the reason. The same batches read from the files: ``ds.fetch`` of the raw dataset and the naive reader.
2. **Packed against the gather floor**: the packed concat store, random batches of 20 x 8192, ``fetch_numpy``
   int64 and ``out_dtype=int32``, next to memcpy of a hot batch and the DRAM-gather floor of the main suite
   (20 random row slices of the memory-mapped store into a preallocated batch of the same dtype).
3. **Raw against the naive reader**: ``ds.fetch(ids)`` from the files (no header) against
   :mod:`benchmarks.naive` (open/seek/read/frombuffer/pad by hand), small-files and log-normal corpora, ``diff`` and
   ``concat``, 20 x 8192 at ``n_bytes=2``; the rows of both are compared. A file-read floor (the same pieces opened,
   ``fstat``-ed, read and closed, nothing else) bounds the ratio any reader that opens and checks each file can reach.

Run: ``python -m benchmarks probe fetch_paths [--quick] [--json PATH]`` (corpora under ``benchmarks/.data``,
stores under ``benchmarks/.work/fetch-paths``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

import numpy as np

from ..corpora import make_corpus
from ..measure import gather_fetch, median
from ..naive import NaiveConcat, NaiveDiff
from ..peers import PEERS, ROOT, PeerUnavailable, peer_version, resolve_python, start_peer
from ..peers.storeio import read_store, save_plan
from ..systems import LocalSystem, PeerSystem, make_batches, plan_of

NAME = "fetch_paths"
DESCRIPTION = "fetch per call: packed against the gather floor, raw against the naive reader, peers"

__all__ = ["run_all", "render", "add_arguments", "run"]

N_BYTES = 2


def _interleave(systems: list, batches: list[list[np.ndarray]], log) -> dict[str, dict]:
    """Per system: the median over repetitions of the per-repetition median seconds per call."""
    out: dict[str, dict] = {s.label: {"per_rep": [], "error": None} for s in systems}
    for rep_batches in batches:
        for s in systems:
            row = out[s.label]
            if row["error"]:
                continue
            try:
                r = s.fetch_times(rep_batches, 0)
            except (RuntimeError, PeerUnavailable) as exc:
                row["error"] = str(exc)
                log(f"  {s.label}: {exc}")
                continue
            row["per_rep"].append(median(r["seconds"]))
    for row in out.values():
        row["median_s"] = median(row["per_rep"])
    return out


class _Peers:
    """Megatron-core and mosaic streaming peer processes (started once, one adapter per store)."""

    def __init__(self, work: str, names: list[str], log):
        self.work, self.log = work, log
        self.procs: dict = {}
        self.status: dict[str, dict] = {}
        for name in names:
            python = resolve_python(name, {})
            try:
                peer = start_peer(name, python, os.path.join(work, f"peer-{name}.log"))
                self.status[name] = {"available": True, "python": python, **peer_version(peer)}
                self.procs[name] = peer
            except PeerUnavailable as exc:
                self.status[name] = {"available": False, "python": python,
                                     "reason": f"{exc} (install: {PEERS[name].install})"}
            log(f"peer {name}: {self.status[name]}")

    def systems(self, key: str, store: str, plan: str, wdir: str, vocab, seqlen: int) -> list:
        out = []
        for name, variant, title in (("megatron", "indexed", "Megatron IndexedDataset"),
                                     ("mosaic", "default", "mosaic streaming")):
            peer = self.procs.get(name)
            if peer is None:
                continue
            args = {"store": store, "plan": plan, "workdir": wdir}
            if name == "megatron":
                args.update(gpt_seq_length=seqlen, seed=1234, eod=vocab.eof, pad=vocab.pad)
            try:
                peer.call("setup", key=key, args=args)
                peer.call("convert", key=key)
            except (RuntimeError, PeerUnavailable) as exc:
                self.status[name].setdefault("failures", {})[key] = str(exc)
                self.log(f"peer {name} {key}: {exc}")
                continue
            out.append(PeerSystem(title, peer, key, variant))
        return out

    def close(self) -> None:
        for peer in self.procs.values():
            peer.close()


def per_call(corpus, work: str, peers: _Peers, reps: int, n_batches: int, log) -> dict:
    """Table 1: batch 1 and 4 per-call latency on packed stores, against the peers."""
    from consumer import Consumer

    res = {}
    for style, seqlen in (("diff", 512), ("diff", 8192), ("concat", 8192)):
        key = f"percall-{style}-{seqlen}"
        log(f"per call: {key}")
        wdir = os.path.join(work, key)
        shutil.rmtree(wdir, ignore_errors=True)
        os.makedirs(wdir)
        raw = Consumer(corpus.root, style=style, n_bytes=N_BYTES, seqlen=seqlen, metadata=None, cache_dir=False)
        store = os.path.join(wdir, "store")
        raw.pack(store)
        ds = Consumer.from_packed(store, style=style, seqlen=seqlen)
        plan = os.path.join(wdir, "plan.npz")
        save_plan(plan, plan_of(ds))
        peer_systems = peers.systems(key, store, plan, wdir, ds.vocab, seqlen)
        naive = (NaiveDiff if style == "diff" else NaiveConcat)(corpus.fps, N_BYTES, seqlen, raw.vocab)
        res[key] = {"samples": len(ds), "style": style, "seqlen": seqlen, "batch": {}}
        for b in (1, 4):
            item = (lambda ids, ds=ds: ds[int(ids[0])]) if b == 1 else (lambda ids, ds=ds: ds[ids.tolist()])
            systems = [LocalSystem("consumer packed ds.fetch (tensors)", lambda ids, ds=ds: ds.fetch(ids)),
                       LocalSystem("consumer packed ds[...] (tensors)", item),
                       LocalSystem("consumer packed ds.fetch_numpy", lambda ids, ds=ds: ds.fetch_numpy(ids)),
                       *peer_systems,
                       LocalSystem("consumer raw ds.fetch (tensors, files)", lambda ids, raw=raw: raw.fetch(ids)),
                       LocalSystem("naive reader (files)", naive.fetch)]
            batches = [make_batches(len(ds), b, n_batches, seed=rep) for rep in range(reps)]
            res[key]["batch"][b] = _interleave(systems, batches, log)
    return res


def floor(corpus, work: str, reps: int, n_batches: int, log) -> dict:
    """Table 2: packed concat fetch against memcpy and the gather floor, int64 and int32."""
    from consumer import Consumer

    log("packed against the gather floor")
    B, L = 20, 8192
    wdir = os.path.join(work, "floor")
    shutil.rmtree(wdir, ignore_errors=True)
    os.makedirs(wdir)
    raw = Consumer(corpus.root, style="concat", n_bytes=N_BYTES, seqlen=L, metadata=None, cache_dir=False)
    store = os.path.join(wdir, "store")
    raw.pack(store)
    ds = Consumer.from_packed(store, style="concat", seqlen=L)
    tokens = read_store(store)[0]
    systems = []
    for dt in (np.int64, np.int32):
        name = np.dtype(dt).name
        src = np.random.default_rng(0).integers(0, 60000, (B, L)).astype(dt)
        dst = np.empty_like(src)
        systems += [LocalSystem(f"memcpy {name}", lambda ids, d=dst, x=src: np.copyto(d, x), check=False),
                    LocalSystem(f"DRAM gather {name}", gather_fetch(tokens, B, L, dt), check=False),
                    LocalSystem(f"DRAM gather plain {name}", gather_fetch(tokens.view(np.ndarray), B, L, dt),
                                check=False),
                    LocalSystem(f"consumer packed {name}",
                                lambda ids, dt=dt: ds.fetch_numpy(ids, out_dtype=dt)["input_array"], check=False)]
    batches = [make_batches(len(ds), B, n_batches, seed=rep) for rep in range(reps)]
    return {"batch": B, "seqlen": L, "samples": len(ds), "systems": _interleave(systems, batches, log)}


def raw_reads(corpora: dict, reps: int, n_batches: int, log) -> dict:
    """Table 3: raw fetch against the naive reader, per corpus and style, rows compared."""
    from consumer import Consumer

    B, L = 20, 8192
    res = {}
    for cname, corpus in corpora.items():
        for style in ("diff", "concat"):
            key = f"{cname}-{style}"
            log(f"raw: {key}")
            ds = Consumer(corpus.root, style=style, n_bytes=N_BYTES, seqlen=L, metadata=None, cache_dir=False)
            naive = (NaiveDiff if style == "diff" else NaiveConcat)(corpus.fps, N_BYTES, L, ds.vocab)
            batches = [make_batches(len(ds), B, n_batches, seed=rep) for rep in range(reps)]
            same = all(np.array_equal(ds.fetch(ids)["input_array"].numpy(), naive.fetch(ids)) for ids in batches[0])
            systems = [LocalSystem("consumer raw", lambda ids, ds=ds: ds.fetch(ids)["input_array"]),
                       LocalSystem("naive reader", naive.fetch),
                       LocalSystem("file-read floor", _read_floor(ds), check=False)]
            res[key] = {"files": corpus.n_files, "samples": len(ds), "rows_equal": same,
                        "systems": _interleave(systems, batches, log)}
    return res


def _read_floor(ds):
    """The system calls alone: every file piece of a batch opened, ``fstat``-ed, read with one ``preadv`` into one
    buffer and closed (no layout, no conversion, no output): what any reader that checks each file pays."""
    idx, docs, nb = ds.index, ds.documents, N_BYTES
    paths = [os.fsencode(p) for p in ds.files]
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    buf = memoryview(bytearray(idx.seqlen * nb * 256))

    def fetch(ids):
        at = 0
        for i in ids.tolist():
            for g in range(int(idx.seg_ptr[i]), int(idx.seg_ptr[i + 1])):
                d, a = int(idx.seg_doc[g]), int(idx.seg_start[g])
                size = int(docs.doc_size[d])
                lo, hi = min(a * nb, size), min((a + int(idx.seg_len[g])) * nb, size)
                fd = os.open(paths[d], flags)
                try:
                    os.fstat(fd)
                    os.preadv(fd, [buf[at:at + hi - lo]], lo)
                finally:
                    os.close(fd)
                at += hi - lo
        return buf

    return fetch


def _ms(s: float) -> str:
    return f"{s * 1e3:.4f}" if s < 0.001 else f"{s * 1e3:.3f}"


def verdicts(res: dict) -> list[str]:
    """One line per target of issue 20 items 1-3, from the figures of ``res``."""
    out = []
    worst = []
    for key, info in res["per_call"].items():
        for b, timed in info["batch"].items():
            ours = timed.get("consumer packed ds.fetch (tensors)", {}).get("median_s")
            for peer in ("Megatron IndexedDataset", "mosaic streaming"):
                theirs = timed.get(peer, {}).get("median_s")
                if ours and theirs:
                    worst.append((ours / theirs, f"{key[8:]} batch {b} vs {peer.split()[0]}"))
    if worst:
        r, where = max(worst)
        out.append(f"- packed `ds.fetch` at batch 1 and 4 faster than Megatron `IndexedDataset` and mosaic: "
                   f"**{'met' if r < 1 else 'not met'}** (slowest: {where}, {r:.2f}× the peer's time)")
    else:
        out.append("- packed `ds.fetch` at batch 1 and 4 against the peers: not measured (no peer ran)")
    fl = res["floor"]["systems"]
    parts = [(name, fl[f"DRAM gather {name}"]["median_s"] / fl[f"consumer packed {name}"]["median_s"])
             for name in ("int64", "int32")]
    met = min(r for _, r in parts) >= 0.95
    strict = [(name, fl[f"DRAM gather plain {name}"]["median_s"] / fl[f"consumer packed {name}"]["median_s"])
              for name in ("int64", "int32") if f"DRAM gather plain {name}" in fl]
    out.append(f"- packed fetch ≥ 0.95 of the gather floor (20 × 8192): **{'met' if met else 'not met'}** "
               f"({', '.join(f'{n} {r:.2f}' for n, r in parts)}; of the plain-array floor: "
               f"{', '.join(f'{n} {r:.2f}' for n, r in strict) or '—'})")
    for style, goal in (("diff", 1.5), ("concat", 3.0)):
        got = {k: v["systems"]["naive reader"]["median_s"] / v["systems"]["consumer raw"]["median_s"]
               for k, v in res["raw"].items() if k.endswith(style)}
        if got:
            ok = min(got.values()) >= goal
            out.append(f"- raw {style} fetch ≥ {goal:g}× the naive reader on every corpus: "
                       f"**{'met' if ok else 'not met'}** ({', '.join(f'{k} {v:.2f}×' for k, v in got.items())})")
    return out


def render(res: dict, command: str = "python -m benchmarks probe fetch_paths") -> str:
    """The section as markdown: what is measured, the verdicts and the three tables."""
    head = ["## Fetch paths: per call, packed against the gather floor, raw against the naive reader", "",
            f"Measured by `{command}` ({res['started']}, {res['seconds']:.0f} s; load average at the start "
            f"{res['load_average_at_start']}, at the end {res['load_average_at_end']}). Ratios are taken inside "
            "this one run: systems interleaved in every repetition, each figure the median over repetitions of "
            "the median time per call. Per call: packed stores of the small-files corpus, `ds.fetch(ids)` (tensors), "
            "`ds[i]` / `ds[[i, ...]]`, `ds.fetch_numpy(ids)`, Megatron-core `IndexedDataset.get` (padded int64 "
            "rows) and mosaic `StreamingDataset.get_item` (padded), each peer in its own process over the same "
            "`.bin/.idx` store; the same batches from the files (`ds.fetch` of the raw dataset, the naive reader). "
            "The gather floor is the main suite's: random row slices of the memory-mapped store (an `np.memmap`) "
            "into a preallocated batch. Raw: `ds.fetch` of 20 × 8192 at `n_bytes=2`, no header, against the "
            "naive reader (rows compared).", ""] + verdicts(res) + [""]
    lines = head + ["### Per call, batch 1 and 4 (packed stores, small-files corpus)", "",
             "| store | batch | system | µs / call | time ÷ Megatron | time ÷ mosaic |", "|---|---|---|---|---|---|"]
    for key, info in res["per_call"].items():
        for b, timed in info["batch"].items():
            meg = timed.get("Megatron IndexedDataset", {}).get("median_s")
            mos = timed.get("mosaic streaming", {}).get("median_s")
            for label, row in timed.items():
                if row["error"]:
                    lines.append(f"| {key[8:]} | {b} | {label} | failed: {row['error'][:80]} | | |")
                    continue
                t = row["median_s"]
                r1 = f"{t / meg:.2f}" if meg else "—"
                r2 = f"{t / mos:.2f}" if mos else "—"
                lines.append(f"| {key[8:]} | {b} | {label} | {t * 1e6:.1f} | {r1} | {r2} |")
    fl = res["floor"]["systems"]
    lines += ["", f"### Packed against the gather floor (concat store, {res['floor']['batch']} x "
              f"{res['floor']['seqlen']})", "",
              "*plain-array floor*: the same gather from a plain `ndarray` view of the map (slicing the `np.memmap` "
              "subclass costs about a microsecond a row more), a stricter floor than the main suite's.", "",
              "| dtype | memcpy ms | DRAM gather ms | plain-array gather ms | consumer packed ms | gather ÷ packed "
              "(≥ 0.95) | plain-array gather ÷ packed |",
              "|---|---|---|---|---|---|---|"]
    for name in ("int64", "int32"):
        m, g, c = (fl[f"{k} {name}"]["median_s"] for k in ("memcpy", "DRAM gather", "consumer packed"))
        pg = fl.get(f"DRAM gather plain {name}", {}).get("median_s")
        lines.append(f"| {name} | {_ms(m)} | {_ms(g)} | {_ms(pg) if pg else '—'} | {_ms(c)} | **{g / c:.2f}** | "
                     f"{f'{pg / c:.2f}' if pg else '—'} |")
    lines += ["", "### Raw against the naive reader (20 x 8192, n_bytes=2, no header)", "",
              "*file-read floor*: the same file pieces opened, `fstat`-ed, read with one `preadv` each and closed, "
              "nothing else (no layout, conversion or output); *naive ÷ floor* is the best ratio any reader that "
              "opens and checks every file can reach.", "",
              "| corpus | files | consumer raw ms | naive ms | file-read floor ms | naive ÷ raw | goal | naive ÷ floor "
              "| rows equal |",
              "|---|---|---|---|---|---|---|---|---|"]
    for key, info in res["raw"].items():
        r, n = info["systems"]["consumer raw"]["median_s"], info["systems"]["naive reader"]["median_s"]
        f = info["systems"].get("file-read floor", {}).get("median_s")
        goal = "1.5×" if key.endswith("diff") else "3×"
        lines.append(f"| {key} | {info['files']:,} | {_ms(r)} | {_ms(n)} | {_ms(f) if f else '—'} | **{n / r:.2f}×** | "
                     f"{goal} | {f'{n / f:.2f}×' if f else '—'} | {'yes' if info['rows_equal'] else 'NO'} |")
    lines += ["", "Peers: " + "; ".join(
        f"{name}: {'yes' if st['available'] else 'no (' + st.get('reason', '')[:120] + ')'}"
        for name, st in res["peers"].items())]
    return "\n".join(lines) + "\n"


def run_all(quick: bool, work: str, data: str, peer_names: list[str], log=print) -> dict:
    """Measure the three tables (``quick``: the corpora and repetitions of ``--quick``)."""
    small_files, lognormal_files = (2000, 150) if quick else (10000, 1200)
    reps, n_calls, n_floor, n_raw = (3, 50, 20, 5) if quick else (5, 200, 40, 10)
    work = os.path.join(work, "fetch-paths")
    os.makedirs(work, exist_ok=True)
    t0 = time.perf_counter()
    small = make_corpus(data, "small", small_files, 0)
    lognormal = make_corpus(data, "lognormal", lognormal_files, 0)
    peers = _Peers(work, peer_names, log)
    try:
        res = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
               "per_call": per_call(small, work, peers, reps, n_calls, log),
               "floor": floor(small, work, reps, n_floor, log),
               "raw": raw_reads({"small": small, "lognormal": lognormal}, reps, n_raw, log),
               "peers": peers.status}
    finally:
        peers.close()
    res["seconds"] = time.perf_counter() - t0
    res["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return res


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--quick", action="store_true", help="smaller corpora and fewer repetitions")
    parser.add_argument("--peers", default="megatron,mosaic", help="comma list of megatron,mosaic, or none")


def run(args: argparse.Namespace) -> dict:
    """The three tables' figures (corpora under ``benchmarks/.data``, scratch under ``benchmarks/.work``)."""
    names = [] if args.peers == "none" else [n for n in args.peers.split(",") if n]
    return run_all(args.quick, os.path.join(ROOT, "benchmarks", ".work"), os.path.join(ROOT, "benchmarks", ".data"),
                   names)
