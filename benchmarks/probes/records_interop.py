"""Probe: the peers' own readers on the packed stores of a records dataset (issue #26, item 6).

Builds a JSONL records dataset (``--docs`` realistic records, see ``records_index``: texts of 200-2000 bytes, some
escaped, some non-ASCII, classes from the ``lang`` field), packs it in the Megatron (``.bin/.idx``) and Modalities
(``.pbin``) formats for ``n_bytes`` 1 and 2, and reads every document back with megatron-core's
``IndexedDataset`` and Modalities' ``PackedMemMapDatasetBase``. Each document must equal
``ds.document_tokens(i)``, and its decoded bytes the UTF-8 of the record's ``text`` (``json.loads`` of the line
the SQL ``record`` column names). Reports, per format and ``n_bytes``: documents, mismatches (the first few ids),
the token dtype the peer returns, and documents/s of the peer's reads.

    python -m benchmarks probe records_interop --docs 100000

Peers: megatron-core (the ``[bench]`` extra) and ``modalities==0.5.0`` (``benchmarks/setup_peers.sh``); a peer
that does not import is reported as ``skipped`` with the import error.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

NAME = "records_interop"
DESCRIPTION = "megatron-core IndexedDataset and Modalities PackedMemMapDatasetBase read a records dataset's stores"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--docs", type=int, default=20_000, help="JSON records in the container")


def _megatron(prefix: Path) -> tuple[Callable[[int], np.ndarray], int, str]:
    import logging

    from megatron.core.datasets.indexed_dataset import IndexedDataset

    logging.getLogger("megatron").setLevel(logging.WARNING)
    ix = IndexedDataset(str(prefix))
    return ix.get, len(ix), f"megatron-core {_version('megatron-core')}"


def _modalities(prefix: Path) -> tuple[Callable[[int], np.ndarray], int, str]:
    from modalities.dataloader.dataset import PackedMemMapDatasetBase

    ds = PackedMemMapDatasetBase(prefix.with_name(prefix.name + ".pbin"), sample_key="input_ids")
    return (lambda i: ds[i]["input_ids"]), len(ds), f"modalities {_version('modalities')}"


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


READERS = {"megatron": _megatron, "modalities": _modalities}


def check_store(ds, prefix: Path, fmt: str, texts: list[bytes]) -> dict:
    """Every document of the store ``prefix`` (format ``fmt``) read with the peer's reader, against
    ``ds.document_tokens(i)`` and the UTF-8 ``texts`` of the records (by document id)."""
    try:
        get, n, peer = READERS[fmt](prefix)
    except ImportError as e:
        return {"skipped": f"{fmt} reader not importable: {e}"}
    bad, dtype = [], None
    t = time.perf_counter()
    docs = [np.asarray(get(i)) for i in range(n)]
    seconds = time.perf_counter() - t
    for i, got in enumerate(docs):
        dtype = str(got.dtype)
        want = ds.document_tokens(i)
        if not (np.array_equal(got.astype(np.int64), want.astype(np.int64)) and ds.decode(got) == texts[i]):
            bad.append(i)
    return {"peer": peer, "documents": n, "expected_documents": len(ds.files), "mismatches": len(bad),
            "first_mismatches": bad[:5], "peer_dtype": dtype, "peer_docs_per_s": round(n / max(seconds, 1e-9))}


def run(args: argparse.Namespace) -> dict:
    """Build, pack and read back (see the module docstring)."""
    from consumer import Consumer

    from .records_index import write_realistic_jsonl

    tmp = Path(tempfile.mkdtemp(prefix="records-interop-"))
    try:
        path = tmp / "r.jsonl"
        write_realistic_jsonl(path, args.docs)
        lines = path.read_bytes().split(b"\n")
        out: dict = {"records": args.docs, "jsonl_mb": round(path.stat().st_size / 1e6, 1)}
        for n_bytes in (1, 2):
            ds = Consumer(str(path), documents="jsonl", class_field="lang", n_bytes=n_bytes, cache_dir=tmp / "c",
                          seqlen=256)
            texts = [json.loads(lines[r[0]])["text"].encode() for r in
                     ds.sql("SELECT record FROM documents ORDER BY doc_id")]
            for fmt in READERS:
                prefix = tmp / f"{fmt}-{n_bytes}"
                t = time.perf_counter()
                ds.pack(prefix, format=fmt)
                packed = time.perf_counter() - t
                out[f"{fmt}_n_bytes_{n_bytes}"] = {**check_store(ds, prefix, fmt, texts), "pack_s": round(packed, 2)}
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(p)
    print(json.dumps(run(p.parse_args()), indent=2))
