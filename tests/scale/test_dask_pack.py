"""A pack on a real Dask cluster (3 worker processes on 127.0.0.1) is byte for byte the local pack: .bin/.idx,
.pbin, the file table and the sidecar; nothing is left next to the store."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import InputError

from ..conftest import write_corpus

pytest.importorskip("distributed")

SIZES = {"a": [10, 200, 3000, 0, 1] * 40, "b": [5, 70000, 1, 33] * 30, "c": [7] * 3}
SUFFIXES = {"megatron": (".bin", ".idx", ".consumer.npz", ".consumer.sums"),
            "modalities": (".pbin", ".consumer.npz", ".consumer.sums")}


def _sidecar(path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
@pytest.mark.parametrize("chunk_tokens", [1 << 22, 97])
def test_a_dask_pack_is_the_local_pack_byte_for_byte(tmp_path, dask_client, fmt, chunk_tokens):
    write_corpus(tmp_path / "data", SIZES)
    ds = Consumer(str(tmp_path / "data"), cache_dir=False, seqlen=64, n_bytes=2 if fmt == "megatron" else 1)
    local = ds.pack(tmp_path / "out" / "local", fmt, chunk_tokens=chunk_tokens)
    other = ds.pack(tmp_path / "out" / "dask", fmt, engine=dask_client, chunk_tokens=chunk_tokens)
    for suffix in SUFFIXES[fmt]:
        assert (tmp_path / "out" / f"dask{suffix}").read_bytes() == (tmp_path / "out" / f"local{suffix}").read_bytes()
    assert _sidecar(tmp_path / "out" / "dask.consumer.json")["files"] != {}  # names differ by the prefix only
    a, b = _sidecar(tmp_path / "out" / "local.consumer.json"), _sidecar(tmp_path / "out" / "dask.consumer.json")
    a.pop("files"), b.pop("files")
    assert a["chunksums"].pop("name") == "local.consumer.sums" and b["chunksums"].pop("name") == "dask.consumer.sums"
    assert a == b and a["tokens_sha256"]
    assert {k: v for k, v in local.items() if k not in ("prefix", "files", "seconds")} == \
        {k: v for k, v in other.items() if k not in ("prefix", "files", "seconds")}
    assert sorted(os.listdir(tmp_path / "out")) == sorted(f"{n}{s}" for n in ("local", "dask")
                                                         for s in (*SUFFIXES[fmt], ".consumer.json"))
    back = Consumer.from_packed(tmp_path / "out" / "dask", seqlen=64)
    ids = np.arange(len(back))
    assert np.array_equal(back.fetch_numpy(ids)["input_array"], ds.fetch_numpy(ids)["input_array"])


def test_a_dask_pack_of_a_packed_store_is_refused_naming_the_engine(tmp_path, dask_client):
    write_corpus(tmp_path / "data", SIZES)
    Consumer(str(tmp_path / "data"), cache_dir=False).pack(tmp_path / "p")
    with pytest.raises(InputError, match="engine: a pack on an engine"):
        Consumer.from_packed(tmp_path / "p").pack(tmp_path / "q", engine=dask_client)
