"""The content pass reads through the dataset's ByteSource: content columns, ``duplicates()`` and
``dedupe="content"`` give on objects in S3 (moto's server) and behind HTTP (an http.server), both on 127.0.0.1,
the very values the local copy of the same files gives."""

from __future__ import annotations

import shutil

import pytest

from consumer import Consumer, FileChangedError

from ..conftest import write_corpus
from ..helpers.remote_servers import file_server, s3_with_files

pytest.importorskip("s3fs")
pytest.importorskip("moto")

SIZES = {"cat": [0, 1, 5, 100, 300_001], "dog": [6, 31, 64, 777]}
CONTENT = "SELECT class, size, sha256, entropy, printable, zeros, histogram FROM files ORDER BY file_id"


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """A corpus with one file copied under a second name (a duplicate), and a file large enough to be streamed."""
    root = tmp_path_factory.mktemp("local") / "corpus"
    write_corpus(root, SIZES, seed=7)
    shutil.copyfile(root / "dog" / "dog_003.dat", root / "dog" / "dog_004.dat")
    return root


@pytest.fixture(scope="module")
def s3(local):
    with s3_with_files(local) as (so, fs):
        yield so, fs


def test_s3_content_columns_and_duplicates_equal_local(s3, local, tmp_path):
    so, _ = s3
    remote = Consumer("s3://data/corpus/", storage_options=so, seqlen=64, cache_dir=tmp_path / "c")
    here = Consumer(str(local), seqlen=64, cache_dir=False)
    rows = remote.sql(CONTENT)
    assert rows == here.sql(CONTENT) and all(r[2] is not None for r in rows)
    assert remote.sql(CONTENT, dialect="sqlite") == here.sql(CONTENT, dialect="sqlite")
    dups = remote.duplicates()
    assert [[m.path.rsplit("/", 1)[1] for m in g.members] for g in dups] == [["dog_003.dat", "dog_004.dat"]]
    assert [g.sha256 for g in dups] == [g.sha256 for g in here.duplicates()]
    again = Consumer("s3://data/corpus/", storage_options=so, seqlen=64, cache_dir=tmp_path / "c")
    assert again.sql(CONTENT) == rows  # from the durable catalog


def test_s3_dedupe_content_keeps_the_same_files_as_local(s3, local):
    so, _ = s3
    remote = Consumer("s3://data/corpus/", storage_options=so, seqlen=64, dedupe="content", cache_dir=False)
    here = Consumer(str(local), seqlen=64, dedupe="content", cache_dir=False)
    assert [p.rsplit("/", 1)[1] for p in remote.files] == [p.rsplit("/", 1)[1] for p in here.files]
    assert len(remote.files) == sum(len(v) for v in SIZES.values())  # one of the two copies is dropped


def test_https_content_columns_equal_local(local):
    with file_server(local) as server:
        urls = {c: [f"{server.url}{c}/{c}_{i:03d}.dat" for i in range(len(n) + (c == "dog"))]
                for c, n in SIZES.items()}
        remote = Consumer(urls, seqlen=64, cache_dir=False)
        here = Consumer(str(local), seqlen=64, cache_dir=False)
        assert remote.sql(CONTENT) == here.sql(CONTENT)
        assert remote.sql("SELECT count(*) FROM files WHERE head(path, 0) = ''") == [(len(remote.files),)]


def test_an_object_changed_before_the_content_pass_is_refused(local, tmp_path):
    copy = tmp_path / "corpus"
    shutil.copytree(local, copy)
    with s3_with_files(copy) as (so, fs):
        remote = Consumer("s3://data/corpus/", storage_options=so, seqlen=64, cache_dir=False)
        fs.pipe("data/corpus/cat/cat_003.dat", b"y" * 100)  # same size, new content: a new ETag
        with pytest.raises(FileChangedError, match="cat_003"):
            remote.sql("SELECT sha256 FROM files")
