"""Probe: random fetch from a packed store evicted from the page cache (the first epoch of a store bigger than RAM).

One store of ``--store-mb`` MB (int32 tokens, concat rows of ``--seqlen``) is packed once under ``--work``; for each
checksum chunk size of ``--chunks`` a twin store shares its token data (hard links) under sums of that size. Each
trial, for each reader, drops the store's own pages from the page cache (``posix_fadvise(POSIX_FADV_DONTNEED)`` on its
files, never the machine's caches) and starts a fresh process that opens the store and fetches ``--batches``
batches of ``--batch`` random rows, timing each and counting the bytes it read from the device (``/proc/self/io``
``read_bytes``). The readers, on the same rows:

- ``pread``: ``os.pread`` of exactly each row's byte range, converted into an int64 batch (the I/O floor);
- ``mmap``: slices of a ``numpy.memmap`` of the ``.bin``; ``megatron``: megatron-core's ``IndexedDataset`` reader;
- ``consumer-<chunk>``: ``Consumer.from_packed(...).fetch(ids)`` on the store with sums of that chunk size (``0k``:
  a store packed before chunk sums); ``advise-<chunk>``: the same opened with ``readahead=False`` (the setting a
  store bigger than memory gets by default: each batch's ranges advised to the kernel, no read-ahead);
- ``again-<chunk>`` / ``again-advise-<chunk>``: a second epoch in one process: the batches fetched once (every
  chunk verified), the store's pages evicted in the child, then the same batches timed;
- ``before-1024k`` (with ``--baseline DIR``): the ``consumer`` of another checkout on the 1 MiB-sums store;
- ``loader-<chunk>``: ``ds.dataloader(batch, num_workers=--workers)`` over that store for the same number of batches
  (its own random rows; worker reads are counted once the workers are reaped).

Result: per reader the median ms per batch over trials, its ratio to the ``pread`` floor of the same trial and the
read amplification (bytes read from the device per byte served). Run: ``python -m benchmarks.probes.cold_fetch``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

NAME = "cold_fetch"
DESCRIPTION = "random fetch from a packed store evicted from the page cache, against the os.pread floor"

_ITEM = 4  # int32 tokens (n_bytes=2)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "consumer-cold-fetch"),
                        help="where the store is packed once and kept")
    parser.add_argument("--store-mb", type=int, default=800, help="token data of the store, MB")
    parser.add_argument("--seqlen", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--batches", type=int, default=24)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--chunks", default="1024,64,16,4,0",
                        help="checksum chunk sizes (KiB) of the twin stores; 0: a twin without sums")
    parser.add_argument("--readers", default="pread,mmap,megatron,consumer,loader")
    parser.add_argument("--workers", type=int, default=2, help="loader worker processes")
    parser.add_argument("--baseline", default=None,
                        help="root of another checkout: adds its consumer on the 1 MiB-sums store ('before-1024k')")


def _store(work: Path, mb: int, seqlen: int, chunks: list[int]) -> tuple[Path, dict[int, Path]]:
    """The base store (packed once) and a twin per chunk size sharing its token data (hard links)."""
    from consumer import Consumer
    from consumer.formats.chunksums import sums_of_file
    from consumer.packed.sums import SIDECAR_KEY, SUMS_SUFFIX, sidecar_entry, write_sums_file

    base = work / "base"
    if not (work / "base.consumer.json").exists():
        corpus = work / "corpus" / "c"
        shutil.rmtree(work / "corpus", ignore_errors=True)
        corpus.mkdir(parents=True)
        rng = np.random.default_rng(0)
        per_file = 4 << 20  # raw bytes per file (2 bytes a token)
        for i in range(max(1, (mb << 19) // per_file)):
            (corpus / f"f{i:05d}.bin").write_bytes(rng.integers(0, 256, per_file, dtype=np.uint8).tobytes())
        Consumer(str(work / "corpus"), style="concat", n_bytes=2, seqlen=seqlen, metadata=None,
                 cache_dir=False).pack(str(base))
        shutil.rmtree(work / "corpus")
    twins = {}
    for kib in chunks:
        twin = work / f"sums{kib}k"
        if not Path(str(twin) + ".consumer.json").exists():
            for suffix in (".bin", ".idx", ".consumer.npz"):
                dst = Path(str(twin) + suffix)
                dst.unlink(missing_ok=True)
                os.link(str(base) + suffix, dst)
            data = Path(str(base) + ".bin")
            side = json.loads(Path(str(base) + ".consumer.json").read_text())
            side.pop(SIDECAR_KEY, None)  # 0: a store as packed before chunk sums
            if kib:
                sums = sums_of_file(data, 0, data.stat().st_size, kib << 10)
                sums_path = Path(str(twin) + SUMS_SUFFIX)
                write_sums_file(sums_path, sums)
                side[SIDECAR_KEY] = sidecar_entry(sums_path.name, sums_path.stat().st_size, sums)
            Path(str(twin) + ".consumer.json").write_text(json.dumps(side))
        twins[kib] = twin
    return base, twins


def _read_bytes() -> int:
    with open("/proc/self/io", encoding="ascii") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def _fetcher(spec: dict) -> Any:
    """The child's fetch function for ``spec["reader"]`` (opened outside the timing)."""
    reader, prefix, L = spec["reader"], spec["prefix"], spec["seqlen"]
    start, length = np.load(spec["runs"]), np.load(spec["lengths"])

    def rows(ids: np.ndarray, read) -> np.ndarray:
        out = np.zeros((ids.size, L), dtype=np.int64)
        for r, i in enumerate(ids.tolist()):
            s, n = int(start[i]), int(length[i])
            out[r, :n] = read(s, n)
        return out

    if reader == "pread":
        fd = os.open(prefix + ".bin", os.O_RDONLY)
        return lambda ids: rows(ids, lambda s, n: np.frombuffer(os.pread(fd, n * _ITEM, s * _ITEM), np.int32))
    if reader == "mmap":
        mm = np.memmap(prefix + ".bin", dtype=np.int32, mode="r")
        return lambda ids: rows(ids, lambda s, n: mm[s:s + n])
    if reader == "megatron":
        from megatron.core.datasets.indexed_dataset import IndexedDataset

        bin_reader = IndexedDataset(prefix, mmap=True).bin_reader
        return lambda ids: rows(ids, lambda s, n: bin_reader.read(np.int32, n, s * _ITEM))
    import torch  # noqa: F401  (imported by the first fetch otherwise: seconds, not I/O)

    from consumer import Consumer

    readahead = False if reader.endswith("advise") else None
    ds = Consumer.from_packed(prefix, style="concat", seqlen=L, readahead=readahead)
    if reader.startswith("again"):  # a second epoch: every chunk verified once, then the pages evicted
        import mmap

        from benchmarks.measure import evict

        for ids in spec["batches"]:
            ds.fetch(np.asarray(ids, dtype=np.int64))
        # pages mapped into this process survive posix_fadvise: unmap them from its page tables first (memory
        # pressure on a store bigger than RAM reclaims mapped pages the same way)
        base = ds._built.documents.source.tokens.tokens.array
        while base is not None and not isinstance(base, mmap.mmap):
            base = getattr(base, "_mmap", None) or getattr(base, "base", None)
        if base is not None:
            base.madvise(mmap.MADV_DONTNEED)
        evict(str(p) for p in Path(prefix).parent.glob(Path(prefix).name + ".*"))
    return lambda ids: ds.fetch(ids)["input_array"]


def _child(spec: dict) -> dict:
    """Runs in a fresh process: fetch the batches cold, or iterate a loader; times and device bytes."""
    import warnings

    warnings.simplefilter("ignore")
    L, B = spec["seqlen"], spec["batch"]
    batches = [np.asarray(b, dtype=np.int64) for b in spec["batches"]]
    if spec["reader"] == "loader":
        from consumer import Consumer

        ds = Consumer.from_packed(spec["prefix"], style="concat", seqlen=L)
        before = _read_bytes()
        t0 = time.perf_counter()
        stamps = []
        loader = ds.dataloader(B, num_workers=spec["workers"], epoch_size=B * len(batches), drop_last=True)
        for _ in loader:
            stamps.append(time.perf_counter())
        del loader
        served = len(stamps) * B * L * _ITEM
        steady = (stamps[-1] - stamps[0]) / max(len(stamps) - 1, 1)
        return {"ms_per_batch": 1e3 * steady, "first_batch_ms": 1e3 * (stamps[0] - t0), "batches": len(stamps),
                "read_bytes": _read_bytes() - before, "served": served}
    fetch = _fetcher(spec)
    length = np.load(spec["lengths"])
    before = _read_bytes()
    seconds = []
    digest = 0
    for ids in batches:
        t = time.perf_counter()
        out = fetch(ids)
        seconds.append(time.perf_counter() - t)
        rows = np.array(out, dtype=np.int64)
        rows[np.arange(L) >= length[ids][:, None]] = 0  # the padding: its id is each reader's own
        digest ^= hash(rows.tobytes())
    served = int(sum(int(length[b].sum()) for b in batches)) * _ITEM
    return {"ms_per_batch": 1e3 * float(np.mean(seconds)), "read_bytes": _read_bytes() - before, "served": served,
            "digest": digest}


def _spawn(spec: dict) -> dict:
    root = spec.get("code") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=root)  # the checkout whose consumer the child imports
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise RuntimeError(f"{spec['reader']}: child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> dict:
    """Pack (once), then per trial and reader: evict, fetch in a fresh process; medians and ratios."""
    from benchmarks.measure import evict  # noqa: PLC0415  (the parent only: children run this file alone)
    from consumer import Consumer
    from consumer.fetch.reader import packed_runs

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    chunks = [int(c) for c in str(args.chunks).split(",") if c]
    base, twins = _store(work, args.store_mb, args.seqlen, chunks)
    ds = Consumer.from_packed(str(base), style="concat", seqlen=args.seqlen)
    np.save(work / "runs.npy", packed_runs(ds.index, ds.documents))
    np.save(work / "lengths.npy", ds.index.sample_tokens())
    n = len(ds)
    readers: list[tuple[str, Path, str]] = []
    for name in str(args.readers).split(","):
        if name in ("consumer", "loader", "advise", "again", "again-advise"):
            readers += [(f"{name}-{kib}k", twins[kib], name) for kib in chunks]
        elif name:
            readers.append((name, base, name))
    if args.baseline:
        readers.append(("before-1024k", twins.get(1024, base), "consumer"))
    trials: dict[str, list[dict]] = {label: [] for label, _, _ in readers}
    for trial in range(args.trials):
        rng = np.random.default_rng(1000 + trial)
        batches = [rng.choice(n, args.batch, replace=False).tolist() for _ in range(args.batches)]
        for label, prefix, reader in readers:
            evict(str(p) for p in prefix.parent.glob(prefix.name + ".*"))  # the store's own files only
            spec = {"reader": reader, "prefix": str(prefix), "seqlen": args.seqlen, "batch": args.batch,
                    "batches": batches, "runs": str(work / "runs.npy"), "lengths": str(work / "lengths.npy"),
                    "workers": args.workers, "code": args.baseline if label.startswith("before") else None}
            trials[label].append(_spawn(spec))
    floor = [t["ms_per_batch"] for t in trials.get("pread", [])]
    result: dict[str, Any] = {"store_bytes": int(Path(str(base) + ".bin").stat().st_size), "samples": n,
                              "seqlen": args.seqlen, "batch": args.batch, "batches": args.batches,
                              "trials": args.trials, "readers": {}}
    for label, runs in trials.items():
        ms = [t["ms_per_batch"] for t in runs]
        entry = {"ms_per_batch": float(np.median(ms)),
                 "amplification": float(np.median([t["read_bytes"] / t["served"] for t in runs]))}
        if floor and not label.startswith("loader"):
            entry["x_pread"] = float(np.median([m / f for m, f in zip(ms, floor)]))
        if "first_batch_ms" in runs[0]:
            entry["first_batch_ms"] = float(np.median([t["first_batch_ms"] for t in runs]))
        result["readers"][label] = entry
    fetchers = [label for label in trials if not label.startswith("loader")]
    result["same_rows"] = all(len({trials[label][t]["digest"] for label in fetchers}) == 1
                              for t in range(args.trials))
    return result


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(_child(json.loads(sys.argv[2]))))
        sys.exit(0)
    _parser = argparse.ArgumentParser(prog=f"python -m benchmarks.probes.{NAME}", description=DESCRIPTION)
    add_arguments(_parser)
    print(json.dumps(run(_parser.parse_args()), indent=1))
