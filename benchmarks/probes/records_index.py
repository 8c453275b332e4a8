"""Probe: indexing documents inside containers.

- ``lines``: from nothing (an empty cache directory) to the first ``SELECT count(*) FROM documents`` over a file of
  ``--docs`` lines, against the floor of a plain read of the file plus one numpy newline scan (the target: at most
  5x the floor), and the same with the index reused (a second build);
- ``jsonl``: parse rate of the records (MB/s of JSONL, one core) for the parsers measured as candidates (the
  standard library's ``json``, msgspec's typed decoder line by line, pyarrow's JSON reader on one thread), for our
  scanner (msgspec on a chunk of lines at a time) and for the whole build to the first ``count(*)``;
- ``memory``: peak RSS of a fresh child process that builds a dataset of ``--memory-docs`` lines (and one of as
  many JSON records, also with ``class_field="lang"``: two classes interleaved, so the documents are reordered)
  into an empty cache directory, runs the first ``SELECT count(*) FROM documents`` and one ``ds.fetch``: measured,
  not extrapolated. ``baseline_mib`` is the child's peak after doing the same with a
  two-document file first (the fixed cost: imports, torch for the fetch's tensors, DuckDB's first statement);
  ``bytes_per_doc`` what the documents add above it; ``peak_mib`` the whole process (the target: under 2 GiB at
  10^7 documents).

``--parts`` picks what runs (``ratio,jsonl,memory``); ``--memory-docs 10000000 --parts memory`` gives the 10^7
figure alone.

``--kind jsonl`` measures only the JSONL scanner, on ``--docs`` realistic records (texts of 200-2000 bytes; one in
20 holds an escape, ``\n``, ``\"``, ``\\`` or ``\t``, one in 20 non-ASCII text, U+2028 included): MB/s of the whole
scanner (file to document index: lines, decoding, each text's length and UTF-8 check) against MB/s of msgspec
alone (``decode_lines`` with the scanner's own struct, over the same bytes read beforehand 16 MiB at a time), timed
alternately in one run, by wall clock and by the process's CPU time (the per-core rate on a loaded machine), their
ratio, and MB/s of the whole build to the first ``count(*)`` (``cache_dir=False``).
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
    parser.add_argument("--kind", choices=("all", "jsonl"), default="all",
                        help="all: every measure above; jsonl: the JSONL scanner against msgspec alone")
    parser.add_argument("--memory-docs", type=int, default=None,
                        help="documents of the peak-RSS measurement (default: --docs)")
    parser.add_argument("--parts", default="ratio,jsonl,memory",
                        help="comma-separated parts to run: ratio (lines build vs read+scan), jsonl (parse rates), "
                             "memory (peak RSS)")


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
    """A JSON record per line of ``lines`` (``id``, ``text``: the line, ``lang``), as ``json.dumps`` writes them
    (the lines need no escape)."""
    with open(lines, "rb") as f, open(path, "wb") as out:
        i = 0
        while block := f.readlines(1 << 24):
            out.write(b"".join(b'{"id": %d, "text": "%s", "lang": "%s"}\n' % (i + k, line[:-1], b"en" if (i + k) % 3
                               else b"fr") for k, line in enumerate(block)))
            i += len(block)


def write_realistic_jsonl(path: Path, n: int) -> None:
    """``n`` records ``{"id", "text", "lang"}``, texts of 200-2000 bytes, some escaped, some non-ASCII."""
    import msgspec

    rng = np.random.default_rng(1)
    lengths = rng.integers(200, 2000, size=n)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz     ,.", dtype=np.uint8)
    extra = ["\n", "\"", "\\", "\t", "\u00e9t\u00e9", "\u4e2d\u6587", "\U0001f600", "\u2028"]
    kind = rng.integers(0, 5 * len(extra), size=n)  # one in 20 an escape, one in 20 non-ASCII
    encode, buf = msgspec.json.Encoder().encode_into, bytearray()
    with open(path, "wb") as out:
        for start in range(0, n, 65536):
            block = lengths[start:start + 65536]
            body = alphabet[rng.integers(0, alphabet.size, size=int(block.sum()))].tobytes().decode("ascii")
            ends = np.cumsum(block).tolist()
            for j, end in enumerate(ends):
                i = start + j
                text = body[end - int(block[j]):end]
                if kind[i] < len(extra):
                    text = text[:100] + extra[kind[i]] + text[100:]
                encode({"id": i, "text": text, "lang": "en" if i % 3 else "fr"}, buf, len(buf))
                buf += b"\n"
            out.write(buf)
            buf.clear()


def _jsonl_kind(path: Path, repeat: int) -> dict:
    """MB/s of the whole JSONL scanner and of msgspec alone on the same bytes, timed alternately."""
    from consumer.sources.records import RecordOptions
    from consumer.sources.records.jsonl_decoders import record_decoder

    one, _, _ = record_decoder(RecordOptions("jsonl"))
    decoder = type(one)(one.type)  # the scanner's struct, for decode_lines
    blocks, carry = [], b""
    with open(path, "rb") as f:
        while piece := f.read(1 << 24):
            data = carry + piece
            cut = data.rfind(b"\n") + 1
            blocks.append(data[:cut])
            carry = data[cut:]
    if carry:
        blocks.append(carry)

    def parse() -> None:
        for block in blocks:
            decoder.decode_lines(block)

    scan = _scan_fn(path)
    wall: dict[str, float] = {"scanner": float("inf"), "parser": float("inf"), "build": float("inf")}
    cpu = {"scanner": float("inf"), "parser": float("inf")}
    for _ in range(repeat):  # alternated: one of each per round, best of the rounds
        for name, fn in (("scanner", scan), ("parser", parse)):
            w, c = time.perf_counter(), time.process_time()
            fn()
            wall[name] = min(wall[name], time.perf_counter() - w)
            cpu[name] = min(cpu[name], time.process_time() - c)
        wall["build"] = min(wall["build"], _first_count(path, "jsonl", None))
    mb = path.stat().st_size / 1e6
    return {"docs": sum(b.count(b"\n") for b in blocks), "jsonl_file_mb": round(mb, 1),
            "scanner_mb_s": round(mb / wall["scanner"], 1), "msgspec_alone_mb_s": round(mb / wall["parser"], 1),
            "scanner_to_msgspec": round(wall["parser"] / wall["scanner"], 2),
            "scanner_cpu_mb_s": round(mb / cpu["scanner"], 1), "msgspec_alone_cpu_mb_s": round(mb / cpu["parser"], 1),
            "build_to_first_count_mb_s": round(mb / wall["build"], 1),
            "parser": "scanner: Arrow's JSON reader per 16 MiB block of lines (explicit schema of the wanted fields), "
            "msgspec with the text as Raw and a numpy unescape where Arrow refuses a block; one thread (the build "
            "to the first count uses the process's threads)",
            "msgspec_version": __import__("msgspec").__version__, "load_average": list(os.getloadavg())}


def _floor(path: Path) -> None:
    data = np.fromfile(path, dtype=np.uint8)
    np.flatnonzero(data == 10)


def _first_count(path: Path, kind: str, cache: Path | None) -> float:
    from consumer import Consumer

    t = time.perf_counter()
    ds = Consumer(str(path), documents=kind, cache_dir=cache if cache is not None else False, seqlen=256)
    ds.sql("SELECT count(*) FROM documents")
    return time.perf_counter() - t


def _scan_fn(path: Path):
    """The jsonl scanner alone over the file as one container (lines found, records decoded, each text's length
    kept: a plain file's texts are decoded again when read), as a callable."""
    from consumer.sources.local import LocalFiles
    from consumer.sources.records import RecordOptions
    from consumer.sources.records.container import SCAN_CHUNK, Container
    from consumer.sources.records.jsonl import scan_jsonl
    from consumer.sources.records.scanned import DecodeSink

    src = LocalFiles.listed([str(path)])
    container = Container(str(path), int(src.sizes[0]), lambda: src.iter_chunks(0, SCAN_CHUNK), lambda: None)
    return lambda: scan_jsonl(container, RecordOptions("jsonl"), DecodeSink())


def _scanner(path: Path) -> float:
    """Seconds of the jsonl scanner alone (best of 2)."""
    return best_of(_scan_fn(path), 2)


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
import json, sys
from consumer import Consumer
from benchmarks.measure import peak_rss_mb
extra = {"class_field": sys.argv[5]} if sys.argv[5] else {}
tiny = Consumer(sys.argv[4], documents=sys.argv[2], cache_dir=False, seqlen=256, **extra)  # fixed cost: imports (torch
tiny.sql("SELECT count(*) FROM documents")  # for ds.fetch's tensors), DuckDB's first statement
tiny.fetch([0])
base = peak_rss_mb()
ds = Consumer(sys.argv[1], documents=sys.argv[2], cache_dir=sys.argv[3], seqlen=256, **extra)
built = peak_rss_mb()
ds.sql("SELECT count(*) FROM documents")
counted = peak_rss_mb()
ds.fetch([0, len(ds) - 1])
print(json.dumps([base, built, counted, peak_rss_mb(), len(ds.files)]))
"""


def _rss(path: Path, kind: str, cache: Path, class_field: str = "") -> dict:
    """Peak RSS (MiB) of a fresh process building ``path`` into the empty ``cache`` through the first count and one
    fetch (see the module docstring)."""
    tiny = cache.parent / f"tiny-{path.name}"
    tiny.write_bytes(b'{"text": "a", "lang": "en"}\n{"text": "b", "lang": "fr"}\n' if kind == "jsonl" else b"a\nb\n")
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), kind, str(cache), str(tiny), class_field],
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    base, built, counted, peak, n = json.loads(out.stdout.strip().splitlines()[-1])
    return {"docs": int(n), "baseline_mib": round(base), "after_build_mib": round(built),
            "after_count_mib": round(counted), "peak_mib": round(peak),
            "bytes_per_doc": round((peak - base) * 2**20 / int(n)), "under_2_gib": bool(peak < 2048)}


def _ratio(lines: Path, tmp: Path, repeat: int) -> dict:
    """The lines build from nothing (and reused, and without a cache) against the read + newline scan floor,
    interleaved: each round times the floor, a build into a fresh cache directory, the build again reusing that
    index, and a build without a cache. Best of the rounds for each, and each round's own ratio."""
    _first_count(lines, "lines", None)  # imports and DuckDB's first statement out of the timings
    rounds = []
    for k in range(repeat):
        floor = best_of(lambda: _floor(lines), 1)
        cold = _first_count(lines, "lines", tmp / f"cache{k}")
        rounds.append((floor, cold, _first_count(lines, "lines", tmp / f"cache{k}"),
                       _first_count(lines, "lines", None)))
        shutil.rmtree(tmp / f"cache{k}", ignore_errors=True)
    floor, cold, warm, memory_only = (min(r[i] for r in rounds) for i in range(4))
    return {"lines_file_mb": round(lines.stat().st_size / 1e6, 1), "floor_read_scan_s": round(floor, 4),
            "lines_first_count_s": round(cold, 4), "lines_ratio_to_floor": round(cold / floor, 2),
            "lines_in_memory_s": round(memory_only, 4), "lines_in_memory_ratio": round(memory_only / floor, 2),
            "lines_index_reused_s": round(warm, 4), "lines_reused_ratio": round(warm / floor, 2),
            "lines_ratio_per_round": [round(r[1] / r[0], 2) for r in rounds]}


def _jsonl_rates(jsonl: Path, repeat: int) -> dict:
    jsonl_build = min(_first_count(jsonl, "jsonl", None) for _ in range(max(1, repeat - 1)))
    mb = jsonl.stat().st_size / 1e6
    return {"jsonl_file_mb": round(mb, 1), "jsonl_build_mb_s": round(mb / jsonl_build, 1),
            "jsonl_scanner_mb_s": round(mb / _scanner(jsonl), 1), "jsonl_parsers_mb_s": _parsers(jsonl)}


def _files(tmp: Path, n: int, jsonl: bool) -> tuple[Path, Path]:
    lines, records = tmp / f"c{n}.txt", tmp / f"c{n}.jsonl"
    if not lines.exists():
        _write_lines(lines, n)
    if jsonl and not records.exists():
        _write_jsonl(records, lines)
    return lines, records


def run(args: argparse.Namespace) -> dict:
    """Measure (see the module docstring); ratios are taken within this run."""
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = parts - {"ratio", "jsonl", "memory"}
    if unknown:
        raise SystemExit(f"--parts: unknown part(s) {sorted(unknown)}; the parts are ratio, jsonl, memory")
    tmp = Path(tempfile.mkdtemp(prefix="records-probe-"))
    out: dict = {"docs": args.docs, "load_average": [round(x, 2) for x in os.getloadavg()]}
    try:
        if args.kind == "jsonl":
            write_realistic_jsonl(tmp / "r.jsonl", args.docs)
            return _jsonl_kind(tmp / "r.jsonl", args.repeat)
        if parts & {"ratio", "jsonl"}:
            lines, jsonl = _files(tmp, args.docs, "jsonl" in parts)
            if "ratio" in parts:
                out.update(_ratio(lines, tmp, args.repeat))
            if "jsonl" in parts:
                out.update(_jsonl_rates(jsonl, args.repeat))
        if "memory" in parts:
            n = args.memory_docs or args.docs
            lines, jsonl = _files(tmp, n, True)
            out["memory_docs"] = n
            out["rss_lines"] = _rss(lines, "lines", tmp / "rss-lines")
            out["rss_jsonl"] = _rss(jsonl, "jsonl", tmp / "rss-jsonl")
            out["rss_jsonl_class_field"] = _rss(jsonl, "jsonl", tmp / "rss-jsonl-class", "lang")
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(p)
    print(json.dumps(run(p.parse_args()), indent=2))
