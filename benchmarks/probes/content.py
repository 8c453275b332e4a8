"""Content pass benchmark (issue: content-aware SQL).

Workload: a generated corpus of ``--small`` files of 256 B .. 4 KB (one third each random bytes,
text-like and zero-heavy) and ``--large`` files of ``--large-mb`` MB each, in a temporary directory.
Every file is read once first so the page cache is warm: the figures compare CPU work, not the disk.

Reported, all measured in this one run, each the best of ``--repeat`` rounds (every round runs each variant
in turn, so the load of a shared machine falls on all alike), with ``--workers`` threads or processes
(default: every core, so both cores of the reference machine are busy):
- the content pass (:func:`consumer.catalog.content.compute_content`: sha256 + histogram + stats) in MB/s,
  in threads (its default) and with ``processes=True``;
- a plain read of the same files with the same threads, chunk size and reusable buffers
  (open, readv into the buffer until EOF, close): the page-cache read speed, the ceiling;
- MB per CPU-second (process CPU time, all threads, and the worker processes a pass started): robust on a
  machine shared with others;
- the single-thread speed of sha256 alone, of ``np.bincount`` alone and of the pass's byte-pair count
  on a 1 MiB buffer, which explain where the time of the pass goes;
- the cost added to a cold build: ``Consumer(dir, cache_dir=<empty>)`` (libmagic + index) of the
  small corpus, then ``Catalog.ensure_content`` of the same files (what the first query naming a
  content column pays), and a second ``ensure_content`` (everything cached: what later builds pay).

Run: ``python -m benchmarks probe content [--small 20000] [--large 8] [--large-mb 8] [--no-build] [--json]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from consumer import Consumer
from consumer.catalog.catalog import CATALOG_NAME, Catalog
from consumer.catalog.content import READ_CHUNK, compute_content

NAME = "content"
DESCRIPTION = "the content pass (sha256, histogram, stats) against a plain read of the same files"

MB = 1e6


def make_files(root: str, n_small: int, n_large: int, large_mb: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Small files (256 B .. 4 KB, three kinds) in class folders, and large random-ish files."""
    rng = np.random.default_rng(seed)
    words = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz_ (),:=\n", dtype=np.uint8)
    small, large = [], []
    for cls in ("random", "text", "sparse"):
        os.makedirs(os.path.join(root, "small", cls), exist_ok=True)
    for i in range(n_small):
        cls = ("random", "text", "sparse")[i % 3]
        n = int(rng.integers(256, 4097))
        if cls == "random":
            data = rng.integers(0, 256, n, dtype=np.uint8)
        elif cls == "text":
            data = words[rng.integers(0, words.size, n)]
        else:
            data = rng.integers(0, 256, n, dtype=np.uint8) * (rng.random(n) < 0.2)
        path = os.path.join(root, "small", cls, f"{i:07d}.bin")
        with open(path, "wb") as f:
            f.write(data.astype(np.uint8).tobytes())
        small.append(path)
    os.makedirs(os.path.join(root, "large"), exist_ok=True)
    for i in range(n_large):
        data = rng.integers(0, 256, large_mb * 1_000_000, dtype=np.uint8)
        data[: data.size // 3] = words[rng.integers(0, words.size, data.size // 3)]  # part text, part noise
        path = os.path.join(root, "large", f"{i:03d}.bin")
        with open(path, "wb") as f:
            f.write(data.tobytes())
        large.append(path)
    return small, large


def plain_read(paths: list[str], workers: int, chunk: int = READ_CHUNK, files_per_task: int = 32) -> int:
    """Read every file with the same threads, chunking and reusable buffers as the content pass."""
    import threading

    local = threading.local()

    def run(part: list[str]) -> int:
        buf = getattr(local, "buf", None)
        if buf is None:
            buf = local.buf = np.empty(chunk, dtype=np.uint8)
        view = memoryview(buf)
        total = 0
        for p in part:
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
            try:
                os.fstat(fd)
                while n := os.readv(fd, [view]):
                    total += n
                os.fstat(fd)
            finally:
                os.close(fd)
        return total

    parts = [paths[i:i + files_per_task] for i in range(0, len(paths), files_per_task)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return sum(pool.map(run, parts))


def content_pass(paths: list[str], workers: int, processes: bool | None = None) -> int:
    """Run the content pass, consuming results as they come (as the catalog does)."""
    return sum(s.size for s in compute_content(paths, workers=workers, processes=processes))


def timed_children(fn, repeat: int) -> tuple[float, float]:
    """Like :func:`timed`, the CPU time including the worker processes a run started and ended."""
    import resource

    def cpu() -> float:
        a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

    runs = []
    for _ in range(repeat):
        c0, t0 = cpu(), time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0, cpu() - c0))
    return min(runs)


def best(fn, repeat: int) -> float:
    """Best wall time of ``repeat`` runs."""
    return timed(fn, repeat)[0]


def timed(fn, repeat: int) -> tuple[float, float]:
    """(wall, CPU) seconds of the run with the best wall time of ``repeat`` runs; CPU time is the
    process's (every thread), which a machine shared with other jobs inflates far less than wall time."""
    runs = []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    return min(runs)


def single_thread_kernels(repeat: int) -> dict:
    """MB/s of sha256 alone, of np.bincount alone and of the pass's byte histogram on a 1 MiB buffer
    (one thread)."""
    from consumer.catalog.histogram import byte_histogram

    buf = np.random.default_rng(1).integers(0, 256, READ_CHUNK, dtype=np.uint8)
    loops = 64
    sha = best(lambda: [hashlib.sha256(buf).digest() for _ in range(loops)], repeat)
    hist = best(lambda: [np.bincount(buf, minlength=256) for _ in range(loops)], repeat)
    pairs = best(lambda: [byte_histogram(buf) for _ in range(loops)], repeat)
    return {"sha256_MBps": loops * buf.size / sha / MB, "bincount_MBps": loops * buf.size / hist / MB,
            "pair_count_MBps": loops * buf.size / pairs / MB}


def measure(n_small: int, n_large: int, large_mb: int, workers: int, repeat: int, root: str, build: bool = True,
            log=print) -> dict:
    """Every figure of the module docstring, on files generated under ``root``, as a JSON-able dict."""
    os.makedirs(root, exist_ok=True)
    small, large = make_files(root, n_small, n_large, large_mb)
    out: dict = {"workers": workers, "cpus": os.cpu_count(), "chunk": READ_CHUNK, "repeat": repeat}
    for name, paths in (("small", small), ("large", large)):
        size = sum(os.path.getsize(p) for p in paths)
        plain_read(paths, workers)  # warm the page cache
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in ("read", "content", "processes")}
        for _ in range(repeat):  # interleaved: each round measures every variant in turn
            runs["read"].append(timed(lambda p=paths: plain_read(p, workers), 1))
            runs["content"].append(timed_children(lambda p=paths: content_pass(p, workers), 1))
            runs["processes"].append(timed_children(lambda p=paths: content_pass(p, workers, True), 1))
        (t_read, c_read), (t_content, c_content), (t_proc, c_proc) = (
            min(runs[k]) for k in ("read", "content", "processes"))
        out[name] = {"files": len(paths), "MB": size / MB, "read_MBps": size / t_read / MB,
                     "content_MBps": size / t_content / MB, "ratio_to_read": t_read / t_content,
                     "content_files_per_s": len(paths) / t_content,
                     "processes_MBps": size / t_proc / MB, "processes_ratio_to_read": t_read / t_proc,
                     "read_MB_per_cpu_s": size / c_read / MB, "content_MB_per_cpu_s": size / c_content / MB,
                     "processes_MB_per_cpu_s": size / c_proc / MB,
                     "load_average": os.getloadavg()[0]}
        log(f"  content pass {name}: {out[name]['ratio_to_read']:.2f} of a plain read")
    out["kernels_one_thread"] = single_thread_kernels(repeat)
    out["cold_build"] = None
    if build:  # cost added to a cold build (small corpus: libmagic and the index dominate a build)
        builds, firsts, agains = [], [], []
        for r in range(repeat):
            cache = os.path.join(root, f"cache{r}")
            t0 = time.perf_counter()
            ds = Consumer(os.path.join(root, "small"), cache_dir=cache)
            builds.append(time.perf_counter() - t0)
            sizes = np.array([os.path.getsize(p) for p in ds.files], dtype=np.int64)
            mtimes = np.array([os.stat(p).st_mtime_ns for p in ds.files], dtype=np.int64)
            cat = Catalog(os.path.join(cache, CATALOG_NAME))
            t0 = time.perf_counter()
            cat.ensure_content(ds.files, sizes, mtimes)
            firsts.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            cat.ensure_content(ds.files, sizes, mtimes)
            agains.append(time.perf_counter() - t0)
            cat.close()
            ds.close()
        out["cold_build"] = {"files": len(small), "build_s": min(builds), "content_first_s": min(firsts),
                             "content_cached_s": min(agains), "added_fraction": min(firsts) / min(builds)}
    return out


def render_section(res: dict | None) -> list[str]:
    """The report's markdown lines for the ``content`` results (none when the section did not run)."""
    if not res:
        return []
    out = ["## Content pass", "",
           "sha256, byte histogram, entropy, printable and zero fractions of every file "
           "(`consumer.catalog.content.compute_content`, what the first SQL statement naming a content column "
           f"runs), against a plain read of the same files (open, `readv` into a reusable buffer until EOF, "
           f"close) with the same {res['workers']} workers; page cache warm; best of {res['repeat']} interleaved "
           "rounds; the pass in threads (its default) and with `processes=True` (forked workers). Targets: "
           "≥ 0.8 of the plain read on small files, ≥ 0.5 of it per core on large files.", ""]
    head = ["files", "MB", "plain read MB/s", "content MB/s", "÷ read", "processes=True ÷ read",
            "MB per CPU-s: read / content / processes", "load avg"]
    rows = []
    for name in ("small", "large"):
        o = res[name]
        rows.append([f"{o['files']:,} {name}", f"{o['MB']:.1f}", f"{o['read_MBps']:,.0f}", f"{o['content_MBps']:,.0f}",
                     f"**{o['ratio_to_read']:.2f}**", f"{o['processes_ratio_to_read']:.2f}",
                     f"{o['read_MB_per_cpu_s']:,.0f} / {o['content_MB_per_cpu_s']:,.0f} / "
                     f"{o['processes_MB_per_cpu_s']:,.0f}", f"{o['load_average']:.1f}"])
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    small, large = res["small"], res["large"]
    out += ["", f"Verdicts: small files {small['ratio_to_read']:.2f} of the plain read, target 0.8: "
            f"**{'met' if small['ratio_to_read'] >= 0.8 else 'not met'}**; large files "
            f"{large['ratio_to_read']:.2f}, target 0.5: **{'met' if large['ratio_to_read'] >= 0.5 else 'not met'}**. "
            "On small files the plain read is a few system calls per file, and hashing, counting and the per-file "
            "work of the pass cost about as much again while holding the GIL, so threads do about one core's work "
            "(MB per CPU-second equals MB/s); forked processes escape the GIL but pay a fork of this process per "
            "pass and a pipe for the counts, which on 2 shared cores costs more than it frees."]
    k = res["kernels_one_thread"]
    per_core = large["read_MBps"] / max(res["cpus"] or 1, 1)
    out += ["", f"One thread on a 1 MiB buffer: sha256 {k['sha256_MBps']:,.0f} MB/s, `np.bincount` "
            f"{k['bincount_MBps']:,.0f} MB/s, byte-pair count {k['pair_count_MBps']:,.0f} MB/s. On large files the "
            f"plain read runs at {per_core:,.0f} MB/s per core (a copy out of the page cache), so 0.5 of it per core "
            f"is {per_core / 2:,.0f} MB/s, above what sha256 alone does on one core: the pass there is bounded by "
            "hashing and counting, not by reading."]
    floor = floor_mb_per_cpu_s(res)
    out += ["", f"Floor of the pass per core: sha256 and the byte-pair count over one read, 1 / (1/sha256 + 1/pair "
            f"count) = {floor:,.0f} MB per CPU-second; the pass on large files does "
            f"{large['content_MB_per_cpu_s']:,.0f} ({large['content_MB_per_cpu_s'] / floor:.2f} of the floor)."]
    c = res.get("cold_build")
    if c:
        out += ["", f"Cold build of the {c['files']:,} small files (libmagic headers): {c['build_s']:.2f} s; the first "
                f"content pass adds {c['content_first_s']:.2f} s ({100 * c['added_fraction']:.0f}% of the build); "
                f"cached: {c['content_cached_s'] * 1e3:.0f} ms."]
    return out + [""]


def floor_mb_per_cpu_s(res: dict) -> float:
    """The content pass's floor per core: sha256 plus the byte-pair histogram over one read (one thread)."""
    k = res["kernels_one_thread"]
    return 1 / (1 / k["sha256_MBps"] + 1 / k["pair_count_MBps"])


def verdicts(res: dict | None) -> list[dict]:
    """The section's target (#27 item 7): the pass on large files ≥ 0.8 of its floor, per CPU-second."""
    if not res:
        return []
    floor = floor_mb_per_cpu_s(res)
    got = res["large"]["content_MB_per_cpu_s"] / floor
    return [{"target": "content pass on large files ≥ 0.8 of its floor (sha256 + byte-pair histogram, per core)",
             "figure": f"{got:.2f} of {floor:,.0f} MB per CPU-second", "met": got >= 0.8,
             "why": "" if got >= 0.8 else "the histogram, not sha256, is the slow part"}]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--small", type=int, default=20000, help="number of small files (256 B .. 4 KB)")
    parser.add_argument("--large", type=int, default=8, help="number of large files")
    parser.add_argument("--large-mb", type=int, default=8, help="MB per large file")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-build", action="store_true", help="skip the cold-build figures (libmagic)")


def run(args: argparse.Namespace) -> dict:
    """Generate the files in a temporary folder and measure every figure of the module docstring."""
    root = tempfile.mkdtemp(prefix="bench-content-")
    try:
        return measure(args.small, args.large, args.large_mb, args.workers, args.repeat, root, not args.no_build,
                       log=lambda *a: print(*a, file=sys.stderr, flush=True))
    finally:
        shutil.rmtree(root, ignore_errors=True)
