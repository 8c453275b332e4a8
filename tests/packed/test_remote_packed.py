"""Packed stores held in object storage (moto's S3 API in server mode) and on a web server (http.server),
opened with ``from_packed(URL)``: every sample of every query equals the same store opened locally."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer, FileChangedError, FormatError, InputError, RemoteError
from consumer.cli.main import main
from consumer.errors import ConsumerWarning
from consumer.formats.chunksums import DEFAULT_CHUNK_BYTES
from consumer.packed import inspect_packed, verify_packed

from ..conftest import write_corpus
from ..helpers.remote_servers import file_server, moto_server

pytest.importorskip("s3fs")
pytest.importorskip("moto")

SIZES = {"cat": [0, 1, 5, 100, 3001, 40], "dog": [6, 31, 64, 777, 2], "eel": [2500, 11, 9000]}
QUERIES = [None, "supervised", "unsupervised", "mlm", ["input_array", "file_id", "offset", "class"]]
SUFFIXES = {"megatron": (".bin", ".idx", ".consumer.npz", ".consumer.json"),
            "modalities": (".pbin", ".consumer.npz", ".consumer.json")}


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Path:
    """One corpus packed locally in both formats: <dir>/megatron.* and <dir>/modalities.*."""
    root = tmp_path_factory.mktemp("packs")
    write_corpus(root / "corpus", SIZES, seed=5)
    ds = Consumer(str(root / "corpus"), cache_dir=False, n_bytes=2)
    for fmt in SUFFIXES:
        ds.pack(root / "stores" / fmt, fmt)
    return root / "stores"


@pytest.fixture(scope="module")
def s3(stores):
    """A moto S3 server holding both stores under s3://packs/runs/."""
    from consumer.sources.urls import open_filesystem

    with moto_server() as endpoint:
        so = {"endpoint_url": endpoint, "key": "test", "secret": "test"}
        fs, _ = open_filesystem("s3://packs", so)
        fs.mkdir("packs")
        for f in sorted(stores.iterdir()):
            fs.pipe(f"packs/runs/{f.name}", f.read_bytes())
        yield so, fs


def _all_queries(a: Consumer, b: Consumer) -> None:
    """Every sample, every query (masked ones in two epochs), equal between the two datasets."""
    assert len(a) == len(b) and a.classes == b.classes and a.seqlen == b.seqlen and a.files == b.files
    ids = np.arange(len(a))
    for ds in (a, b):
        ds.set_mlm_mode(mask_frequency=0.3)
    for query in QUERIES:
        for epoch in (0, 3):
            x, y = a.fetch_numpy(ids, query, epoch=epoch), b.fetch_numpy(ids, query, epoch=epoch)
            assert x.keys() == y.keys()
            for k in x:
                assert np.array_equal(x[k], y[k]), (query, k)
    for i in range(len(a.files)):
        assert np.array_equal(a.document_tokens(i), b.document_tokens(i))


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
@pytest.mark.parametrize("style, seqlen", [("diff", 128), ("concat", 48)])
def test_s3_store_equals_local_store_for_every_sample(s3, stores, tmp_path, fmt, style, seqlen):
    so, _ = s3
    url = f"s3://packs/runs/{fmt}"
    remote = Consumer.from_packed(url, style=style, seqlen=seqlen, storage_options=so, cache_dir=tmp_path / "c",
                                  verify=True)
    local = Consumer.from_packed(stores / fmt, style=style, seqlen=seqlen)
    assert type(remote.documents.source.tokens.tokens).__name__ == "RangedTokens"  # read by ranges, not downloaded
    _all_queries(remote, local)
    assert remote.documents.source.tokens.prefix == url
    for key in ({"cat": 2, "eel": 1}, slice(0, 5), [3, 1, 4]):  # ds[...] selections: same rng, same samples
        x, y = remote[key, "supervised"], local[key, "supervised"]
        assert all(np.array_equal(x[k].numpy(), y[k].numpy()) for k in x)
    workers = 2 if (fmt, style) == ("megatron", "concat") else 0  # workers reopen the remote store themselves
    loaders = [ds.dataloader(4, query="supervised", seed=7, num_workers=workers) for ds in (remote, local)]
    for bx, by in zip(*loaders, strict=True):
        assert all(np.array_equal(bx[k].numpy(), by[k].numpy()) for k in bx)
    _all_queries(pickle.loads(pickle.dumps(remote)), local)  # a DataLoader worker reopens it
    _all_queries(remote.where("size > 50"), local.where("size > 50"))
    # only the index files were copied, never the token data
    copies = sorted(p.name for p in (tmp_path / "c" / "packed-remote-v1").rglob("*") if p.is_file())
    assert copies == sorted(["manifest.json", "store.consumer.npz", "store.consumer.sums",
                             "store.idx" if fmt == "megatron" else "store.pbin-index"])
    assert verify_packed(url, storage_options=so, cache_dir=tmp_path / "c")["checksum"] == "ok"


def test_reopen_uses_the_copy_and_a_changed_store_is_never_mixed_up(s3, stores, tmp_path):
    so, fs = s3
    url = "s3://packs/runs/megatron"
    cache = tmp_path / "c"
    first = Consumer.from_packed(url, style="concat", seqlen=32, storage_options=so, cache_dir=cache)
    manifest = next((cache / "packed-remote-v1").rglob("manifest.json"))
    stamp = manifest.stat().st_mtime_ns
    again = Consumer.from_packed(url, style="concat", seqlen=32, storage_options=so, cache_dir=cache)
    assert manifest.stat().st_mtime_ns == stamp  # warm reopen: nothing downloaded again
    before = first.fetch_numpy(np.arange(len(first)))["input_array"]
    data = bytearray((stores / "megatron.bin").read_bytes())
    data[10] ^= 1  # same size, other bytes: another ETag
    try:
        fs.pipe("packs/runs/megatron.bin", bytes(data))
        for ds in (first, again):
            with pytest.raises(FileChangedError, match=r"s3://packs/runs/megatron\.bin"):
                ds.fetch_numpy(np.arange(len(ds)))
        changed = Consumer.from_packed(url, style="concat", seqlen=32, storage_options=so, cache_dir=cache)
        assert len(list((cache / "packed-remote-v1").iterdir())) == 2  # the new version has its own copy
        with pytest.raises(FormatError, match=r"chunk 0 \(bytes 0\.\.\d+ of s3://packs/runs/megatron\.bin\): "
                                              "crc32c expected"):  # its chunk sums refuse the other bytes
            changed.fetch_numpy(np.arange(len(changed)))
        with pytest.raises(FormatError, match="sha256"):
            Consumer.from_packed(url, storage_options=so, cache_dir=cache, verify=True)
    finally:
        fs.pipe("packs/runs/megatron.bin", (stores / "megatron.bin").read_bytes())
    # a damaged local copy is noticed (manifest sha256) and fetched again
    idx = next((cache / "packed-remote-v1").rglob("store.idx"))
    idx.write_bytes(b"\0" * idx.stat().st_size)
    ds = Consumer.from_packed(url, style="concat", seqlen=32, storage_options=so, cache_dir=cache)
    assert np.array_equal(ds.fetch_numpy(np.arange(len(ds)))["input_array"], before)


def test_missing_and_inconsistent_store_files_name_the_url(s3, stores, tmp_path):
    so, fs = s3
    for name in ("megatron.consumer.json", "megatron.consumer.npz", "megatron.consumer.sums", "megatron.bin"):
        fs.pipe(f"packs/broken/{name}", (stores / name).read_bytes())
    with pytest.raises(FormatError, match=r"store file 's3://packs/broken/megatron\.idx' is missing"):
        Consumer.from_packed("s3://packs/broken/megatron", storage_options=so, cache_dir=tmp_path)
    with pytest.raises(InputError, match=r"no packed store at 's3://packs/broken/other'.*other\.consumer\.json"):
        Consumer.from_packed("s3://packs/broken/other", storage_options=so, cache_dir=tmp_path)
    fs.pipe("packs/broken/megatron.idx", (stores / "megatron.idx").read_bytes()[:-8])
    with pytest.raises(FormatError, match=r"s3://packs/broken/megatron\.idx: truncated store file"):
        Consumer.from_packed("s3://packs/broken/megatron", storage_options=so, cache_dir=tmp_path)
    side = json.loads((stores / "megatron.consumer.json").read_bytes())
    side["documents"] += 1
    side["files"]["idx"]["size"] -= 8
    fs.pipe("packs/broken/megatron.consumer.json", json.dumps(side).encode())
    with pytest.raises(FormatError, match=r"s3://packs/broken/megatron\.idx: truncated \.idx"):
        Consumer.from_packed("s3://packs/broken/megatron", storage_options=so, cache_dir=tmp_path)
    with pytest.raises(InputError, match="needs a local cache_dir"):
        Consumer.from_packed("s3://packs/runs/megatron", storage_options=so, cache_dir=False)
    with pytest.raises(InputError, match="storage_options / remote_cache are for stores at URLs"):
        Consumer.from_packed(stores / "megatron", storage_options=so)
    with pytest.raises(InputError, match=r"unexpected options \['storage_option'\]"):
        Consumer.from_packed("s3://packs/runs/megatron", storage_option=so)


def test_read_through_cache_serves_the_token_ranges(s3, stores, tmp_path):
    so, _ = s3
    ds = Consumer.from_packed("s3://packs/runs/modalities", style="concat", seqlen=64, storage_options=so,
                              cache_dir=tmp_path, remote_cache="10MB")
    local = Consumer.from_packed(stores / "modalities", style="concat", seqlen=64)
    reader = ds.documents.source.tokens.tokens.remote.reader
    _all_queries(ds, local)
    sent = reader.stats["requests"]
    assert sent > 0 and list((tmp_path / "remote").rglob("*.blk"))
    _all_queries(ds, local)  # every range now from local blocks
    assert reader.stats["requests"] == sent


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
def test_http_store_with_injected_faults(stores, tmp_path, fmt):
    local = Consumer.from_packed(stores / fmt, style="diff", seqlen=128)
    data = "/" + (f"{fmt}.bin" if fmt == "megatron" else f"{fmt}.pbin")
    with file_server(stores) as server:
        ds = Consumer.from_packed(server.url + fmt, style="diff", seqlen=128, cache_dir=tmp_path)
        _all_queries(ds, local)
        ids = np.arange(len(ds))
        server.faults.error[data] = (500, 2)   # two 500s, then answers
        server.faults.drop[data] = 2           # two answers cut mid-body
        gets = server.faults.gets
        assert np.array_equal(ds.fetch_numpy(ids, "supervised")["input_array"],
                              local.fetch_numpy(ids, "supervised")["input_array"])
        assert server.faults.gets > gets + len(ids) // 4  # the faulty requests were retried
        server.faults.error[data] = (503, 100)  # never answers: reported, nothing served
        with pytest.raises(RemoteError, match=data.lstrip("/")):
            ds.fetch_numpy(ids[:2], "supervised")
        server.faults.error.clear()
        server.faults.status[f"/{fmt}.consumer.json"] = 403
        with pytest.raises(InputError, match=f"{fmt}.consumer.json"):
            Consumer.from_packed(server.url + fmt, cache_dir=tmp_path)


def test_cli_inspect_and_verify_a_store_at_a_url(s3, tmp_path, capsys):
    so, _ = s3
    opts = ["--storage-options", json.dumps(so), "--cache-dir", str(tmp_path)]
    assert main(["inspect", "s3://packs/runs/megatron", "--json", *opts]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["prefix"] == "s3://packs/runs/megatron" and info["documents"] == 14
    assert info == inspect_packed("s3://packs/runs/megatron", storage_options=so, cache_dir=tmp_path)
    assert main(["verify", "s3://packs/runs/modalities", *opts]) == 0
    assert "sha256 ok" in capsys.readouterr().out


def test_repacked_store_without_etags_never_mixes_versions(tmp_path):
    """A plain web server sends no ETag: a store re-packed in place with the same file sizes (other document
    lengths) must not be served with the index copied from the first version."""
    import re
    import subprocess
    import sys

    store, corpus = tmp_path / "store", tmp_path / "c" / "x"
    store.mkdir()
    corpus.mkdir(parents=True)

    def pack(sizes):
        for name, n in zip("ab", sizes):
            (corpus / name).write_bytes(bytes([65 + n % 26]) * n)
        Consumer(str(tmp_path / "c"), n_bytes=1, seqlen=64, metadata=None, cache_dir=False).pack(store / "s")
        return Consumer.from_packed(store / "s", style="diff", seqlen=64)

    def rows(ds):
        return ds.fetch_numpy(np.arange(len(ds)), ["input_array", "attention_mask"])

    first = pack((10, 20))
    server = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"], cwd=store,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = re.search(r"port (\d+)", server.stdout.readline()).group(1)
        url = f"http://127.0.0.1:{port}/s"
        for version in (1, 2):
            local = first if version == 1 else pack((20, 10))  # same file sizes, other document boundaries
            remote = rows(Consumer.from_packed(url, style="diff", seqlen=64, cache_dir=tmp_path / "cache"))
            for k, v in rows(local).items():
                assert np.array_equal(remote[k], v), (version, k)
    finally:
        server.terminate()
        server.wait()


def test_cli_cache_dir_off_for_a_store_at_a_url_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", "http://127.0.0.1:9/s", "--cache-dir", "off"]) == 2
    assert "needs a local cache_dir" in capsys.readouterr().err and not (tmp_path / "off").exists()


def test_chunks_of_a_store_at_a_url_are_checked_at_first_read(s3, stores, tmp_path):
    """A bit flipped in the token data of a store at a URL, with its sums file intact (a copy gone wrong): the
    fetch of a sample in that chunk is refused naming the URL and chunk, verify lists the chunk; a store at a URL
    packed before chunk sums opens with a warning and is served as before."""
    so, fs = s3
    data = bytearray((stores / "megatron.bin").read_bytes())
    data[len(data) // 2] ^= 0x20
    for name in ("megatron.consumer.json", "megatron.consumer.npz", "megatron.consumer.sums", "megatron.idx"):
        fs.pipe(f"packs/flipped/{name}", (stores / name).read_bytes())
    fs.pipe("packs/flipped/megatron.bin", bytes(data))
    url = "s3://packs/flipped/megatron"
    ds = Consumer.from_packed(url, style="concat", seqlen=48, storage_options=so, cache_dir=tmp_path / "c")
    c = (len(data) // 2) // DEFAULT_CHUNK_BYTES  # the damaged chunk
    lo, hi = c * DEFAULT_CHUNK_BYTES, min((c + 1) * DEFAULT_CHUNK_BYTES, len(data))
    chunk = rf"chunk {c} \(bytes {lo}\.\.{hi} of s3://packs/flipped/megatron\.bin\): crc32c expected"
    with pytest.raises(FormatError, match=rf"s3://packs/flipped/megatron: {chunk}"):
        ds.fetch_numpy(np.arange(len(ds)))
    report = verify_packed(url, storage_options=so, cache_dir=tmp_path / "c", errors="report")
    assert [b["chunk"] for b in report["bad_chunks"]] == [c] and not report["ok"]
    side = json.loads((stores / "megatron.consumer.json").read_bytes())
    del side["chunksums"]
    for name in ("megatron.consumer.npz", "megatron.idx", "megatron.bin"):
        fs.pipe(f"packs/old/{name}", (stores / name).read_bytes())
    fs.pipe("packs/old/megatron.consumer.json", json.dumps(side).encode())
    with pytest.warns(ConsumerWarning, match="s3://packs/old/megatron: this store was packed before per-chunk"):
        old = Consumer.from_packed("s3://packs/old/megatron", style="concat", seqlen=48, storage_options=so,
                                   cache_dir=tmp_path / "c")
    local = Consumer.from_packed(stores / "megatron", style="concat", seqlen=48)
    assert old.documents.source.tokens.verifier is None
    assert np.array_equal(old.fetch_numpy(np.arange(len(old)))["input_array"],
                          local.fetch_numpy(np.arange(len(local)))["input_array"])
