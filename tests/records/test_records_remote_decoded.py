"""Parquet and compressed containers behind URLs (a moto S3 server and an HTTP server, both on 127.0.0.1): the same
documents, ``documents`` rows and packed store as the same files on local disk; an object changed before or after
indexing is never served; a decompression bomb is refused remotely as locally."""

from __future__ import annotations

import gzip
import io
import tarfile

import numpy as np
import pytest
import zstandard

from consumer import Consumer, FileChangedError
from consumer.errors import FormatError
from consumer.sources.objects import ObjectFiles
from consumer.sources.records import RecordOptions
from consumer.sources.records import compressed as limits
from consumer.storage import Storage

from ..helpers.remote_servers import file_server, s3_with_files
from .writers import write_jsonl, write_lines, write_parquet, write_tar

pytest.importorskip("s3fs")
pytest.importorskip("moto")

TEXTS = {"x": ["hello", "wörld", "a longer document of bytes " * 9, "\u2028 sep", "tail"],
         "y": ["hi", "z" * 300, "bye", "", "último"]}
KINDS = {"parquet": "a.parquet", "jsonl": "a.jsonl.gz", "lines": "a.txt.zst", "tar": "a.tar.gz"}


def _write(kind: str, path, texts: list[str]) -> None:
    docs = [t.encode() for t in texts]
    if kind == "parquet":  # row groups of 2 rows and a column that is never read
        write_parquet(path, docs, row_group_size=2, other=[b"\0" * 4000] * len(docs))
        return
    buf = path.with_name("plain")
    if kind == "jsonl":
        write_jsonl(buf, texts)
    elif kind == "lines":
        write_lines(buf, [d for d in docs if d])
    else:
        write_tar(buf, docs)
    raw = buf.read_bytes()
    buf.unlink()
    path.write_bytes(zstandard.ZstdCompressor().compress(raw) if kind == "lines" else gzip.compress(raw))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The containers of each kind under ``<local>/<kind>/<class>/``, and a moto server holding them."""
    local = tmp_path_factory.mktemp("local") / "corpus"
    for kind, name in KINDS.items():
        for cls, texts in TEXTS.items():
            (local / kind / cls).mkdir(parents=True)
            _write(kind, local / kind / cls / name, texts)
    with s3_with_files(local) as (so, fs):
        yield so, fs, local


def _same(a: Consumer, b: Consumer) -> None:
    assert len(a.files) == len(b.files) > 0 and a.classes == b.classes
    assert [a.decode(a.document_tokens(i)) for i in range(len(a.files))] == \
        [b.decode(b.document_tokens(i)) for i in range(len(b.files))]
    count = "SELECT count(*), sum(length), sum(tokens) FROM documents"
    assert a.sql(count) == b.sql(count)
    ids = np.arange(len(a))
    assert len(a) == len(b) and np.array_equal(a.fetch_numpy(ids)["input_array"], b.fetch_numpy(ids)["input_array"])


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_s3_parquet_and_compressed_equal_local(served, tmp_path, kind):
    so, _, local = served
    opts = dict(documents=kind, seqlen=16, style="diff", metadata=None)
    here = Consumer(str(local / kind), cache_dir=False, **opts)
    remote = Consumer(f"s3://data/corpus/{kind}/", storage_options=so, cache_dir=tmp_path / "c", **opts)
    assert remote.files[0].startswith(f"s3://data/corpus/{kind}/x/") and remote.build_info["cache"] == "miss"
    _same(remote, here)
    remote.pack(tmp_path / "remote")
    here.pack(tmp_path / "here")
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"remote{suffix}").read_bytes() == (tmp_path / f"here{suffix}").read_bytes()
    again = Consumer(f"s3://data/corpus/{kind}/", storage_options=so, cache_dir=tmp_path / "c", **opts)
    assert again.build_info["cache"] == "hit" and again.build_info["records"]["reused"] == 2
    _same(again, here)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_https_parquet_and_compressed_equal_local(served, kind):
    _, _, local = served
    here = Consumer(str(local / kind), documents=kind, seqlen=16, cache_dir=False)
    with file_server(local) as server:
        urls = {c: [f"{server.url}{kind}/{c}/{KINDS[kind]}"] for c in TEXTS}
        remote = Consumer(urls, documents=kind, seqlen=16, cache_dir=False)
        assert remote.files[0].startswith(server.url)
        _same(remote, here)
        assert server.faults.gets > 0


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_changed_object_is_never_served(served, tmp_path, kind):
    so, fs, local = served
    key = f"data/corpus/{kind}/y/{KINDS[kind]}"
    ds = Consumer(f"s3://data/corpus/{kind}/", documents=kind, storage_options=so, seqlen=16,
                  cache_dir=tmp_path / "c", metadata=None)
    original = (local / kind / "y" / KINDS[kind]).read_bytes()
    changed = tmp_path / KINDS[kind]
    _write(kind, changed, [t.replace("z", "q") for t in TEXTS["y"]])
    try:
        fs.pipe(key, changed.read_bytes())  # a new ETag: the decode cache of the old version is never served
        with pytest.raises(FileChangedError, match=KINDS[kind].replace(".", r"\.")):
            [ds.document_tokens(i) for i in range(len(ds.files))]
        rebuilt = Consumer(f"s3://data/corpus/{kind}/", documents=kind, storage_options=so, seqlen=16,
                           cache_dir=tmp_path / "c", metadata=None)  # the changed object indexed again
        assert rebuilt.build_info["records"]["reused"] == 1
        assert any(rebuilt.decode(rebuilt.document_tokens(i)) == b"q" * 300 for i in range(len(rebuilt.files)))
    finally:
        fs.pipe(key, original)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_object_changed_between_listing_and_indexing_is_refused(served, tmp_path, kind):
    from consumer.dataset.records import index_containers

    so, fs, local = served
    key = f"data/corpus/{kind}/y/{KINDS[kind]}"
    url = f"s3://{key}"
    source = ObjectFiles.listed([url], Storage(cache_dir=None, options=so))
    original = (local / kind / "y" / KINDS[kind]).read_bytes()
    try:
        fs.pipe(key, original[:-1] + bytes([original[-1] ^ 1]))  # same size, another ETag
        with pytest.raises(FileChangedError, match=KINDS[kind].replace(".", r"\.")):
            index_containers(source, RecordOptions(documents=kind), str(tmp_path / "c"))
        assert not list((tmp_path / "c").rglob("decoded.bin"))  # nothing kept of the changed object
    finally:
        fs.pipe(key, original)


def _bomb_tar() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        info = tarfile.TarInfo("zeros")
        info.size = 1 << 18
        tf.addfile(info, io.BytesIO(b"\0" * info.size))
    return raw.getvalue()


@pytest.mark.parametrize("kind, name, data", [("lines", "bomb.txt.zst", b"\0" * (1 << 18)),
                                              ("jsonl", "bomb.jsonl.gz", b" " * (1 << 18)),
                                              ("tar", "bomb.tar.gz", None)])
def test_bomb_refused_behind_urls(served, tmp_path, monkeypatch, kind, name, data):
    so, fs, _ = served
    monkeypatch.setattr(limits, "MIN_EXPANSION_BYTES", 1 << 16)
    monkeypatch.setattr(limits, "MAX_EXPANSION", 10)
    plain = _bomb_tar() if data is None else data
    body = zstandard.ZstdCompressor().compress(plain) if name.endswith(".zst") else gzip.compress(plain)
    fs.pipe(f"data/bombs/{name}", body)
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / name).write_bytes(body)
    with file_server(tmp_path / "www") as server:
        for url, so_ in ((f"s3://data/bombs/{name}", so), (f"{server.url}{name}", None)):
            with pytest.raises(FormatError, match=rf"{name.replace('.', '[.]')}'?: decompresses to more than 65536 "
                                                  "bytes.*bomb"):
                Consumer([url], documents=kind, storage_options=so_, cache_dir=tmp_path / "c", metadata=None)
            assert not list((tmp_path / "c").rglob("decoded.bin"))


def test_remote_parquet_reads_footer_and_named_columns_only(tmp_path):
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    docs = [f"doc {i} ".encode() * (1 + i % 7) for i in range(400)]
    noise = [rng.integers(0, 256, 3000, dtype=np.uint8).tobytes() for _ in docs]  # incompressible, never read
    write_parquet(tmp_path / "w.parquet", docs, row_group_size=50, other=noise, label=["ab"[i % 2] for i in range(400)])
    size = (tmp_path / "w.parquet").stat().st_size
    meta = pq.ParquetFile(tmp_path / "w.parquet").metadata
    groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
    wanted = sum(g.column(c).total_compressed_size for g in groups for c in (0, 2))  # text and label
    here = Consumer(str(tmp_path / "w.parquet"), documents="parquet", class_field="label", cache_dir=False)
    with file_server(tmp_path) as server:
        remote = Consumer([f"{server.url}w.parquet"], documents="parquet", class_field="label", cache_dir=False)
        sent, largest = server.faults.bytes_sent, server.faults.largest
    assert remote.classes == here.classes == ["a", "b"]
    got = [remote.decode(remote.document_tokens(i)) for i in range(400)]
    assert got == [here.decode(here.document_tokens(i)) for i in range(400)] and sorted(got) == sorted(docs)
    # the footer (the last 64 KiB) and the text and label chunks; not the 1.2 MB column between them
    assert size > 1_000_000 and wanted < 100_000
    assert sent <= wanted + (1 << 16) + 4096, (sent, wanted, size)
    assert largest <= max(1 << 16, max(g.column(0).total_compressed_size + g.column(2).total_compressed_size
                                          for g in groups) + 4096)
