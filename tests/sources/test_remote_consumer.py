"""Consumer over object storage and HTTP, end to end: the tokens of every sample equal those of a local
copy of the same files (moto's S3 API in server mode and an http.server, both on 127.0.0.1)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from consumer import Consumer, FileChangedError, InputError

from ..conftest import write_corpus
from ..helpers.remote_servers import file_server, s3_with_files

pytest.importorskip("s3fs")
pytest.importorskip("moto")

SIZES = {"cat": [0, 1, 5, 100, 3001], "dog": [6, 31, 64, 777], "eel": [2500, 11]}
QUERY = ["input_array", "attention_mask", "class", "labels", "file_id", "offset"]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server holding a corpus under s3://data/corpus/<class>/..., and the local copy."""
    local = tmp_path_factory.mktemp("local") / "corpus"
    write_corpus(local, SIZES, seed=3)
    with s3_with_files(local) as (so, fs):
        yield so, fs, local


def _same_samples(a: Consumer, b: Consumer) -> None:
    assert len(a) == len(b) and a.classes == b.classes and a.seqlen == b.seqlen
    ids = np.arange(len(a))
    for epoch in (0, 2):
        x, y = a.fetch_numpy(ids, QUERY, epoch=epoch), b.fetch_numpy(ids, QUERY, epoch=epoch)
        for k in QUERY:
            assert np.array_equal(x[k], y[k]), k


@pytest.mark.parametrize("style, seqlen", [("concat", 64), ("diff", 128)])
def test_s3_tokens_equal_local_tokens_for_every_sample(s3, tmp_path, style, seqlen):
    so, fs, local = s3
    remote = Consumer("s3://data/corpus/", storage_options=so, style=style, seqlen=seqlen, cache_dir=tmp_path / "c")
    here = Consumer(str(local), style=style, seqlen=seqlen, cache_dir=False)
    assert remote.files[0].startswith("s3://data/corpus/cat/") and remote.build_info["cache"] == "miss"
    assert [remote.documents.header_text(i) for i in range(len(remote.files))] == \
        [here.documents.header_text(i) for i in range(len(here.files))]  # libmagic from ranges == from files
    _same_samples(remote, here)
    again = Consumer("s3://data/corpus/", storage_options=so, style=style, seqlen=seqlen, cache_dir=tmp_path / "c")
    assert again.build_info["cache"] == "hit" and again.build_info["libmagic_calls"] == 0
    _same_samples(again, here)
    rows = remote.sql("SELECT class, count(*) FROM files GROUP BY class ORDER BY class")
    assert list(rows) == [("cat", 5), ("dog", 4), ("eel", 2)]
    sub = remote.where("size > 50")
    assert all(f.startswith("s3://") for f in sub.files) and len(sub.files) == 5
    _same_samples(pickle.loads(pickle.dumps(sub)), sub)  # a worker gets a working remote reader
    remote.pack(tmp_path / "store")  # pack from remote to a local store: the same tokens
    _same_samples(Consumer.from_packed(tmp_path / "store", style=style, seqlen=seqlen), here)


def test_f3_urls_read_through_cache_and_changed_objects(s3, tmp_path):
    so, fs, local = s3
    fps = {"cat": [f"s3://data/corpus/cat/cat_{i:03d}.dat" for i in range(5)],
           "dog": [f"s3://data/corpus/dog/dog_{i:03d}.dat" for i in range(4)]}
    ds = Consumer(fps, storage_options=so, style="concat", seqlen=32, cache_dir=tmp_path / "c", remote_cache="10MB")
    first = ds.fetch_numpy(np.arange(len(ds)))["input_array"]
    assert np.array_equal(ds.fetch_numpy(np.arange(len(ds)))["input_array"], first)  # second pass: from the cache
    assert (tmp_path / "c" / "remote").is_dir()
    fresh = Consumer(fps, storage_options=so, style="concat", seqlen=32, cache_dir=False)
    fs.pipe("data/corpus/dog/dog_003.dat", b"x" * 777)  # same size, new content: a new ETag
    with pytest.raises(FileChangedError, match="dog_003.dat"):
        fresh.fetch_numpy(np.arange(len(fresh)))
    fs.pipe("data/corpus/dog/dog_003.dat", (local / "dog" / "dog_003.dat").read_bytes())


def test_http_source_and_mixed_inputs(s3, tmp_path):
    so, fs, local = s3
    with file_server(local) as server:
        urls = {"cat": [f"{server.url}cat/cat_{i:03d}.dat" for i in range(5)]}
        ds = Consumer(urls, style="diff", seqlen=64, cache_dir=False)
        here = Consumer({"cat": [str(local / "cat" / f"cat_{i:03d}.dat") for i in range(5)]}, style="diff",
                        seqlen=64, cache_dir=False)
        _same_samples(ds, here)
    with pytest.raises(InputError, match="mixes URLs and local paths"):
        Consumer({"cat": ["s3://data/corpus/cat/cat_000.dat", str(local / "dog" / "dog_000.dat")]},
                 storage_options=so, cache_dir=False)
    with pytest.raises(InputError, match="storage_options / remote_cache are for URLs"):
        Consumer(str(local), storage_options=so, cache_dir=False)
    with pytest.raises(InputError, match="cache_dir must be a local directory"):
        Consumer(str(local), cache_dir="s3://data/cache")


def test_cli_on_a_bucket_sharded_pack_merged_equals_local_pack(s3, tmp_path, capsys):
    """consumer index/sql/pack take a URL prefix and --storage-options; 3 shards packed from the bucket and
    merged are byte for byte the pack of the local copy."""
    import json

    from consumer.cli.main import main

    so, fs, local = s3
    opts = ["--seqlen", "64", "--quiet", "--storage-options", json.dumps(so)]
    assert main(["index", "s3://data/corpus/", "--cache-dir", str(tmp_path / "i"), *opts]) == 0
    capsys.readouterr()
    assert main(["sql", "s3://data/corpus/", "SELECT class, count(*) AS n FROM files GROUP BY class ORDER BY class",
                 "--format", "csv", "--cache-dir", str(tmp_path / "i"), *opts]) == 0
    assert capsys.readouterr().out.split() == ["class,n", "cat,5", "dog,4", "eel,2"]
    assert main(["info", "s3://data/corpus/", "--cache-dir", str(tmp_path / "i"), *opts]) == 0
    shown = capsys.readouterr().out
    assert "top file types" in shown and "\ndata " in shown and "content (entropy" in shown and "skipped" not in shown
    for i in range(3):
        assert main(["pack", "s3://data/corpus/", str(tmp_path / f"part{i}"), "--shard", f"{i}/3",
                     "--cache-dir", str(tmp_path / f"c{i}"), *opts]) == 0
    assert main(["merge", str(tmp_path / "merged"), *[str(tmp_path / f"part{i}") for i in range(3)]]) == 0
    assert main(["pack", str(local), str(tmp_path / "here"), "--seqlen", "64", "--quiet", "--cache-dir", "off"]) == 0
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"merged{suffix}").read_bytes() == (tmp_path / f"here{suffix}").read_bytes(), suffix
    assert main(["index", "s3://data/nothing-here/", "--cache-dir", str(tmp_path / "i"), *opts]) == 2
