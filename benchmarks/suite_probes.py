"""The sections of a suite run that are measured by probes or fresh processes: remote, content, cold, gpu,
dask, query, catalog, coldstore, lance and scale (a mixin of :class:`benchmarks.suite.Run`, which holds the
settings ``s``, the folders ``work`` and ``data``, ``peer_python``, ``wanted``, ``log`` and ``results``)."""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any

from .children import child_build, child_json
from .corpora import make_corpus
from .peers import PeerUnavailable, peer_version, resolve_python, start_peer

__all__ = ["ProbeSections"]

N_BYTES, SEQLEN = 2, 8192


class ProbeSections:
    """Suite sections run through a probe's measurement (each writes ``results[section]``)."""

    s: Any
    work: str
    data: str
    peer_python: dict[str, str]
    wanted: list[str]
    results: dict
    log: Any

    # ------------------------------------------------------------------ remote
    def remote(self) -> None:
        """Object storage and HTTP on 127.0.0.1: concurrent vs one-at-a-time reads per server, with and without
        an injected per-request delay; index and block-cache figures (:mod:`benchmarks.probes.remote`)."""
        from .probes.remote import measure as measure_remote

        s = self.s
        self.results["remote"] = measure_remote(s.remote_objects, s.remote_delay_objects, 20.0, s.remote_reps,
                                                os.path.join(self.work, "remote"), log=self.log)

    # ------------------------------------------------------------------ content pass and cold build
    def content(self) -> None:
        """The content pass against a plain read (:mod:`benchmarks.probes.content`)."""
        from .probes.content import measure as measure_content

        s = self.s
        root = os.path.join(self.work, "content")
        shutil.rmtree(root, ignore_errors=True)
        try:
            self.results["content"] = measure_content(s.content_small, s.content_large[0], s.content_large[1],
                                                      os.cpu_count() or 1, s.reps, root, build=False, log=self.log)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def cold(self) -> None:
        """Cold build with libmagic headers against gperc 0.7 (:mod:`benchmarks.probes.cold_build`)."""
        from .probes.cold_build import measure as measure_cold

        s = self.s
        self.results["cold"] = measure_cold(s.cold_files, s.cold_reps, min(2000, s.cold_files), self.data,
                                            os.path.join(self.work, "cold"), log=self.log,
                                            gperc="gperc" in self.wanted, peer_python=self.peer_python)

    # ------------------------------------------------------------------ GPU feed
    def gpu(self) -> None:
        """Training a byte-level model from ``ds.dataloader`` (:mod:`benchmarks.probes.gpu_feed`): the full
        measurement in full mode (skipped with the reason without a CUDA device), the CPU smoke run in quick mode."""
        from .probes.gpu_feed import FULL_GPU, SMOKE
        from .probes.gpu_feed import measure as measure_gpu

        settings = FULL_GPU if self.s.gpu_feed == "full" else SMOKE
        self.log(f"gpu feed ({self.s.gpu_feed})")
        self.results["gpu"] = measure_gpu(settings, self.data, os.path.join(self.work, "gpu"), log=self.log)

    # ------------------------------------------------------------------ dask
    def dask(self) -> None:
        """Build and pack on Dask with 1, 2, 3 workers against the local engine, the 1-worker overhead, the
        scheduling share and a 10^6-row Parquet catalog's GROUP BY (:mod:`benchmarks.probes.dask`)."""
        from .probes.dask import measure as measure_dask

        try:
            import distributed  # noqa: F401
        except ImportError as e:
            self.results["dask"] = {"absent": f"dask.distributed is not installed (pip install -e \".[dask]\"): {e}"}
            return
        self.results["dask"] = measure_dask(self.s.dask_files, self.s.dask_reps, os.path.join(self.work, "dask"),
                                            self.data, log=self.log)

    # ------------------------------------------------------------------ query
    def query(self) -> None:
        """The query engine against DuckDB on an Arrow table of the same rows (:mod:`benchmarks.probes.query_engine`):
        10^5 rows (quick) or up to 10^7 (full), the byte predicate and first statement on real files."""
        from .probes.query_engine import measure as measure_query

        full = self.s.mode == "full"
        sizes = (100_000, 1_000_000, 10_000_000) if full else (100_000,)
        self.results["query"] = measure_query(sizes, 100_000 if full else 5_000, 7 if full else 3, log=self.log)

    # ------------------------------------------------------------------ probes against Daft, DuckDB, Lance
    def _probe(self, section: str, name: str, argv: list[str]) -> None:
        """Run probe ``name`` through the registry (the same measurement as ``python -m benchmarks probe``);
        its results become this section's, and its command is recorded."""
        from .registry import run_probe

        peers = [f"--peer-python={n}={p}" for n, p in self.peer_python.items() if n in ("megatron", "daft", "lance")]
        self.log(f"{section}: python -m benchmarks probe {name} {' '.join(argv)}")
        self.results[section] = run_probe(name, [*argv, *peers, "--data", self.data])["results"]
        self.results[section]["command"] = f"python -m benchmarks probe {name} {' '.join(argv)}"

    def _available(self, name: str) -> bool:
        return bool(self.results["peers"].get(name, {}).get("available"))

    def catalog(self) -> None:
        """Catalog build to the first answer and the byte predicate against Daft and DuckDB (fresh processes)."""
        s = self.s
        systems = ["consumer", "duckdb"] + (["daft"] if self._available("daft") else [])
        self._probe("catalog", "catalog_peers", ["--files", ",".join(map(str, s.catalog_files)), "--reps",
                                                 str(s.catalog_reps), "--systems", ",".join(systems)])
        if not self._available("daft"):
            self.results["catalog"]["sizes"] = {n: {**v, "absent": {**v["absent"], "daft": self.results["peers"].get(
                "daft", {}).get("reason", "not requested")}} for n, v in self.results["catalog"]["sizes"].items()}

    def _store_readers(self, *names: str) -> str:
        have = {"megatron": "megatron" in self.wanted, "lance": self._available("lance")}
        return ",".join(n for n in names if have.get(n, True))

    def coldstore(self) -> None:
        """Random fetch from a store evicted from the page cache, fresh processes, against the pread floor."""
        s = self.s
        self._probe("coldstore", "cold_store", ["--store-mib", str(s.store_mib), "--reps", str(s.store_reps),
                                                "--readers", self._store_readers("consumer", "megatron", "lance",
                                                                                 "pread")])

    def lance(self) -> None:
        """Random fetch cold and warm against Lance's take, at 20 and 1 rows of 8192."""
        s = self.s
        self._probe("lance", "lance_fetch", ["--store-mib", str(s.store_mib), "--reps", str(s.store_reps),
                                             "--batches", str(s.store_batches),
                                             "--readers", self._store_readers("consumer", "lance", "pread")])

    # ------------------------------------------------------------------ scale
    def scale(self) -> None:
        """Cold build, warm reopen and peak RSS against corpus size (fresh processes)."""
        s = self.s
        rows = []
        for n in s.scale_sizes:
            self.log(f"scale {n}")
            t0 = time.perf_counter()
            corpus = make_corpus(self.data, "small", n, 1)
            gen_s = time.perf_counter() - t0
            row = {"files": n, "bytes": corpus.total_bytes, "generate_s": gen_s}
            for label, metadata in (("plain", None), ("magic", "file")):
                if metadata and n > s.scale_magic_max:
                    continue
                cache = os.path.join(self.work, f"scale-cache-{n}-{label}")
                shutil.rmtree(cache, ignore_errors=True)
                cold = child_build(corpus.root, cache, metadata)
                warm = child_build(corpus.root, cache, metadata)
                shutil.rmtree(cache, ignore_errors=True)
                row[label] = {"cold": cold, "warm": warm}
            if n <= s.gperc_scale_max and "gperc" in self.results["peers"] and \
                    self.results["peers"]["gperc"].get("available"):
                row["gperc"] = self._gperc_build(corpus, n)
            rows.append(row)
            self.log(f"  {json.dumps(row)[:300]}")
        self.results["scale"] = rows
        table = []
        for n in s.table_sizes:
            self.log(f"scale table {n} (synthetic file table, no files)")
            cache = os.path.join(self.work, f"table-cache-{n}")
            shutil.rmtree(cache, ignore_errors=True)
            table.append(child_json(["-m", "benchmarks.scale_table", str(n), cache]))
            shutil.rmtree(cache, ignore_errors=True)
            self.log(f"  {json.dumps({k: v for k, v in table[-1].items() if k != 'stages'})[:300]}")
        self.results["scale_table"] = table

    def _gperc_build(self, corpus, n: int) -> dict:
        try:
            peer = start_peer("gperc", resolve_python("gperc", self.peer_python),
                              os.path.join(self.work, "peer-gperc-scale.log"))
            base = peer_version(peer)["peak_rss_mb"]
            peer.call("setup", key="scale", args={"fps": corpus.fps, "style": "diff", "n_bytes": N_BYTES,
                                                  "seqlen": SEQLEN})
            r = peer.call("convert", key="scale")
            peer.close()
            return {"wall_s": r["seconds"], "peak_rss_mb": r["peak_rss_mb"], "import_rss_mb": base}
        except (RuntimeError, PeerUnavailable) as exc:
            return {"error": str(exc)}
