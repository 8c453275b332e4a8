"""Cold random fetch from a packed store whose pages are not in memory, against the ``os.pread`` floor.

A packed store (int32 tokens, ``concat`` rows of ``--seqlen`` tokens, ``--store-mib`` MiB; generated once under
``--data`` and reused) is evicted from the page cache with ``posix_fadvise(POSIX_FADV_DONTNEED)`` on the
benchmark's own files only (never the machine's caches). Then, per reader and repetition, a **fresh process**
opens the store and fetches ``--batches`` batches of ``--batch`` random rows. Reported per reader: ms per
batch (median over repetitions of the per-process median), the open time, and the read amplification: bytes
read from the device (``/proc/self/io`` ``read_bytes``, fetches only) per byte served (the rows' token bytes).

Readers (:mod:`benchmarks.peers.coldread`): ``consumer`` (``from_packed`` + ``fetch``), ``megatron``
(megatron-core ``IndexedDataset``, when its interpreter has it), ``lance`` (``take`` of the same rows written
as ``fixed_size_list<int32>``, converted to int64 torch; needs pylance, see ``benchmarks/setup_peers.sh``) and
``pread`` (exactly the rows' byte ranges: the floor). Every reader's first batch must equal the floor's rows.

    python -m benchmarks probe cold_store                      # 512 MiB store, 3 repetitions
    python -m benchmarks probe cold_store --store-mib 2048     # a store bigger than a small machine's cache
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys

import numpy as np

from ..children import peer_json
from ..measure import evict, median
from ..peers import ROOT, resolve_python
from ..peers.storeio import save_plan

NAME = "cold_store"
DESCRIPTION = "cold random fetch (store evicted with posix_fadvise): ms/batch and read amplification vs os.pread"
READERS = ("consumer", "megatron", "lance", "pread")
_FILE_MIB = 8  # raw file size of the generated corpus


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--store-mib", type=int, default=512, help="store size in MiB (int32 tokens; default 512)")
    parser.add_argument("--seqlen", type=int, default=8192, help="tokens per row")
    parser.add_argument("--batch", type=int, default=20, help="rows per batch")
    parser.add_argument("--batches", type=int, default=24, help="batches per fresh process")
    parser.add_argument("--reps", type=int, default=3, help="fresh processes per reader (interleaved)")
    parser.add_argument("--readers", default=",".join(READERS), help="comma list of " + ",".join(READERS))
    parser.add_argument("--data", default=os.path.join(ROOT, "benchmarks", ".data"), help="generated stores")
    parser.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH",
                        help="interpreter of megatron or lance (default: benchmarks/.venvs/NAME or this one)")


def _log(*a: object) -> None:
    print(*a, file=sys.stderr, flush=True)


def make_store(data: str, store_mib: int, seqlen: int) -> dict[str, str]:
    """The packed store, its plan and its Lance copy's folder under ``data`` (generated once; reused)."""
    from consumer import Consumer

    home = os.path.join(data, f"cold-store-{store_mib}-{seqlen}")
    paths = {"store": os.path.join(home, "store"), "plan": os.path.join(home, "plan.npz"),
             "lance": os.path.join(home, "rows.lance"), "home": home}
    if os.path.exists(os.path.join(home, ".complete")):
        return paths
    shutil.rmtree(home, ignore_errors=True)
    root = os.path.join(home, "files")
    rng = np.random.default_rng(0)
    n_files = max(2, store_mib // (2 * _FILE_MIB))  # 2 bytes per int32 token: the store is twice the raw bytes
    for k in range(n_files):
        folder = os.path.join(root, "ab"[k % 2])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{k:05d}.bin"), "wb") as f:
            f.write(rng.integers(0, 256, _FILE_MIB << 20, dtype=np.uint8).tobytes())
    _log(f"cold_store: packing {n_files} x {_FILE_MIB} MiB into {paths['store']}")
    raw = Consumer(root, style="concat", n_bytes=2, seqlen=seqlen, metadata=None, cache_dir=False)
    raw.pack(paths["store"], format="megatron")
    shutil.rmtree(root)
    from ..systems import plan_of

    save_plan(paths["plan"], plan_of(Consumer.from_packed(paths["store"], style="concat", seqlen=seqlen)))
    open(os.path.join(home, ".complete"), "w").close()
    return paths


def _child(python: str, args: list[str]) -> dict:
    return peer_json(python, "benchmarks.peers.coldread", args)


def _pythons(args: argparse.Namespace) -> dict[str, str]:
    given = dict(v.partition("=")[::2] for v in args.peer_python)
    return {r: resolve_python(r, given) if r in ("megatron", "lance") else sys.executable for r in READERS}


def _files(paths: dict[str, str], reader: str) -> list[str]:
    if reader == "lance":
        return [p for p in glob.glob(os.path.join(paths["lance"], "**"), recursive=True) if os.path.isfile(p)]
    return sorted(glob.glob(paths["store"] + "*"))


def measure_readers(paths: dict[str, str], readers: list[str], pythons: dict[str, str], batch: int,
                    n_batches: int, reps: int, work: str, passes: int = 1) -> dict:
    """Interleaved fresh-process runs of every reader on the evicted store: per reader, every run's figures
    (or the reason it is absent). ``passes`` 2 fetches the batches again, warm (``warm_seconds``)."""
    runs: dict[str, list[dict]] = {r: [] for r in readers}
    absent: dict[str, str] = {}
    n_rows = len(np.load(paths["plan"])["start"])
    for rep in range(reps):
        rng = np.random.default_rng([7, rep])
        ids = np.stack([rng.choice(n_rows, batch, replace=False) for _ in range(n_batches)]).astype(np.int64)
        ids_path = os.path.join(work, f"ids-{batch}-{rep}.npy")
        np.save(ids_path, ids)
        for reader in readers:
            if reader in absent:
                continue
            evict(_files(paths, reader))
            r = _child(pythons[reader], [reader, paths["store"], paths["plan"], ids_path, paths["lance"], str(passes)])
            if "error" in r:
                absent[reader] = r["error"]
                _log(f"cold_store: {reader} absent: {r['error']}")
                continue
            runs[reader].append(r)
            _log(f"cold_store: batch {batch} rep {rep} {reader}: {1e3 * median(r['seconds']):.2f} ms/batch, "
                 f"{r['read_bytes'] / max(r['served_bytes'], 1):.2f} read/served")
    return {"runs": {r: v for r, v in runs.items() if v}, "absent": absent}


def summarize(runs: dict[str, list[dict]]) -> dict:
    """Per reader: ms per batch, read amplification, open time, and whether its rows equal the floor's; plus
    each reader's time as a multiple of the ``pread`` floor's."""
    out: dict[str, dict] = {}
    ref = runs.get("pread", [{}])[0].get("digest")
    for reader, rs in runs.items():
        out[reader] = {"ms_per_batch": 1e3 * median(median(r["seconds"]) for r in rs),
                       "read_amplification": median(r["read_bytes"] / max(r["served_bytes"], 1) for r in rs),
                       "open_ms": 1e3 * median(r["open_s"] for r in rs), "processes": len(rs),
                       "served_mib_per_process": rs[0]["served_bytes"] / 2 ** 20,
                       "rows_equal_floor": None if ref is None else rs[0]["digest"] == ref}
    floor = out.get("pread", {}).get("ms_per_batch")
    for row in out.values():
        row["x_floor"] = row["ms_per_batch"] / floor if floor else None
    return out


def prepared(args: argparse.Namespace, known: tuple[str, ...]) -> tuple[list[str], dict[str, str], dict[str, str],
                                                                         dict[str, str], str]:
    """``--readers`` checked against ``known``, then :func:`prepare`: the readers, the store's paths, the peers'
    pythons, the absent peers and the folder for the id lists."""
    readers = [r for r in args.readers.split(",") if r]
    bad = [r for r in readers if r not in known]
    if bad:
        raise SystemExit(f"--readers expects a comma list of {known}, got {args.readers!r}")
    paths, pythons, absent = prepare(args, readers)
    return readers, paths, pythons, absent, os.path.join(paths["home"], "ids")


def prepare(args: argparse.Namespace, readers: list[str]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The store (generated once), its Lance copy when ``lance`` is wanted (written once), the interpreters;
    ``lance`` is taken out of ``readers`` with the reason when it cannot be written."""
    paths = make_store(args.data, args.store_mib, args.seqlen)
    pythons = _pythons(args)
    absent = {}
    if "lance" in readers and not os.path.exists(os.path.join(paths["lance"], "_versions")):
        w = _child(pythons["lance"], ["write-lance", paths["store"], paths["plan"], paths["lance"]])
        if w.get("error"):
            absent["lance"] = w["error"]
            readers.remove("lance")
    os.makedirs(os.path.join(paths["home"], "ids"), exist_ok=True)
    return paths, pythons, absent


def run(args: argparse.Namespace) -> dict:
    """Generate (once) and evict the store, run every reader in fresh processes, summarize."""
    readers, paths, pythons, absent, work = prepared(args, READERS)
    measured = measure_readers(paths, readers, pythons, args.batch, args.batches, args.reps, work)
    measured["absent"].update(absent)
    store_bytes = sum(os.path.getsize(p) for p in _files(paths, "consumer"))
    return {"store_mib": store_bytes / 2 ** 20, "seqlen": args.seqlen, "batch": args.batch, "batches": args.batches,
            "readers": summarize(measured["runs"]), "absent": measured["absent"],
            "pythons": {r: pythons[r] for r in readers}, "runs": measured["runs"]}


def render_section(res: dict | None) -> list[str]:
    """The report's markdown lines for these results (none when the section did not run)."""
    if not res:
        return []
    lines = ["## Cold store: random fetch from a store that is not in memory", "",
             f"A packed store of {res['store_mib']:.0f} MiB (int32 tokens, concat rows of {res['seqlen']}) evicted "
             "from the page cache with `posix_fadvise(POSIX_FADV_DONTNEED)` on its own files before each process; "
             f"each fresh process then fetches {res['batches']} batches of {res['batch']} random rows (int64 out). "
             "*bytes read per byte served*: `/proc/self/io` `read_bytes` during the fetches over the rows' token "
             "bytes; *open ms*: importing the reader's library and opening the store. Median over processes; "
             "readers interleaved. The `pread` row reads exactly each row's byte range: the floor.", "",
             "| reader | ms per batch | × pread floor | bytes read per byte served | open ms | rows = floor |",
             "|---|---|---|---|---|---|"]
    for reader, r in res["readers"].items():
        x = f"{r['x_floor']:.2f}" if r.get("x_floor") else "—"
        lines.append(f"| {reader} | {r['ms_per_batch']:.2f} | {x} | {r['read_amplification']:.2f} | "
                     f"{r['open_ms']:.0f} | {r['rows_equal_floor']} |")
    lines += [f"- {reader}: not measured ({why})" for reader, why in res.get("absent", {}).items()]
    return lines + [""]


def verdicts(res: dict | None) -> list[dict]:
    """The targets of this section (#27 item 1): cold fetch ≤ 1.3× the pread floor, amplification ≤ 2.0."""
    if not res:
        return []
    ours = res["readers"].get("consumer")
    if not ours or not ours.get("x_floor"):
        return [{"target": "cold fetch ≤ 1.3× the pread floor, read amplification ≤ 2.0", "figure": "—",
                 "met": None, "why": res.get("absent", {}).get("consumer", "consumer or the floor not measured")}]
    met = ours["x_floor"] <= 1.3 and ours["read_amplification"] <= 2.0
    return [{"target": "cold fetch ≤ 1.3× the pread floor, read amplification ≤ 2.0",
             "figure": f"{ours['x_floor']:.2f}× the floor, {ours['read_amplification']:.1f} bytes read per byte",
             "met": met, "why": "" if met else "a page fault on the memory map reads ahead far beyond the row"}]


if __name__ == "__main__":
    from ..registry import main as _main

    sys.exit(_main([NAME, *sys.argv[1:]]))
