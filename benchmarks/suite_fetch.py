"""The suite's in-process sections after the workloads: grid, limits, fetchpaths, filesize and loader (a mixin of
:class:`benchmarks.suite.Run`, which holds the settings ``s``, the folders ``work`` and ``data``, the started
``peers``, ``log``, ``results`` and the helpers ``_consumer`` and ``_interleave``)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .corpora import make_corpus
from .measure import gather_fetch, median
from .naive import NaiveConcat, NaiveDiff
from .peers import PeerUnavailable
from .peers.storeio import read_store
from .systems import (
    LocalSystem,
    PeerSystem,
    consumer_loader,
    fetch_loader,
    has_out_dtype,
    make_batches,
    transport_loader,
)

__all__ = ["FetchSections"]

N_BYTES, SEQLEN, BATCH = 2, 8192, 20  # the reference setting of every comparison (as in benchmarks.suite)


class FetchSections:
    """Suite sections measured in this process (each writes ``results[section]``)."""

    s: Any
    work: str
    data: str
    peers: dict
    results: dict
    log: Any
    _consumer: Any
    _interleave: Any
    _fresh_peer: Any

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
