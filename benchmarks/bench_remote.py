"""Remote-source benchmark: listing + libmagic headers, concurrent vs one-at-a-time reads, block cache.

Servers, all on 127.0.0.1 in subprocesses: moto's S3 API in server mode, and the test suite's
``http.server`` with an added per-request delay standing in for the round trip to a real object store
(moto on localhost answers in a few ms of CPU, which hides what concurrency buys over a network).

Workload: N small objects (default 2,000, 256 B .. 4 KB, one third each text, random bytes, JSON).

Reported:
- index: objects/s of ``list_objects`` (one paginated listing) + ``describe_prefixes`` (libmagic from ranges);
- fetch: MB/s and tokens/s (n_bytes=2) reading every object whole with ``RemoteReader.read_ranges`` in batches
  of 256, with ``concurrency=64`` vs ``concurrency=1`` (one request after another), on moto and on the
  delayed HTTP server, and the ratio;
- cache: the same reads through the read-through block cache, cold (empty) vs warm.

Run: ``python benchmarks/bench_remote.py [--objects 2000] [--delay-ms 20]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from consumer.remote import list_objects, open_filesystem  # noqa: E402
from consumer.remote_meta import describe_prefixes  # noqa: E402
from consumer.remote_read import RemoteReader  # noqa: E402
from tests.remote_servers import file_server_process, moto_server  # noqa: E402

BATCH = 256


def make_objects(n: int, seed: int = 0) -> dict[str, bytes]:
    """n objects in three class prefixes (txt / bin / json), sizes uniform in [256, 4096]."""
    rng = np.random.default_rng(seed)
    words = np.array(list(b"abcdefghijklmnopqrstuvwxyz (),:=\n"), dtype=np.uint8)
    out = {}
    for i in range(n):
        cls = ("txt", "bin", "json")[i % 3]
        size = int(rng.integers(256, 4097))
        if cls == "bin":
            data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        elif cls == "txt":
            data = words[rng.integers(0, words.size, size)].tobytes()
        else:
            data = b'{"text": "' + words[rng.integers(0, 26, size - 12)].tobytes() + b'"}'
        out[f"{cls}/{i:07d}.{cls}"] = data
    return out


def read_all(reader: RemoteReader, listing) -> tuple[float, np.ndarray]:
    """Seconds to read every object whole in batches of BATCH, and the bytes read."""
    out = np.empty(int(listing.sizes.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(listing.sizes)[:-1]]).astype(np.int64)
    t = time.perf_counter()
    for lo in range(0, len(listing), BATCH):
        sl = slice(lo, lo + BATCH)
        reader.read_ranges(listing.urls[sl], np.zeros(len(listing.urls[sl]), np.int64), listing.sizes[sl], out,
                           offsets[sl], listing.etags[sl], listing.sizes[sl])
    return time.perf_counter() - t, out


def fetch_figures(name: str, so, listing, expected: bytes, results: dict) -> None:
    total = int(listing.sizes.sum())
    row = {}
    for label, conc in (("concurrent_64", 64), ("one_at_a_time", 1)):
        secs, out = read_all(RemoteReader(so, concurrency=conc), listing)
        if out.tobytes() != expected:
            raise SystemExit(f"{name} {label}: bytes differ from the uploaded objects")
        row[label] = {"s": round(secs, 3), "MB_per_s": round(total / secs / 1e6, 2),
                      "tokens_per_s": round(total / 2 / secs), "objects_per_s": round(len(listing) / secs)}
    row["speedup"] = round(row["one_at_a_time"]["s"] / row["concurrent_64"]["s"], 1)
    results[f"fetch_{name}"] = row
    print(f"{name:>10}: concurrent {row['concurrent_64']['MB_per_s']} MB/s, one at a time "
          f"{row['one_at_a_time']['MB_per_s']} MB/s, x{row['speedup']}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=2000)
    ap.add_argument("--delay-ms", type=float, default=20.0, help="per-request delay of the HTTP server")
    args = ap.parse_args()
    blobs = make_objects(args.objects)
    results: dict = {"objects": args.objects, "bytes": sum(map(len, blobs.values())), "cores": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp, moto_server() as endpoint:
        so = {"endpoint_url": endpoint, "key": "test", "secret": "test"}
        fs, _ = open_filesystem("s3://x", so)
        fs.mkdir("bench")
        fs.pipe({f"bench/data/{k}": v for k, v in blobs.items()})

        t = time.perf_counter()
        listing = list_objects("s3://bench/data/", so)
        t_list = time.perf_counter() - t
        t = time.perf_counter()
        describe_prefixes(listing.urls, listing.sizes, listing.etags, so)
        t_desc = time.perf_counter() - t
        results["index"] = {"list_s": round(t_list, 3), "describe_s": round(t_desc, 3),
                            "objects_per_s": round(len(listing) / (t_list + t_desc))}
        print(f"index: {results['index']}", flush=True)
        expected = b"".join(blobs[u[len("s3://bench/data/"):]] for u in listing.urls)
        fetch_figures("moto", so, listing, expected, results)

        cache_dir = os.path.join(tmp, "cache")
        reader = RemoteReader(so, cache_dir=cache_dir, cache_bytes="1GB")
        cold, out = read_all(reader, listing)
        warm, out2 = read_all(reader, listing)
        if out.tobytes() != expected or out2.tobytes() != expected:
            raise SystemExit("cache: bytes differ from the uploaded objects")
        results["cache_moto"] = {"cold_s": round(cold, 3), "warm_s": round(warm, 3),
                                 "warm_MB_per_s": round(len(expected) / warm / 1e6, 1),
                                 "speedup": round(cold / warm, 1), "hits": reader.cache.hits}
        print(f"cache: {results['cache_moto']}", flush=True)

        root = os.path.join(tmp, "http")
        for k, v in blobs.items():
            os.makedirs(os.path.dirname(os.path.join(root, k)), exist_ok=True)
            with open(os.path.join(root, k), "wb") as f:
                f.write(v)
        with file_server_process(root, args.delay_ms / 1000) as url:
            hl = list_objects(url)
            n = min(len(hl), 512)  # one-at-a-time at 20 ms per request: keep it to ~10 s
            sub = hl.select(np.arange(len(hl)) < n)
            expected_http = b"".join(blobs[u[len(url):]] for u in sub.urls)
            fetch_figures(f"http+{args.delay_ms:g}ms", None, sub, expected_http, results)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
