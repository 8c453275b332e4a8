"""One benchmark run: corpora, systems, interleaved repetitions, and the results as one JSON-able dict.

Sections (each a method of :class:`Run`, each filling ``results[section]``):

- ``workloads``: random-batch fetch on the same bytes, per corpus (small files, log-normal sizes) and style,
  for every system (``consumer`` from raw files and from its packed store, the naive reader, gperc 0.7, HF
  datasets, Megatron-core, litdata, mosaic streaming) and the machine limits (memcpy, DRAM gather), at
  several batch sizes; Megatron's GPT order as its own workload. Systems are interleaved inside every
  repetition; each figure is the median over repetitions of the per-repetition median.
- ``grid``: ``consumer`` alone over source x style x n_bytes x seqlen x batch x query (with libmagic headers).
- ``filesize``: fetch throughput against file size (corpora of one size band each).
- ``loader``: batches/s delivered to the loop with 0/1/2 workers: torch's transport ceiling (memcpy-only
  dataset), ``ds.dataloader`` (when this version has it), ``ds.fetch`` through torch's DataLoader, the peers.
- ``scale``: cold build (with and without libmagic), warm reopen and peak RSS against corpus size, each in a
  fresh process; gperc's build for the sizes it can do.
- ``remote``: object storage and HTTP servers on 127.0.0.1 (:mod:`benchmarks.probes.remote`).
- ``content``: the content pass against a plain read (:mod:`benchmarks.probes.content`).
- ``cold``: cold build with libmagic headers against gperc 0.7, and libmagic's per-file costs
  (:mod:`benchmarks.probes.cold_build`).
- ``query``: the query engine (``ds.sql``) against DuckDB on an Arrow table of the same rows, up to 10^7 rows
  (:mod:`benchmarks.probes.query_engine`).
- ``catalog``: catalog build to the first GROUP BY answer and the ``head(path, 4)`` predicate against Daft and
  DuckDB, fresh processes (:mod:`benchmarks.probes.catalog_peers`);
- ``coldstore``: random fetch from an evicted store against megatron-core, Lance and the ``os.pread`` floor, with
  read amplification (:mod:`benchmarks.probes.cold_store`);
- ``lance``: random fetch cold and warm against Lance's ``take`` (:mod:`benchmarks.probes.lance_fetch`);
- ``gpu``: training a byte-level model from ``ds.dataloader`` (:mod:`benchmarks.probes.gpu_feed`); skipped with the
  reason when there is no CUDA device (quick mode runs its CPU smoke loop instead).

- ``chunksums``, ``batchorder``, ``corpusreport``, ``coldfetch``, ``warmfetch``, ``smallbatches``, ``sqlmargin``,
  ``records``, ``recinterop``, ``coldcatalog``, ``contentfloor``, ``floors``, ``clusterlisting``: one or two runs of a
  registered probe each, full mode only by default (:mod:`benchmarks.suite_probe_runs`).

A section that fails is retried once or skipped with its reason (:mod:`benchmarks.sections`).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

from .corpora import make_corpus
from .measure import gather_fetch, median
from .naive import NaiveConcat, NaiveDiff
from .peers import FRESH_PEERS, PEERS, PeerUnavailable, fresh_peer_version, peer_version, resolve_python, start_peer
from .peers.storeio import read_store, save_plan
from .suite_fetch import FetchSections
from .suite_probe_runs import ProbeRunSections
from .suite_probes import ProbeSections
from .systems import (
    LocalSystem,
    PeerSystem,
    make_batches,
    plan_of,
)

__all__ = ["Settings", "QUICK", "FULL", "Run"]

N_BYTES, SEQLEN, BATCH = 2, 8192, 20  # the reference setting of every comparison
GPT_SEED = 1234


@dataclass(frozen=True)
class Settings:
    """Sizes and repetition counts of one mode."""

    mode: str
    reps: int
    batches: int
    batch_sizes: tuple[int, ...]
    small_files: int
    lognormal_files: int
    bands: tuple[tuple[int, int, int], ...]
    grid_batches: int
    grid_reps: int
    gperc_batches: int
    loader_batches: int
    loader_reps: int
    scale_sizes: tuple[int, ...]
    scale_magic_max: int
    gperc_scale_max: int
    workers: tuple[int, ...] = (0, 1, 2)
    table_sizes: tuple[int, ...] = (10_000, 100_000)  # in-memory structures without the files (scale_table)
    remote_objects: int = 256  # small objects read from each local server (see benchmarks/probes/remote.py)
    remote_delay_objects: int = 64  # read in the settings with an injected per-request delay
    remote_reps: int = 1
    gpu_feed: str = "smoke"  # "smoke": tiny, on the CPU when there is no GPU; "full": benchmarks.probes.gpu_feed
    content_small: int = 2000  # content pass (benchmarks.probes.content): small files, large files x MB
    content_large: tuple[int, int] = (2, 2)
    cold_files: int = 1000  # cold build with headers against gperc (benchmarks.probes.cold_build)
    cold_reps: int = 2
    dask_files: int = 2000  # files of the Dask build / pack comparison (see benchmarks/probes/dask.py)
    dask_reps: int = 1
    catalog_files: tuple[int, ...] = (2000,)  # catalog against Daft and DuckDB (benchmarks.probes.catalog_peers)
    catalog_reps: int = 1
    store_mib: int = 128  # the evicted store of coldstore and lance (benchmarks.probes.cold_store)
    store_reps: int = 1
    store_batches: int = 8


QUICK = Settings("quick", reps=3, batches=4, batch_sizes=(4, 20, 64), small_files=2000, lognormal_files=150,
                 bands=((256, 4096, 1000), (4096, 65536, 150), (65536, 1 << 20, 12)), grid_batches=3, grid_reps=1,
                 gperc_batches=1, loader_batches=30, loader_reps=1, scale_sizes=(1000, 10000),
                 scale_magic_max=1000, gperc_scale_max=1000, workers=(0, 2))
FULL = Settings("full", reps=5, batches=10, batch_sizes=(1, 4, 20, 64, 256), small_files=10000,
                lognormal_files=1200, bands=((256, 4096, 10000), (4096, 65536, 1500), (65536, 1 << 20, 120),
                                             (1 << 20, 4 << 20, 24)),
                grid_batches=5, grid_reps=2, gperc_batches=2, loader_batches=150, loader_reps=2,
                scale_sizes=(1000, 10000, 100000, 1000000), scale_magic_max=100000, gperc_scale_max=10000,
                table_sizes=(100_000, 1_000_000, 10_000_000), remote_objects=2000, remote_delay_objects=512,
                remote_reps=3, gpu_feed="full", content_small=20000, content_large=(8, 8), cold_files=10000,
                cold_reps=3, dask_files=20_000, dask_reps=3, catalog_files=(10_000, 100_000), catalog_reps=3,
                store_mib=1024, store_reps=3, store_batches=24)


def _summary(per_rep: list[float]) -> dict:
    return {"reps": per_rep, "median": median(per_rep)}


class Run(FetchSections, ProbeSections, ProbeRunSections):
    """A benchmark run writing corpora under ``data`` and scratch files under ``work``."""

    def __init__(self, settings: Settings, work: str, data: str, peer_python: dict[str, str],
                 peers: list[str] | None, log=print):
        self.s, self.work, self.data, self.log = settings, work, data, log
        self.peer_python = peer_python
        self.wanted = [*PEERS, *FRESH_PEERS] if peers is None else peers
        self.peers: dict = {}
        self.results: dict = {"settings": asdict(settings), "peers": {}, "started": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                                   time.gmtime())}
        os.makedirs(work, exist_ok=True)
        self.cache = os.path.join(work, "cache")

    # ------------------------------------------------------------------ set-up
    def environment(self) -> None:
        """Versions and machine description."""
        import torch

        import consumer

        cpu = "unknown"
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
        except OSError:
            pass
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
        try:
            proc = subprocess.run(["file", "--version"], check=False, capture_output=True, text=True)
            libmagic = proc.stdout.split("\n")[0]
        except OSError:
            libmagic = "file(1) not found"
        self.results["env"] = {"python": platform.python_version(), "numpy": np.__version__,
                               "torch": torch.__version__, "consumer": consumer.__version__, "libmagic": libmagic,
                               "cpu": cpu, "cores": os.cpu_count(), "mem_gib": round(mem, 1),
                               "platform": platform.platform(), "executable": sys.executable,
                               "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}

    def start_peers(self) -> None:
        """Start every wanted peer (imports run in parallel) and record which run and why the others do not."""
        started = {}
        for name in PEERS:
            if name not in self.wanted:
                self.results["peers"][name] = {"available": False, "reason": "not requested (--peers)"}
                continue
            python = resolve_python(name, self.peer_python)
            try:
                started[name] = (start_peer(name, python, os.path.join(self.work, f"peer-{name}.log")), python)
            except PeerUnavailable as exc:
                self.results["peers"][name] = {"available": False, "reason": str(exc), "python": python}
        for name, (peer, python) in started.items():
            try:
                version = peer_version(peer)
                self.peers[name] = peer
                self.results["peers"][name] = {"available": True, "python": python, **version}
            except PeerUnavailable as exc:
                self.results["peers"][name] = {"available": False, "python": python,
                                               "reason": f"{exc} (install: {PEERS[name].install})"}
            self.log(f"peer {name}: {self.results['peers'][name]}")
        for name in FRESH_PEERS:  # measured in fresh processes: only whether they import here
            self.results["peers"][name] = fresh_peer_version(name, resolve_python(name, self.peer_python)) \
                if name in self.wanted else {"available": False, "reason": "not requested (--peers)"}

    def close(self) -> None:
        """Stop every peer process."""
        for peer in self.peers.values():
            peer.close()
        self.peers.clear()

    def _peer_setup(self, name: str, key: str, args: dict) -> dict | None:
        """Set up and convert peer ``name`` for workload ``key``; None (and the reason recorded) if it fails."""
        peer = self.peers.get(name)
        if peer is None:
            return None
        try:
            peer.call("setup", key=key, args=args)
            return peer.call("convert", key=key)
        except (RuntimeError, PeerUnavailable) as exc:
            self.results["peers"][name].setdefault("failures", {})[key] = str(exc)
            self.log(f"peer {name} {key}: {exc}")
            if isinstance(exc, PeerUnavailable):
                self.peers.pop(name, None)
            return None

    def _fresh_peer(self, name: str, key: str, args: dict):
        def make():
            peer = start_peer(name, resolve_python(name, self.peer_python),
                              os.path.join(self.work, f"peer-{name}-loader.log"))
            peer_version(peer)
            peer.call("setup", key=key, args=args)
            peer.call("open", key=key)
            return peer
        return make

    # ------------------------------------------------------------------ helpers
    def _consumer(self, root: str, **kw):
        from consumer import Consumer

        t0 = time.perf_counter()
        ds = Consumer(root, cache_dir=self.cache, **kw)
        return ds, time.perf_counter() - t0

    def _interleave(self, systems: list, batches_of, reps: int, check: int = 2) -> dict:
        """Per system: per-repetition median seconds per batch, digests of the first batches, shape, errors."""
        out = {s.label: {"per_rep": [], "digests": None, "shape": None, "error": None} for s in systems}
        for rep in range(reps):
            for s in systems:
                row = out[s.label]
                if row["error"]:
                    continue
                try:
                    r = s.fetch_times(batches_of(s, rep), check if rep == 0 else 0)
                except (RuntimeError, PeerUnavailable) as exc:
                    row["error"] = str(exc)
                    self.log(f"  {s.label}: {exc}")
                    continue
                row["per_rep"].append(median(r["seconds"]))
                if rep == 0:
                    row["digests"], row["shape"] = r["digests"], r["shape"]
        return out

    # ------------------------------------------------------------------ workloads
    def workloads(self) -> None:
        """Fetch on the same bytes: consumer, naive, gperc and the peers, per corpus and style."""
        s = self.s
        corpora = {"small": make_corpus(self.data, "small", s.small_files, 0),
                   "lognormal": make_corpus(self.data, "lognormal", s.lognormal_files, 0)}
        res = self.results.setdefault("workloads", {})
        for cname, corpus in corpora.items():
            for style in ("diff", "concat"):
                key = f"{cname}-{style}"
                self.log(f"workload {key}")
                res[key] = self._workload(key, corpus, style)
        self.log("workload small-gpt")
        res["small-gpt"] = self._gpt_workload(corpora["small"])

    def _workload(self, key: str, corpus, style: str) -> dict:
        from consumer import Consumer

        s = self.s
        wdir = os.path.join(self.work, key)
        shutil.rmtree(wdir, ignore_errors=True)
        os.makedirs(wdir)
        raw, build_s = self._consumer(corpus.root, style=style, n_bytes=N_BYTES, seqlen=SEQLEN, metadata=None)
        rawh, build_h = self._consumer(corpus.root, style=style, n_bytes=N_BYTES, seqlen=SEQLEN, metadata="file")
        store = os.path.join(wdir, "store")
        t0 = time.perf_counter()
        raw.pack(store, format="megatron")
        pack_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        packed = Consumer.from_packed(store, style=style, seqlen=SEQLEN)
        open_s = time.perf_counter() - t0
        plan_path = os.path.join(wdir, "plan.npz")
        save_plan(plan_path, plan_of(raw))
        naive = (NaiveDiff if style == "diff" else NaiveConcat)(corpus.fps, N_BYTES, SEQLEN, raw.vocab)
        tokens = read_store(store)[0]
        sample_tokens = raw.index.sample_tokens()
        info = {"corpus": {"kind": corpus.kind, "files": corpus.n_files, "bytes": corpus.total_bytes,
                           "classes": {c: len(p) for c, p in corpus.fps.items()}},
                "samples": len(raw), "style": style, "n_bytes": N_BYTES, "seqlen": SEQLEN,
                "convert": {"consumer build (no header)": build_s, "consumer build (libmagic header)": build_h,
                            "consumer pack (.bin/.idx)": pack_s, "consumer open packed": open_s},
                "batch": {}}
        systems = [
            LocalSystem("consumer raw", lambda ids: raw.fetch(ids)["input_array"]),
            LocalSystem("consumer raw +header", lambda ids: rawh.fetch(ids)["input_array"], check=False,
                        note="libmagic header in every row (as gperc)"),
            LocalSystem("consumer packed", lambda ids: packed.fetch(ids)["input_array"]),
            LocalSystem("naive reader", naive.fetch),
        ]
        if "gperc" in self.peers:
            conv = self._peer_setup("gperc", key, {"fps": corpus.fps, "style": style, "n_bytes": N_BYTES,
                                                   "seqlen": SEQLEN})
            if conv is not None:
                info["convert"]["gperc 0.7 build"] = conv["seconds"]
                systems.append(PeerSystem("gperc 0.7", self.peers["gperc"], key, "default", check=False, warmup=0,
                                          note="rows differ by design (path in header, lossy concat)"))
        plan_args = {"store": store, "plan": plan_path, "workdir": wdir}
        titles = {("hf", "numpy"): "HF datasets (numpy)", ("hf", "torch"): "HF datasets (torch)",
                  ("megatron", "indexed"): "Megatron IndexedDataset", ("litdata", "default"): "litdata",
                  ("mosaic", "default"): "mosaic streaming"}
        for name in ("hf", "megatron", "litdata", "mosaic"):
            args = dict(plan_args)
            if name == "megatron":
                args.update(gpt_seq_length=SEQLEN, seed=GPT_SEED, eod=raw.vocab.eof, pad=raw.vocab.pad)
            conv = self._peer_setup(name, key, args)
            if conv is None:
                continue
            info["convert"][f"{PEERS[name].title} convert"] = conv["seconds"]
            for (peer_name, variant), title in titles.items():
                if peer_name == name:
                    systems.append(PeerSystem(title, self.peers[name], key, variant))
        floors = {}
        for b in s.batch_sizes:
            src = np.random.default_rng(0).integers(0, 60000, (b, SEQLEN))
            dst = np.empty_like(src)
            floors[b] = [LocalSystem("memcpy (limit)", lambda ids, d=dst, x=src: np.copyto(d, x), check=False),
                         LocalSystem("DRAM gather (limit)", gather_fetch(tokens, b, SEQLEN), check=False)]
        for b in s.batch_sizes:
            batches = [make_batches(len(raw), b, s.batches, seed=rep) for rep in range(s.reps)]
            systems_b = [x for x in systems if b == BATCH or x.label != "gperc 0.7"] + floors[b]

            def batches_of(system, rep, batches=batches):
                return batches[rep][:s.gperc_batches] if system.label == "gperc 0.7" else batches[rep]

            timed = self._interleave(systems_b, batches_of, s.reps)
            real = float(np.mean([sample_tokens[ids].sum() for ids in batches[0]]))
            ref = timed["consumer raw"]["digests"]
            for row in timed.values():
                row["equal_rows"] = (row["digests"] == ref) if row["digests"] else None
                row.pop("digests")
                row["median_s"] = median(row["per_rep"])
            info["batch"][b] = {"systems": timed, "real_tokens_per_batch": real}
        self.results.setdefault("notes", {})[key] = {x.label: x.note for x in systems if x.note}
        return info

    def _gpt_workload(self, corpus) -> dict:
        from consumer import Consumer

        s = self.s
        store = os.path.join(self.work, "small-concat", "store")
        raw, build_s = self._consumer(corpus.root, style="concat", n_bytes=N_BYTES, seqlen=SEQLEN, metadata=None,
                                      sampling="megatron", seed=GPT_SEED)
        packed = Consumer.from_packed(store, style="concat", seqlen=SEQLEN, sampling="megatron", seed=GPT_SEED)
        info = {"samples": len(packed), "seqlen": packed.seqlen, "convert": {"consumer build (no header)": build_s},
                "batch": {}}
        systems = [LocalSystem("consumer raw", lambda ids: raw.fetch(ids)["input_array"]),
                   LocalSystem("consumer packed", lambda ids: packed.fetch(ids)["input_array"])]
        if "megatron" in self.peers and "megatron" in self.results["peers"] and \
                "small-concat" not in self.results["peers"]["megatron"].get("failures", {}):
            systems.append(PeerSystem("Megatron GPTDataset", self.peers["megatron"], "small-concat", "gpt"))
            info["convert"]["Megatron-core GPTDataset index build"] = self.results["workloads"]["small-concat"][
                "convert"].get("Megatron-core convert")
        for b in s.batch_sizes:
            batches = [make_batches(len(packed), b, s.batches, seed=rep) for rep in range(s.reps)]
            timed = self._interleave(systems, lambda system, rep, batches=batches: batches[rep], s.reps)
            ref = timed["consumer raw"]["digests"]
            for row in timed.values():
                row["equal_rows"] = (row["digests"] == ref) if row["digests"] else None
                row.pop("digests")
                row["median_s"] = median(row["per_rep"])
            info["batch"][b] = {"systems": timed, "real_tokens_per_batch": float(b * packed.seqlen)}
        return info
