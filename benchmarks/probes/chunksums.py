"""Per-chunk checksums of packed stores: first-touch verification throughput, and fetch overhead after it.

Packs one corpus of random files (no headers, ``n_bytes=2``: int32 tokens) into a Megatron store with chunk
sums, and makes a copy of it without them (hard links to the same ``.bin``, the sidecar without the
``chunksums`` field: a store as packed before chunk sums, which the fetch serves with its other checks only).

1. **Algorithms** on the same in-memory bytes, one thread: CRC-32C (google-crc32c), XXH3-64 (xxhash, when
   installed), sha256 (hashlib), GB/s per core, 1 MiB chunks.
2. **First touch**: a fresh verifier checks every chunk of the store's memory-mapped token data (page cache
   hot), one thread: GB/s per core, best of ``--repeat``. Also the whole first pass of fetches over every sample
   of a freshly opened store against the same pass over the store without sums (the difference is the
   verification, in GB/s of token data).
3. **After the first touch**: the fetch of random batches (``concat``, ``--seqlen`` tokens per sample) from
   the store with sums against the store without, interleaved, best of ``--repeat`` medians: (a) every chunk
   verified (the map says so in one comparison), (b) all but one chunk verified (the batch's chunks looked up
   in the map).

    python -m benchmarks probe chunksums --mib 256 --repeat 7
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from consumer import Consumer
from consumer.errors import ConsumerWarning
from consumer.fetch.reader import packed_runs
from consumer.formats.chunksums import DEFAULT_CHUNK_BYTES, ChunkVerifier, crc32c

from ..measure import best_of, median

NAME = "chunksums"
DESCRIPTION = "per-chunk checksums: algorithms, first-touch verification, fetch overhead after it"


def _corpus(root: Path, mib: int, seed: int = 0) -> list[str]:
    """Files of random bytes, 16..112 KiB each, ``mib`` MiB in all (n_bytes=2: ``mib`` * 2 MiB of int32 tokens)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    paths, total, i = [], 0, 0
    while total < mib << 20:
        n = int(rng.integers(16, 112)) << 10
        p = root / f"f{i:06d}.dat"
        p.write_bytes(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
        paths.append(str(p))
        total, i = total + n, i + 1
    return paths


def _without_sums(prefix: Path, copy: Path) -> None:
    """``copy``: the store at ``prefix`` as packed before chunk sums (data files hard-linked)."""
    for suffix in (".bin", ".idx", ".consumer.npz"):
        os.link(f"{prefix}{suffix}", f"{copy}{suffix}")
    side = json.loads(Path(f"{prefix}.consumer.json").read_text())
    del side["chunksums"]
    Path(f"{copy}.consumer.json").write_text(json.dumps(side))


def _open(prefix: Path, seqlen: int) -> Consumer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConsumerWarning)
        return Consumer.from_packed(prefix, style="concat", seqlen=seqlen)


def _algorithms(nbytes: int, repeat: int) -> dict[str, float]:
    data = np.random.default_rng(1).integers(0, 2**31, nbytes // 4, dtype=np.int32)
    raw = data.view(np.uint8)
    step = DEFAULT_CHUNK_BYTES
    out = {"crc32c (google-crc32c)": nbytes / best_of(
        lambda: [crc32c(raw[i:i + step]) for i in range(0, nbytes, step)], repeat) / 1e9}
    try:
        import xxhash  # noqa: PLC0415  (optional: measured when installed)

        out["xxh3-64 (xxhash)"] = nbytes / best_of(
            lambda: [xxhash.xxh3_64_intdigest(raw[i:i + step]) for i in range(0, nbytes, step)], repeat) / 1e9
    except ImportError:
        pass
    out["sha256 (hashlib)"] = nbytes / best_of(lambda: hashlib.sha256(raw).digest(), max(1, repeat // 2)) / 1e9
    return out


def _first_touch(prefix: Path, bare: Path, seqlen: int, repeat: int) -> dict[str, float]:
    ds = _open(prefix, seqlen)
    packed = ds.documents.source.tokens
    nbytes = int(packed.tokens.size) * packed.tokens.itemsize
    sums = packed.verifier.sums
    np.asarray(packed.tokens).sum()  # page cache hot
    direct = best_of(lambda: ChunkVerifier(sums, "bench", "bench.bin", packed.tokens.itemsize).check(
        packed.tokens, 0, nbytes), repeat)
    ids = np.arange(len(ds))
    batches = [ids[i:i + 64] for i in range(0, ids.size, 64)]
    with_sums, without = [], []
    for _ in range(repeat):  # interleaved: a fresh open of each store, one pass over every sample
        for store, into in ((prefix, with_sums), (bare, without)):
            fresh = _open(store, seqlen)
            t = time.perf_counter()
            for b in batches:
                fresh.fetch_numpy(b, ["input_array"])
            into.append(time.perf_counter() - t)
    extra = min(with_sums) - min(without)
    return {"bytes": nbytes, "verifier_gbps": nbytes / direct / 1e9, "first_pass_with_s": min(with_sums),
            "first_pass_without_s": min(without),
            "first_pass_verify_gbps": nbytes / extra / 1e9 if extra > 0 else float("inf")}


_CALLS = {"fetch_numpy(ids, ['input_array'])": lambda ds, ids: ds.fetch_numpy(ids, ["input_array"]),
          "fetch(ids) (torch, default columns)": lambda ds, ids: ds.fetch(ids)}


def _hot(prefix: Path, bare: Path, seqlen: int, batch: int, n_batches: int, repeat: int, keep_one: bool) -> list:
    a, b = _open(prefix, seqlen), _open(bare, seqlen)
    ids = np.arange(len(a))
    if keep_one:  # never touch the samples of the last chunk: the map is consulted at every batch
        start = packed_runs(a.index, a.documents)
        data = a.documents.source.tokens
        last = (data.verifier.sums.chunks - 1) * DEFAULT_CHUNK_BYTES // data.tokens.itemsize
        ids = ids[start + a.index.sample_tokens() <= last]
    for ds in (a, b):
        for i in range(0, ids.size, 256):
            ds.fetch_numpy(ids[i:i + 256], ["input_array"])
    verifier = a.documents.source.tokens.verifier
    assert (verifier.verified < verifier.sums.chunks) == keep_one
    rng = np.random.default_rng(batch)
    batches = [rng.choice(ids, batch, replace=False) for _ in range(n_batches)]
    out = []
    for call_name, call in _CALLS.items():
        per: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(repeat):  # interleaved: both stores in turn, each repetition
            for name, ds in (("with", a), ("without", b)):
                times = []
                for ids_ in batches:
                    t = time.perf_counter()
                    call(ds, ids_)
                    times.append(time.perf_counter() - t)
                per[name].append(median(times))
        w, wo = min(per["with"]), min(per["without"])
        out.append({"call": call_name, "batch": batch, "with_ms": w * 1e3, "without_ms": wo * 1e3,
                    "overhead": w / wo - 1})
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--mib", type=int, default=256, help="MiB of source files (twice that of int32 tokens)")
    parser.add_argument("--seqlen", type=int, default=2048)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")


def run(args: argparse.Namespace) -> dict:
    """Pack, then measure the three tables of the module docstring."""
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-chunksums-"))
    try:
        t = time.perf_counter()
        paths = _corpus(work / "data", args.mib)
        prefix, bare = work / "store", work / "bare"
        Consumer(paths, cache_dir=False, n_bytes=2, metadata=None).pack(prefix)
        _without_sums(prefix, bare)
        out: dict = {"store_mib": os.path.getsize(f"{prefix}.bin") / 2**20, "files": len(paths),
                     "chunk_mib": DEFAULT_CHUNK_BYTES >> 20,
                     "chunk_kib": DEFAULT_CHUNK_BYTES >> 10, "build_s": time.perf_counter() - t,
                     "algorithms_gbps": _algorithms(256 << 20, args.repeat),
                     "first_touch": _first_touch(prefix, bare, args.seqlen, args.repeat), "after_first_touch": []}
        for keep_one, label in ((False, "every chunk verified"), (True, "all but one chunk verified (map lookups)")):
            for batch in (1, 8, 64, 256):
                for r in _hot(prefix, bare, args.seqlen, batch, args.batches, args.repeat, keep_one):
                    out["after_first_touch"].append({"case": label, "batch": batch, **r})
        return out
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
