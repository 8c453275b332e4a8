"""Remote packed stores and shared indexes: what opening a store in object storage costs, and what one
shared index saves a torch.distributed job.

Servers on 127.0.0.1: moto's S3 API in server mode (a subprocess) behind the test suite's counting proxy,
and the test suite's ``http.server`` in a subprocess with a per-request delay standing in for a network
round trip.

Reported:
- open: seconds to ``from_packed`` the same store locally, from S3 cold (empty cache_dir: the index files are
  copied) and warm (copied already), and the GET requests each remote open sends (medians of ``--repeats``);
- fetch: tokens/s reading every sample (diff, seqlen 512: one range per sample) in batches of 64, local vs S3
  (moto directly, no proxy), and S3 through the read-through cache, first epoch (cold) vs second (warm);
- ranks: two gloo processes building ``Consumer("s3://...")`` with one shared cache_dir, shared (rank 0 builds)
  vs ``distributed=False`` (each rank builds): GET requests per rank (listing pages and object reads) and
  each rank's build seconds.

Run: ``python -m benchmarks probe remote_packed [--objects 2000] [--delay-ms 20] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from consumer import Consumer
from consumer.sources.urls import open_filesystem
from tests.helpers.remote_servers import faulty_proxy, file_server_process, moto_server  # the suite's servers

NAME = "remote_packed"
DESCRIPTION = "remote packed stores: open cost, fetch over S3, one shared index across ranks"

ROOT = Path(__file__).resolve().parents[2]
_RANK_WORKER = "tests.helpers.rank_worker"
BATCH = 64


def write_files(root: Path, n: int, seed: int = 0) -> None:
    """n files of 256 B .. 8 KB in three class folders."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        cls = ("a", "b", "c")[i % 3]
        (root / cls).mkdir(parents=True, exist_ok=True)
        (root / cls / f"{i:07d}.bin").write_bytes(rng.integers(0, 256, int(rng.integers(256, 8193)),
                                                               dtype=np.uint8).tobytes())


def tokens_per_s(ds: Consumer) -> float:
    t0 = time.perf_counter()
    total = 0
    for lo in range(0, len(ds), BATCH):
        ids = np.arange(lo, min(lo + BATCH, len(ds)))
        ds.fetch_numpy(ids, ["input_array"])
        total += int(ds.index.sample_tokens()[ids].sum())
    return total / (time.perf_counter() - t0)


def timed_open(prefix: str, **options) -> tuple[float, Consumer]:
    t0 = time.perf_counter()
    ds = Consumer.from_packed(prefix, seqlen=512, **options)
    return time.perf_counter() - t0, ds


def ranks(tmp: Path, endpoint: str, share: bool) -> list[dict]:
    """Two gloo ranks building the bucket's dataset; GETs and build seconds per rank."""
    out = []
    with faulty_proxy(endpoint) as (p0, f0), faulty_proxy(endpoint) as (p1, f1):
        cache = str(tmp / f"ranks-{share}")
        init = f"file://{tmp / f'rendezvous-{share}'}"
        procs = [subprocess.Popen([sys.executable, "-m", _RANK_WORKER, str(r), "2", init, ep, "s3://bench/corpus/",
                                   cache, str(tmp / f"rank{r}-{share}.json"), *([] if share else ["--no-share"])],
                                  cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
                 for r, ep in enumerate((p0, p1))]
        for p in procs:
            p.wait()
        import pickle

        for r, f in enumerate((f0, f1)):
            got = pickle.loads((tmp / f"rank{r}-{share}.json").read_bytes())
            out.append({"rank": r, "cache": got["info"]["cache"], "seconds": round(got["info"]["seconds"], 3),
                        "listing_gets": f.gets_by_path.get("/bench", 0), "gets": f.gets})
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)


def run(args: argparse.Namespace) -> dict:  # 55 lines: one measurement, its servers in one with-block
    """Every figure of the module docstring."""
    results: dict = {"objects": args.objects}
    with tempfile.TemporaryDirectory() as tmp_, moto_server() as endpoint:
        tmp = Path(tmp_)
        write_files(tmp / "corpus", args.objects)
        Consumer(str(tmp / "corpus"), cache_dir=False).pack(tmp / "store" / "corpus")
        fs, _ = open_filesystem("s3://bench", {"endpoint_url": endpoint, "key": "test", "secret": "test"})
        fs.mkdir("bench")
        for f in sorted((tmp / "store").iterdir()):
            fs.put(str(f), f"bench/store/{f.name}")
        for f in sorted((tmp / "corpus").rglob("*.bin")):
            fs.pipe(f"bench/corpus/{f.relative_to(tmp / 'corpus')}", f.read_bytes())
        results["store_bytes"] = {f.name: f.stat().st_size for f in (tmp / "store").iterdir()}
        with faulty_proxy(endpoint) as (proxy, faults):
            so = {"endpoint_url": proxy, "key": "test", "secret": "test"}
            opens: dict[str, list] = {"local": [], "s3_cold": [], "s3_warm": [], "gets_cold": [], "gets_warm": []}
            for k in range(args.repeats):
                opens["local"].append(timed_open(str(tmp / "store" / "corpus"))[0])
                for kind in ("cold", "warm"):
                    before = faults.gets
                    seconds, ds = timed_open("s3://bench/store/corpus", storage_options=so, cache_dir=tmp / f"c{k}")
                    opens[f"s3_{kind}"].append(seconds)
                    opens[f"gets_{kind}"].append(faults.gets - before)
            results["open_seconds"] = {k: round(statistics.median(v), 4) for k, v in opens.items()}
        so = {"endpoint_url": endpoint, "key": "test", "secret": "test"}
        local = Consumer.from_packed(str(tmp / "store" / "corpus"), seqlen=512)
        _, remote = timed_open("s3://bench/store/corpus", storage_options=so, cache_dir=tmp / "direct")
        _, cached = timed_open("s3://bench/store/corpus", storage_options=so, cache_dir=tmp / "direct",
                               remote_cache="1GB")
        results["fetch_tokens_per_s"] = {"local": round(tokens_per_s(local)), "s3": round(tokens_per_s(remote)),
                                         "s3_cache_cold": round(tokens_per_s(cached)),
                                         "s3_cache_warm": round(tokens_per_s(cached))}
        with file_server_process(tmp / "store", args.delay_ms / 1000) as url:
            seconds, ds = timed_open(url + "corpus", cache_dir=tmp / "http")
            results["open_seconds"][f"http_cold_{args.delay_ms:g}ms"] = round(seconds, 4)
        results["ranks_shared"] = ranks(tmp, endpoint, True)
        results["ranks_each"] = ranks(tmp, endpoint, False)
    return results
