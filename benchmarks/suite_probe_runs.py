"""Suite sections that are one or two runs of a registered probe, at the sizes of ``docs/benchmarks.md``.

Each section of :data:`SPECS` runs its probes through the registry (:func:`benchmarks.registry.run_probe`: the
probe's own ``run(args)``, the same measurement as ``python -m benchmarks probe NAME ARGS``) and stores, per run,
``results[section]["runs"][sub] = {"probe", "command", "load_average", "duration_s", "results"}`` (or ``"error"``
for a run that failed while another run of the section succeeded). The views in :mod:`benchmarks.views` render
these documents; a key a probe does not (or no longer) write renders as "not measured in this run".

Argument templates name ``{work}`` (the run's scratch folder), ``{data}`` (its corpora) and ``{root}`` (this
checkout); the command shown in the report replaces the checkout's path by ``.``. Quick arguments are tiny and
used only when a quick run names the section (``--quick --sections chunksums``): the default quick run skips
these sections (:data:`FULL_ONLY`).
"""

from __future__ import annotations

import json
import os
import shlex
import time
from typing import Any

from .peers import ROOT, resolve_python

__all__ = ["SPECS", "FULL_ONLY", "ProbeRunSections", "add_probe_document"]

# section -> [(sub, probe, full argv, quick argv)]; the order of SPECS is the order of the sections in a run
SPECS: dict[str, list[tuple[str, str, list[str], list[str]]]] = {
    "chunksums": [("", "chunksums", ["--mib", "256", "--repeat", "5", "--batches", "200"],
                   ["--mib", "8", "--repeat", "1", "--batches", "10"])],
    "batchorder": [("", "batch_order", ["--samples", "1000000", "--batch-size", "32", "--repeat", "5"],
                    ["--samples", "20000", "--repeat", "1"])],
    "corpusreport": [("", "report", ["--files", "100000", "--records", "100000", "--repeat", "7"],
                      ["--files", "2000", "--records", "1000", "--repeat", "1"])],
    "coldfetch": [("", "cold_fetch", ["--work", "{work}/coldfetch", "--store-mb", "512", "--trials", "2",
                                      "--chunks", "1024,64,16,0", "--readers", "pread,mmap,megatron,consumer,loader"],
                   ["--work", "{work}/coldfetch", "--store-mb", "16", "--trials", "1", "--batches", "4",
                    "--chunks", "1024,16", "--readers", "pread,mmap,consumer,loader"]),
                  ("8000", "cold_fetch", ["--work", "{work}/coldfetch", "--store-mb", "512", "--trials", "3",
                                          "--seqlen", "8000", "--chunks", "64,16", "--readers", "pread,mmap,consumer"],
                   []),
                  ("advise", "cold_fetch", ["--work", "{work}/coldfetch", "--store-mb", "512", "--trials", "2",
                                            "--chunks", "16,0", "--readers", "pread,advise,again,again-advise"],
                   [])],
    "warmfetch": [("", "warm_fetch", ["--baseline", "{root}", "--prefix", "{work}/coldfetch/sums16k",
                                      "--baseline-prefix", "{work}/coldfetch/sums1024k", "--rounds", "3"],
                   ["--baseline", "{root}", "--prefix", "{work}/coldfetch/sums16k", "--baseline-prefix",
                    "{work}/coldfetch/sums1024k", "--rounds", "1", "--rows", "200", "--sizes", "1,20"])],
    "smallbatches": [("", "small_batches", ["--work", "{work}/smallbatches", "--rounds", "5", "--calls", "20000"],
                      ["--work", "{work}/smallbatches", "--rounds", "1", "--calls", "500"])],
    "sqlmargin": [("", "sql_timeout_margin", ["--repeat", "5"], ["--repeat", "1"])],
    "records": [("", "records_index", ["--docs", "1000000", "--repeat", "3", "--parts", "ratio,jsonl"],
                 ["--docs", "20000", "--repeat", "1", "--parts", "ratio,jsonl"]),
                ("memory", "records_index", ["--memory-docs", "10000000", "--parts", "memory"],
                 ["--memory-docs", "20000", "--parts", "memory"]),
                ("jsonl", "records_index", ["--kind", "jsonl", "--docs", "300000", "--repeat", "3"],
                 ["--kind", "jsonl", "--docs", "5000", "--repeat", "1"])],
    "recinterop": [("", "records_interop", ["--docs", "50000"], ["--docs", "1000"])],
    "recremote": [("", "records_remote", ["--docs", "50000", "--row-group", "5000"],
                   ["--docs", "2000", "--row-group", "500"])],
    "coldcatalog": [("1e5", "cold_catalog", ["--files", "100000", "--data-root", "{data}"],
                     ["--files", "2000", "--data-root", "{data}"]),
                    ("1e6", "cold_catalog", ["--files", "1000000", "--data-root", "{data}"], [])],
    "jsonlpeers": [("", "jsonl_peers", ["--records", "1000000", "--shards", "64", "--reps", "3",
                                        "--data", "{data}/jsonl_peers"],
                    ["--records", "5000", "--shards", "4", "--reps", "1", "--data", "{data}/jsonl_peers"])],
    "contentfloor": [("", "content_floor", ["--mib", "256", "--repeat", "5"], ["--mib", "16", "--repeat", "1"])],
    "floors": [("raw_row", "raw_row_floor", ["--files", "2000", "--repeat", "5", "--data-root", "{data}"],
                ["--files", "200", "--rows", "200", "--repeat", "1", "--data-root", "{data}"]),
               ("libmagic", "libmagic_floor", ["--files", "5000", "--data-root", "{data}"],
                ["--files", "200", "--probe", "100", "--data-root", "{data}"])],
    "clusterlisting": [("", "cluster_listing", ["--files", "100000", "--reps", "2"],
                        ["--files", "2000", "--reps", "1"])],
    "openscale": [("", "open_scale", ["--docs", "100000,1000000,10000000,100000000", "--dir", "{work}/openscale"],
                   ["--docs", "10000,100000", "--repeat", "1", "--dir", "{work}/openscale"])],
    # issue #36: the packed style's plan, what each style makes of a corpus, packed rows against concat rows
    "styles": [("plan", "packed_plan", ["--docs", "10000000", "--seqlen", "2048", "--classes", "1,8"],
                ["--docs", "100000", "--classes", "1,8"]),
               ("report", "style_report", ["--demo-max-files", "200", "--demo-seqlens", "2048,512", "--records",
                                           "50000", "--jsonl-seqlens", "2048"],
                ["--demo-max-files", "20", "--demo-seqlens", "512", "--records", "2000", "--shards", "2"]),
               ("fetch", "style_fetch", ["--files", "10000", "--reps", "100"], ["--files", "1000", "--reps", "5"])],
    # issue #36: causal labels and document columns against the plain query, cu_seqlens of a large batch
    "objectives": [("", "objective_costs", ["--files", "10000", "--reps", "60", "--fresh-reps", "100"],
                    ["--files", "1000", "--reps", "5", "--fresh-reps", "5", "--cu-files", "2000", "--cu-reps", "10"])],
    # issue #37: a mixture's batch against one store's, its open against its parts' opens, the blend index
    "mixtures": [("costs", "mixture_costs", ["--files", "10000", "--reps", "100", "--open-samples", "100000,1000000",
                                             "--open-repeat", "5", "--dir", "{work}/mixtures"],
                  ["--files", "1000", "--reps", "5", "--open-samples", "10000,100000", "--open-repeat", "1",
                   "--dir", "{work}/mixtures"]),
                 ("blend", "blend_index", ["--sizes", "10000000,100000000", "--parts", "10", "--repeat", "3"],
                  ["--sizes", "1000000", "--parts", "10"])],
}
FULL_ONLY = tuple(SPECS)  # the default quick run leaves these out (see the module docstring)


def add_probe_document(res: dict, value: str) -> None:
    """``SECTION=PATH``: the probe document at PATH (a probe's ``--out``) as the run of its probe in probe-run
    section SECTION in the results ``res``, marked as run alone (the report says so and gives its date); in a
    section of several probes the runs of the others are kept, so each is added with its own ``--add-probe``.
    ValueError naming the argument for an unknown section, or a document of a probe the section does not run."""
    from .registry import validate

    section, sep, path = value.partition("=")
    if not sep or section not in SPECS:
        raise ValueError(f"--add-probe expects SECTION=PATH with SECTION in {sorted(SPECS)}, got {value!r}")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    validate(doc)
    probes = list(dict.fromkeys(probe for _, probe, _, _ in SPECS[section]))
    if doc["probe"] not in probes:
        names = " or ".join(repr(p) for p in probes)
        raise ValueError(f"--add-probe {section}: expected a document of probe {names}, got {doc['probe']!r}")
    probe = doc["probe"]
    sub = next(sub for sub, p, _, _ in SPECS[section] if p == probe)  # a section's probes run once each
    flags = []
    for key, v in doc["args"].items():
        if v is None or v is False:
            continue
        flags += [f"--{key.replace('_', '-')}"] + ([] if v is True else [str(v)])
    command = ("python -m benchmarks probe " + shlex.join([probe, *flags])).replace(ROOT + os.sep, "")
    entry = {"probe": probe, "command": command, "load_average": doc["machine"]["load_average"],
             "duration_s": doc["duration_s"], "results": doc["results"], "alone": True, "started": doc["started"]}
    if len(SPECS[section]) == 1:
        res[section] = {"runs": {sub: entry}}
    else:  # the other probes' runs of the section stay (each added alone, or from the suite run)
        res.setdefault(section, {}).setdefault("runs", {})[sub] = entry


class ProbeRunSections:
    """Suite sections of :data:`SPECS` (a mixin of :class:`benchmarks.suite.Run`)."""

    s: Any
    work: str
    data: str
    peer_python: dict[str, str]
    wanted: list[str]
    results: dict
    log: Any

    def _peer_ok(self, name: str) -> bool:
        return name in self.wanted and bool(self.results.get("peers", {}).get(name, {}).get("available"))

    def peer_pythons(self) -> dict[str, str]:
        """The interpreters of the peers this run passes to probes (by peer name)."""
        return {"daft": resolve_python("daft", self.peer_python)} if self._peer_ok("daft") else {}

    def _extra_args(self, probe: str, argv: list[str]) -> list[str]:
        """Arguments that depend on the peers of this run."""
        if probe == "cold_catalog":
            if self._peer_ok("daft"):
                return ["--daft-python", resolve_python("daft", self.peer_python)]
            return ["--skip", "daft"]
        if probe == "jsonl_peers":
            if self._peer_ok("daft"):
                return ["--peer-python", f"daft={resolve_python('daft', self.peer_python)}"]
            return ["--systems", "consumer,consumer_cached,consumer_pool,duckdb,duckdb_text"]
        if probe == "open_scale":
            if self._peer_ok("megatron"):
                return ["--megatron-python", resolve_python("megatron", self.peer_python)]
            return ["--skip-megatron"]
        readers = argv[argv.index("--readers") + 1].split(",") if "--readers" in argv else []
        if probe == "cold_fetch" and "megatron" in readers and not self._peer_ok("megatron"):
            return ["--readers", ",".join(r for r in readers if r != "megatron")]
        return []

    def _run_spec(self, section: str) -> None:
        """Every probe run of ``section`` (see the module docstring)."""
        from .registry import discover, load, parser_for, run_probe

        quick = self.s.mode != "full"
        runs: dict[str, dict] = {}
        errors: list[BaseException] = []
        for sub, probe, full_argv, quick_argv in SPECS[section]:
            template = quick_argv if quick else full_argv
            if quick and not template and sub:
                continue  # a full-only size of this section
            if probe not in discover():
                runs[sub] = {"probe": probe, "absent": f"probe {probe!r} is not in this tree"}
                continue
            argv = [a.format(work=self.work, data=self.data, root=ROOT) for a in template]
            argv += self._extra_args(probe, argv)
            unknown = parser_for(load(probe)).parse_known_args(argv)[1]
            if unknown:  # the probe changed under this spec: say so rather than guess
                runs[sub] = {"probe": probe, "absent": f"probe {probe!r} has no option {unknown[0]!r}"}
                continue
            command = "python -m benchmarks probe " + shlex.join([probe, *argv]).replace(ROOT + os.sep, "")
            command = command.replace(ROOT, ".")
            for name, python in self.peer_pythons().items():  # an interpreter's path is this machine's
                command = command.replace(python, f"$BENCH_PYTHON_{name.upper()}")
            self.log(f"{section}: {command}")
            load_avg = [round(x, 2) for x in os.getloadavg()]
            t0 = time.perf_counter()
            try:
                doc = run_probe(probe, argv)
            except Exception as exc:  # noqa: BLE001  (one run of several: the others still count)
                if len(SPECS[section]) == 1:
                    raise
                errors.append(exc)
                runs[sub] = {"probe": probe, "command": command, "error": f"{type(exc).__name__}: {exc}"[:500]}
                continue
            runs[sub] = {"probe": probe, "command": command, "load_average": load_avg,
                         "duration_s": time.perf_counter() - t0, "results": doc["results"]}
        if errors and len(errors) == len([r for r in runs.values() if "absent" not in r]):
            raise errors[0]
        self.results[section] = {"runs": runs}

    def chunksums(self) -> None:
        """Chunk checksums of packed stores: algorithms, first touch, fetch overhead after it."""
        self._run_spec("chunksums")

    def batchorder(self) -> None:
        """An epoch plan's batches against a bare permutation."""
        self._run_spec("batchorder")

    def corpusreport(self) -> None:
        """The corpus report of 10^5 files against its own statements."""
        self._run_spec("corpusreport")

    def coldfetch(self) -> None:
        """Cold random fetch per checksum chunk size against the pread floor, mmap and megatron-core."""
        self._run_spec("coldfetch")

    def warmfetch(self) -> None:
        """Warm random fetch on the 16 KiB-sums store against the 1 MiB-sums store (coldfetch's stores)."""
        self._run_spec("warmfetch")

    def smallbatches(self) -> None:
        """One row per call through the public API against megatron-core's get."""
        self._run_spec("smallbatches")

    def sqlmargin(self) -> None:
        """Seconds a DuckDB statement runs past its timeout."""
        self._run_spec("sqlmargin")

    def records(self) -> None:
        """Documents inside containers: lines index, JSONL parse rate, peak RSS."""
        self._run_spec("records")

    def recinterop(self) -> None:
        """Records interoperability (when the probe is in this tree)."""
        self._run_spec("recinterop")

    def recremote(self) -> None:
        """Parquet and gzip containers over HTTP and S3: bytes requested per byte of the object."""
        self._run_spec("recremote")

    def coldcatalog(self) -> None:
        """Cold catalog to the first GROUP BY at 10^5 and 10^6 files against Daft and DuckDB."""
        self._run_spec("coldcatalog")

    def jsonlpeers(self) -> None:
        """A folder of JSONL shards to the first count: consumer against Daft's and DuckDB's JSON readers."""
        self._run_spec("jsonlpeers")

    def contentfloor(self) -> None:
        """The content pass on a large file against its floor."""
        self._run_spec("contentfloor")

    def floors(self) -> None:
        """A raw one-file row against a naive read; the cold build with headers against libmagic alone."""
        self._run_spec("floors")

    def clusterlisting(self) -> None:
        """Listing a local folder on Dask workers against the local scan."""
        self._run_spec("clusterlisting")

    def openscale(self) -> None:
        """Opening a .bin/.idx store of 10^5..10^8 documents against megatron-core, and SQL over it."""
        self._run_spec("openscale")

    def styles(self) -> None:
        """Pretraining rows (#36): planning the packed style, each style's padding and cuts, packed against concat."""
        self._run_spec("styles")

    def objectives(self) -> None:
        """Causal labels and document columns against the plain query (#36), cu_seqlens of a large batch."""
        self._run_spec("objectives")

    def mixtures(self) -> None:
        """Mixtures (#37): a batch against one store's, the open against the parts' opens, the blend index."""
        self._run_spec("mixtures")
