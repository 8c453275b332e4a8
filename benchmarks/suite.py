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
from .suite_probes import ProbeSections
from .systems import (
    LocalSystem,
    PeerSystem,
    consumer_loader,
    fetch_loader,
    has_out_dtype,
    make_batches,
    plan_of,
    transport_loader,
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


class Run(ProbeSections):
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

    # ------------------------------------------------------------------ consumer grid
    def grid(self) -> None:
        """consumer alone: source x style x n_bytes x seqlen x batch x query, libmagic headers on."""
        from consumer import Consumer

        s = self.s
        corpus = make_corpus(self.data, "small", s.small_files, 0)
        rows = []
        self.log("grid")
        for nb in (1, 2):
            for style in ("diff", "concat"):
                for L in (512, 8192):
                    raw, _ = self._consumer(corpus.root, style=style, n_bytes=nb, seqlen=L, metadata="file")
                    prefix = os.path.join(self.work, f"grid-nb{nb}", "store")
                    if not os.path.exists(prefix + ".idx"):
                        raw.pack(prefix)
                    packed = Consumer.from_packed(prefix, style=style, seqlen=L)
                    st = raw.index.sample_tokens()
                    for source, ds in (("raw", raw), ("packed", packed)):
                        for b in (20, 256):
                            for query in ("supervised", "mlm"):
                                batches = [make_batches(len(ds), b, s.grid_batches, seed=rep)
                                           for rep in range(s.grid_reps)]
                                per_rep = []
                                for rep in range(s.grid_reps):
                                    sys_ = LocalSystem("x", lambda ids, ds=ds, q=query: ds.fetch(ids, q), check=False)
                                    per_rep.append(median(sys_.fetch_times(batches[rep], 0)["seconds"]))
                                sec = median(per_rep)
                                real = float(np.mean([st[ids].sum() for ids in batches[0]]))
                                rows.append({"source": source, "style": style, "n_bytes": nb, "seqlen": L, "batch": b,
                                             "query": query, "ms": sec * 1e3, "samples_per_s": b / sec,
                                             "tokens_per_s": real / sec, "row_tokens_per_s": b * L / sec})
        self.results["grid"] = rows

    # ------------------------------------------------------------------ limits and out_dtype
    def limits(self) -> None:
        """Packed concat fetch against memcpy and the DRAM floor, for int64 and (when available) int32."""
        from consumer import Consumer

        s = self.s
        store = os.path.join(self.work, "small-concat", "store")
        packed = Consumer.from_packed(store, style="concat", seqlen=SEQLEN)
        tokens = read_store(store)[0]
        out = {"out_dtype_available": has_out_dtype(packed)}
        batches = [make_batches(len(packed), BATCH, s.batches * 4, seed=rep) for rep in range(s.reps)]
        systems = []
        for dt in (np.int64, np.int32):
            src = np.random.default_rng(0).integers(0, 60000, (BATCH, SEQLEN)).astype(dt)
            dst = np.empty_like(src)
            name = np.dtype(dt).name
            systems.append(LocalSystem(f"memcpy {name}", lambda ids, d=dst, x=src: np.copyto(d, x), check=False))
            systems.append(LocalSystem(f"DRAM gather {name}", gather_fetch(tokens, BATCH, SEQLEN, dt), check=False))
            if dt is np.int64:
                systems.append(LocalSystem("consumer packed int64", lambda ids: packed.fetch_numpy(ids)["input_array"],
                                           check=False))
            elif out["out_dtype_available"]:
                systems.append(LocalSystem("consumer packed int32", lambda ids: packed.fetch_numpy(
                    ids, out_dtype=np.int32)["input_array"], check=False))
        timed = self._interleave(systems, lambda system, rep: batches[rep], s.reps, check=0)
        out["systems"] = {k: {"median_s": median(v["per_rep"]), "per_rep": v["per_rep"]} for k, v in timed.items()}
        self.results["limits"] = out

    # ------------------------------------------------------------------ fetch paths (issue 20, items 1-3)
    def fetchpaths(self) -> None:
        """Per-call latency against Megatron-core and mosaic, packed against the gather floor, raw against the naive
        reader: :mod:`benchmarks.probes.fetch_paths` (its own peer processes, the same corpora)."""
        from .probes.fetch_paths import run_all

        self.results["fetchpaths"] = run_all(self.s.mode == "quick", self.work, self.data,
                                             [n for n in ("megatron", "mosaic") if n in self.peers], self.log)

    # ------------------------------------------------------------------ file size
    def filesize(self) -> None:
        """Fetch throughput of consumer (raw, packed) and the naive reader against file size."""
        from consumer import Consumer

        s = self.s
        rows = []
        for lo, hi, n in s.bands:
            corpus = make_corpus(self.data, "band", n, 0, band=(lo, hi))
            self.log(f"filesize band {lo}-{hi}")
            for style in ("diff", "concat"):
                raw, _ = self._consumer(corpus.root, style=style, n_bytes=N_BYTES, seqlen=SEQLEN, metadata=None)
                prefix = os.path.join(self.work, f"band-{lo}", "store")
                if not os.path.exists(prefix + ".idx"):
                    raw.pack(prefix)
                packed = Consumer.from_packed(prefix, style=style, seqlen=SEQLEN)
                naive = (NaiveDiff if style == "diff" else NaiveConcat)(corpus.fps, N_BYTES, SEQLEN, raw.vocab)
                systems = [LocalSystem("consumer raw", lambda ids, d=raw: d.fetch(ids)["input_array"]),
                           LocalSystem("consumer packed", lambda ids, d=packed: d.fetch(ids)["input_array"]),
                           LocalSystem("naive reader", naive.fetch)]
                batches = [make_batches(len(raw), BATCH, s.batches, seed=rep) for rep in range(s.reps)]
                timed = self._interleave(systems, lambda system, rep, b=batches: b[rep], s.reps)
                st = raw.index.sample_tokens()
                real = float(np.mean([st[ids].sum() for ids in batches[0]]))
                ref = timed["consumer raw"]["digests"]
                for label, row in timed.items():
                    sec = median(row["per_rep"])
                    rows.append({"band": [lo, hi], "mean_file_bytes": corpus.mean_file_bytes, "style": style,
                                 "system": label, "ms": sec * 1e3, "tokens_per_s": real / sec,
                                 "equal_rows": row["digests"] == ref})
        self.results["filesize"] = rows

    # ------------------------------------------------------------------ loaders
    def loader(self) -> None:
        """Batches/s delivered to the training loop with 0/1/2 workers, per system."""
        from consumer import Consumer

        s = self.s
        key = "small-diff"
        store = os.path.join(self.work, key, "store")
        packed = Consumer.from_packed(store, style="diff", seqlen=SEQLEN)
        n = max(min(s.loader_batches, len(packed) // BATCH - 2), 1)
        in_process = _InProcess(packed, n)
        systems = [LocalSystem("torch DataLoader transport (memcpy dataset)", None,
                               loader=transport_loader(len(packed), SEQLEN)),
                   LocalSystem("consumer fetch loop (in process, no loader)", None, loader=in_process)]
        dl = consumer_loader(packed)
        absent = {}
        if dl is None:
            absent["consumer ds.dataloader"] = "loader not available in this version"
        else:
            systems.insert(1, LocalSystem("consumer ds.dataloader", None, loader=dl))
            extra = [("consumer ds.dataloader, each batch copied out", consumer_loader(packed, copy=True)),
                     ("consumer ds.dataloader, transport='torch'", consumer_loader(packed, transport="torch"))]
            systems[2:2] = [LocalSystem(label, None, loader=f) for label, f in extra if f is not None]
        systems.append(LocalSystem("consumer ds.fetch via torch DataLoader", None, loader=fetch_loader(packed)))
        wl = self.results["peers"]
        plan_args = {"store": store, "plan": os.path.join(self.work, key, "plan.npz"), "workdir":
                     os.path.join(self.work, key)}
        for name, variant, title in (("hf", "torch", "HF datasets DataLoader"),
                                     ("megatron", "gpt", "Megatron GPTDataset DataLoader"),
                                     ("litdata", "default", "litdata StreamingDataLoader"),
                                     ("mosaic", "default", "mosaic StreamingDataset DataLoader")):
            pkey = "small-concat" if name == "megatron" else key
            if name not in self.peers or pkey in wl.get(name, {}).get("failures", {}):
                absent[title] = wl.get(name, {}).get("reason") or wl.get(name, {}).get("failures", {}).get(pkey, "")
                continue
            fresh = None
            if name == "mosaic":
                fresh = self._fresh_peer(name, pkey, plan_args)
            systems.append(PeerSystem(title, self.peers[name], pkey, variant, fresh_loader=fresh,
                                      note="GPT windows of the concat corpus (8193 tokens)" if name == "megatron"
                                      else ""))
        rows = {x.label: {w: [] for w in s.workers} for x in systems}
        errors = {}
        self.log(f"loader: {n} batches per measurement")
        for rep in range(s.loader_reps):
            for w in s.workers:
                for x in systems:
                    if x.label in errors or (x.label.startswith("consumer fetch loop") and w) or \
                            ("transport='torch'" in x.label and not w):
                        continue
                    try:
                        r = x.loader_times(BATCH, w, n, rep)
                    except (RuntimeError, PeerUnavailable) as exc:
                        errors[x.label] = str(exc)
                        self.log(f"  loader {x.label}: {exc}")
                        continue
                    rows[x.label][w].append(r)
        self.results["loader"] = {
            "batch": BATCH, "seqlen": SEQLEN, "batches": n, "absent": absent, "errors": errors,
            "notes": {x.label: x.note for x in systems if x.note},
            "systems": {label: {w: {"batches_per_s": median(r["batches_per_s"] for r in runs),
                                    "first_batch_s": median(r["first_batch_s"] for r in runs),
                                    "shape": runs[0]["shape"]} for w, runs in per_w.items() if runs}
                        for label, per_w in rows.items()}}


class _InProcess:
    """The loop without any loader: ``ds.fetch`` of seeded batches, in the training process."""

    def __init__(self, ds, n: int):
        self.ds, self.n = ds, n

    def __call__(self, batch_size: int, workers: int, seed: int):
        for ids in make_batches(len(self.ds), batch_size, self.n + 1, seed):
            yield self.ds.fetch(ids)["input_array"]
