"""Probe: Parquet and compressed containers behind URLs, what indexing asks of the server.

Servers on 127.0.0.1: the test suite's ``http.server`` (in this process) and moto's S3 API in server mode behind the
test suite's counting proxy. Three containers of the same ``--docs`` documents (random words, 100-700 bytes):
``text.parquet`` (one text column, row groups of ``--row-group`` rows), ``wide.parquet`` (the same plus a column of
as many bytes that is never read) and ``docs.jsonl.gz``.

For each server and container: the GET/HEAD requests and body bytes the server sent while ``Consumer([url],
documents=...)`` indexed it into an empty cache directory (cold), the amplification (bytes sent / bytes of the
object), the longest single GET body (what one request holds in memory; for Parquet against the largest row group's
text column chunk) and the same counts for a second open with the persistent index in place (warm).

Run: ``python -m benchmarks probe records_remote [--docs 50000] [--row-group 5000]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from consumer import Consumer
from tests.helpers.remote_servers import faulty_proxy, file_server, moto_server  # the suite's servers

NAME = "records_remote"
DESCRIPTION = "Parquet and gzip containers over HTTP/S3: bytes requested per byte of the object, cold and warm"

FILES = {"text.parquet": "parquet", "wide.parquet": "parquet", "docs.jsonl.gz": "jsonl"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--docs", type=int, default=50_000, help="documents per container")
    parser.add_argument("--row-group", type=int, default=5_000, help="rows per Parquet row group")


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = np.array(["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), int(k))) for k in
                      rng.integers(2, 10, 4000)])
    lengths = rng.integers(20, 120, n)
    picks = rng.integers(0, words.size, int(lengths.sum()))
    cuts = np.concatenate([[0], np.cumsum(lengths)])
    return [" ".join(words[picks[a:b]]) for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist())]


def write_containers(root: Path, n: int, row_group: int) -> dict[str, int]:
    """The three containers under ``root``; the size of the largest row group's text column chunk (compressed)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    texts = _texts(n)
    text = pa.array(texts, type=pa.string())
    pq.write_table(pa.table({"text": text}), root / "text.parquet", row_group_size=row_group)
    other = pa.array(_texts(n, seed=1), type=pa.string())
    pq.write_table(pa.table({"text": text, "other": other}), root / "wide.parquet", row_group_size=row_group)
    lines = "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()
    (root / "docs.jsonl.gz").write_bytes(gzip.compress(lines, compresslevel=6))
    meta = pq.ParquetFile(root / "text.parquet").metadata
    chunk = max(meta.row_group(g).column(0).total_compressed_size for g in range(meta.num_row_groups))
    return {"text_chunk_bytes": int(chunk), "row_groups": int(meta.num_row_groups)}


def _counted(faults, open_it) -> dict:
    before = (faults.gets, faults.heads, faults.bytes_sent)
    faults.largest = 0
    t0 = time.perf_counter()
    ds = open_it()
    seconds = time.perf_counter() - t0
    docs = ds.sql("SELECT count(*) FROM documents")[0][0]
    return {"gets": faults.gets - before[0], "heads": faults.heads - before[1],
            "bytes": faults.bytes_sent - before[2], "largest_get": faults.largest, "seconds": round(seconds, 3),
            "documents": int(docs), "cache": ds.build_info["cache"]}


def _measure(name: str, url: str, size: int, faults, so: dict | None, cache: Path) -> dict:
    kind = FILES[name]

    def open_it() -> Consumer:
        return Consumer([url], documents=kind, storage_options=so, cache_dir=cache, metadata=None, seqlen=512)

    cold = _counted(faults, open_it)
    warm = _counted(faults, open_it)
    return {"object_bytes": size, "cold": {**cold, "amplification": round(cold["bytes"] / size, 4)},
            "warm": {**warm, "amplification": round(warm["bytes"] / size, 4)}}


def run(args: argparse.Namespace) -> dict:
    """Write the containers, serve them over HTTP and S3, count what each open asks for."""
    from consumer.sources.urls import open_filesystem  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="records-remote-") as tmp:
        root = Path(tmp) / "www"
        root.mkdir()
        info = write_containers(root, args.docs, args.row_group)
        sizes = {n: (root / n).stat().st_size for n in FILES}
        results: dict = {"containers": {**info, "sizes": sizes}, "http": {}, "s3": {}}
        with file_server(root) as server:
            for n in FILES:
                results["http"][n] = _measure(n, server.url + n, sizes[n], server.faults, None,
                                              Path(tmp) / "cache-http")
        with moto_server() as endpoint, faulty_proxy(endpoint) as (proxy, faults):
            so = {"endpoint_url": proxy, "key": "test", "secret": "test"}
            fs, _ = open_filesystem("s3://bench", so)
            fs.mkdir("bench")
            for n in FILES:
                fs.pipe(f"bench/{n}", (root / n).read_bytes())
            for n in FILES:
                results["s3"][n] = _measure(n, f"s3://bench/{n}", sizes[n], faults, so, Path(tmp) / "cache-s3")
    return results
