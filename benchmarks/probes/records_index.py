"""Probe: indexing documents inside containers.

- ``lines``: from nothing (an empty cache directory) to the first ``SELECT count(*) FROM documents`` over a file of
  ``--docs`` lines, against the floor of a plain read of the file plus one numpy newline scan (the target: at most
  5x the floor), and the same with the index reused (a second build);
- ``jsonl``: parse rate of the records (MB/s of JSONL, one core) for the parsers measured as candidates (the
  standard library's ``json``, msgspec's typed decoder line by line, pyarrow's JSON reader on one thread), for our
  scanner (msgspec on a chunk of lines at a time) and for the whole build to the first ``count(*)``;
- ``memory``: peak RSS of a process that builds a dataset of ``--docs`` lines and of ``--docs`` JSON records
  (measured in a child process each; the 10^7 figure is extrapolated linearly above the interpreter's baseline).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.measure import best_of

NAME = "records_index"
DESCRIPTION = "documents inside containers: lines index vs read+newline scan, JSONL parse MB/s, peak RSS"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--docs", type=int, default=1_000_000, help="documents (lines / records) per file")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions (best of)")


_BLOCK = 1_000_000  # lines generated at a time (the writer's memory stays bounded at 10^7 lines)


def _write_lines(path: Path, n: int) -> None:
    """``n`` lines of 20..139 random letters, spaces and punctuation (a block of lines at a time)."""
    rng = np.random.default_rng(0)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz     ,.", dtype=np.uint8)
    with open(path, "wb") as f:
        for lo in range(0, n, _BLOCK):
            lengths = rng.integers(20, 140, size=min(_BLOCK, n - lo))
            body = alphabet[rng.integers(0, alphabet.size, size=int(lengths.sum()) + lengths.size).astype(np.uint8)]
            body[np.cumsum(lengths + 1) - 1] = 10
            f.write(body.tobytes())


def _write_jsonl(path: Path, lines: Path) -> None:
    with open(lines, "rb") as f, open(path, "w", encoding="utf-8") as out:
        for i, line in enumerate(f):
            out.write(json.dumps({"id": i, "text": line[:-1].decode(), "lang": "en" if i % 3 else "fr"}) + "\n")


def _floor(path: Path) -> None:
    data = np.fromfile(path, dtype=np.uint8)
    np.flatnonzero(data == 10)


def _first_count(path: Path, kind: str, cache: Path | None) -> float:
    from consumer import Consumer

    t = time.perf_counter()
    ds = Consumer(str(path), documents=kind, cache_dir=cache if cache is not None else False, seqlen=256)
    ds.sql("SELECT count(*) FROM documents")
    return time.perf_counter() - t


def _scanner(path: Path) -> float:
    """Seconds of the jsonl scanner alone (lines found, records decoded, texts written to an in-memory decode
    cache), over the file as one container."""
    from consumer.sources.local import LocalFiles
    from consumer.sources.records import RecordOptions
    from consumer.sources.records.container import SCAN_CHUNK, Container
    from consumer.sources.records.jsonl import scan_jsonl
    from consumer.sources.records.scanned import DecodeSink

    src = LocalFiles.listed([str(path)])
    container = Container(str(path), int(src.sizes[0]), lambda: src.iter_chunks(0, SCAN_CHUNK), lambda: None)
    return best_of(lambda: scan_jsonl(container, RecordOptions("jsonl"), DecodeSink()), 2)


def _parsers(path: Path) -> dict:
    import msgspec
    import pyarrow as pa
    import pyarrow.json as pj

    raw = path.read_bytes()
    mb = len(raw) / 1e6
    lines = raw.split(b"\n")

    def stdlib() -> None:
        loads = json.loads
        [loads(x)["text"].encode() for x in lines if x]

    class Rec(msgspec.Struct):
        text: str

    dec = msgspec.json.Decoder(Rec).decode

    def typed() -> None:
        [dec(x).text.encode() for x in lines if x]

    def arrow() -> None:
        pj.read_json(io.BytesIO(raw), read_options=pj.ReadOptions(use_threads=False),
                     parse_options=pj.ParseOptions(explicit_schema=pa.schema([("text", pa.string())]),
                                                   unexpected_field_behavior="ignore"))

    return {name: round(mb / best_of(fn, 2), 1) for name, fn in
            (("json", stdlib), ("msgspec", typed), ("pyarrow_1_thread", arrow))}


_CHILD = """
import sys, time
from consumer import Consumer
from benchmarks.measure import peak_rss_mb
base = peak_rss_mb()
ds = Consumer(sys.argv[1], documents=sys.argv[2], cache_dir=sys.argv[3], seqlen=256)
ds.sql("SELECT count(*) FROM documents")
print(base, peak_rss_mb(), len(ds.files))
"""


def _rss(path: Path, kind: str, cache: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), kind, str(cache)], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    base, peak, n = out.stdout.split()
    per_doc = (float(peak) - float(base)) * 1e6 / int(n)
    return {"docs": int(n), "baseline_mb": round(float(base)), "peak_mb": round(float(peak)),
            "bytes_per_doc": round(per_doc), "extrapolated_1e7_mb": round(float(base) + per_doc * 1e7 / 1e6)}


def run(args: argparse.Namespace) -> dict:
    """Measure (see the module docstring); ratios are taken within this run."""
    tmp = Path(tempfile.mkdtemp(prefix="records-probe-"))
    try:
        lines = tmp / "c.txt"
        _write_lines(lines, args.docs)
        jsonl = tmp / "c.jsonl"
        _write_jsonl(jsonl, lines)
        floor = best_of(lambda: _floor(lines), args.repeat)
        cold = []
        for k in range(args.repeat):
            cold.append(_first_count(lines, "lines", tmp / f"cache{k}"))
        warm = _first_count(lines, "lines", tmp / "cache0")
        memory_only = min(_first_count(lines, "lines", None) for _ in range(args.repeat))
        jsonl_build = min(_first_count(jsonl, "jsonl", None) for _ in range(max(1, args.repeat - 1)))
        mb = jsonl.stat().st_size / 1e6
        return {
            "docs": args.docs, "lines_file_mb": round(lines.stat().st_size / 1e6, 1), "jsonl_file_mb": round(mb, 1),
            "floor_read_scan_s": round(floor, 4),
            "lines_first_count_s": round(min(cold), 4), "lines_ratio_to_floor": round(min(cold) / floor, 2),
            "lines_in_memory_s": round(memory_only, 4), "lines_in_memory_ratio": round(memory_only / floor, 2),
            "lines_index_reused_s": round(warm, 4), "lines_reused_ratio": round(warm / floor, 2),
            "jsonl_build_mb_s": round(mb / jsonl_build, 1), "jsonl_scanner_mb_s": round(mb / _scanner(jsonl), 1),
            "jsonl_parsers_mb_s": _parsers(jsonl),
            "rss_lines": _rss(lines, "lines", tmp / "rss-lines"), "rss_jsonl": _rss(jsonl, "jsonl", tmp / "rss-jsonl"),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(p)
    print(json.dumps(run(p.parse_args()), indent=2))
