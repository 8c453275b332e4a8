"""The peers' own readers on the packed stores of a records dataset: megatron-core's ``IndexedDataset`` reads the
``.bin/.idx`` and Modalities' ``PackedMemMapDatasetBase`` the ``.pbin`` that a JSONL records dataset packs, every
document equal to ``ds.document_tokens(i)`` and decoding to the UTF-8 of its record's text. Skipped (with the
reason) where the peer library is not installed (CI does not install peers: ``benchmarks/setup_peers.sh`` does)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer

TEXTS = ["plain", "", "caf\u00e9 \u4e2d\u6587 \U0001f600", "line\nbreak \"quoted\" back\\slash\ttab", "\u2028sep",
         "x" * 3000, "\r\n", "\u00ff" * 70]


def _dataset(tmp_path: Path, n_bytes: int) -> tuple[Consumer, list[bytes]]:
    rows = [{"text": TEXTS[i % len(TEXTS)] + str(i) * (i % 3), "lang": ["en", "fr", "de"][i % 3]} for i in range(40)]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=i % 2 == 0) for i, r in enumerate(rows)) + "\n",
                    encoding="utf-8")
    ds = Consumer(str(path), documents="jsonl", class_field="lang", n_bytes=n_bytes, cache_dir=tmp_path / "cache",
                  seqlen=64)
    texts = [rows[r[0]]["text"].encode() for r in ds.sql("SELECT record FROM documents ORDER BY doc_id")]
    assert len(texts) == len(rows) and texts != [r["text"].encode() for r in rows]  # class order, not line order
    return ds, texts


def _same(ds: Consumer, texts: list[bytes], n: int, get) -> None:
    assert n == len(ds.files) == len(texts)
    for i in range(n):
        got = np.asarray(get(i))
        assert np.array_equal(got.astype(np.int64), ds.document_tokens(i).astype(np.int64)), i
        assert ds.decode(got) == texts[i], i


@pytest.mark.parametrize("n_bytes", [1, 2])
def test_megatron_indexed_dataset_reads_a_records_store(tmp_path, n_bytes):
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset",
                                  reason="megatron-core is not installed (a peer: benchmarks/setup_peers.sh)")
    logging.getLogger("megatron").setLevel(logging.WARNING)
    ds, texts = _dataset(tmp_path, n_bytes)
    ds.pack(tmp_path / "store", format="megatron")
    ix = indexed.IndexedDataset(str(tmp_path / "store"))
    _same(ds, texts, len(ix), ix.get)
    assert np.array_equal(ix.sequence_lengths, [len(ds.document_tokens(i)) for i in range(len(texts))])


@pytest.mark.parametrize("n_bytes", [1, 2])
def test_modalities_packed_dataset_reads_a_records_store(tmp_path, n_bytes):
    dataset = pytest.importorskip("modalities.dataloader.dataset",
                                  reason="modalities is not installed (a peer: benchmarks/setup_peers.sh)")
    ds, texts = _dataset(tmp_path, n_bytes)
    ds.pack(tmp_path / "store", format="modalities")
    peer = dataset.PackedMemMapDatasetBase(tmp_path / "store.pbin", sample_key="input_ids")
    _same(ds, texts, len(peer), lambda i: peer[i]["input_ids"])
