"""``gs://`` and ``az://`` end to end against local emulators on 127.0.0.1 (``gcp-storage-emulator``; Azurite,
skipped when it is not installed): the listing's facts, headers equal to a local copy's, SQL and ``where``,
every query with the tokens of a local copy for every sample, a changed object refused with its URL, and
re-indexing after objects are added, changed and deleted."""

from __future__ import annotations

import numpy as np
import pytest

from consumer import Consumer, FileChangedError
from consumer.sources.range_reader import RemoteReader
from consumer.sources.urls import list_objects, open_filesystem

from ..conftest import write_corpus
from ..helpers.remote_emulators import AZURITE, AZURITE_MISSING, azurite, gcs_emulator

SIZES = {"cat": [0, 1, 5, 100, 3001], "dog": [6, 31, 64, 777], "eel": [2500, 11]}
QUERIES = ["supervised", "unsupervised", "mlm", ["input_array", "attention_mask", "class", "labels", "file_id",
                                                   "offset"]]


@pytest.fixture(scope="module", params=["gs", "az"])
def store(request, tmp_path_factory):
    """``(scheme, storage_options, fs, local copy)``: an emulator holding the corpus under
    ``<scheme>://data/corpus/<class>/...``, stopped after the module."""
    scheme = request.param
    if scheme == "gs":
        pytest.importorskip("gcsfs")
        pytest.importorskip("gcp_storage_emulator")
        server = gcs_emulator()
    else:
        pytest.importorskip("adlfs")
        if AZURITE is None:
            pytest.skip(AZURITE_MISSING)
        server = azurite()
    local = tmp_path_factory.mktemp(f"local_{scheme}") / "corpus"
    write_corpus(local, SIZES, seed=5)
    with server as so:
        fs, _ = open_filesystem(f"{scheme}://data", so)
        fs.mkdir("data")
        fs.pipe({f"data/corpus/{f.relative_to(local)}": f.read_bytes() for f in sorted(local.rglob("*"))
                 if f.is_file()})
        yield scheme, so, fs, local


def _same_samples(a: Consumer, b: Consumer) -> None:
    assert len(a) == len(b) and a.classes == b.classes
    ids = np.arange(len(a))
    for query in QUERIES:
        for epoch in (0, 1):
            x, y = a.fetch_numpy(ids, query, epoch=epoch), b.fetch_numpy(ids, query, epoch=epoch)
            assert sorted(x) == sorted(y), query
            for k in x:
                assert np.array_equal(x[k], y[k]), (query, k)


def test_listing_facts(store):
    scheme, so, fs, local = store
    listing = list_objects(f"{scheme}://data/corpus/", so)
    files = sorted(p for p in local.rglob("*") if p.is_file())
    assert listing.root == f"{scheme}://data/corpus/"  # the scheme written, not the backend's own (abfs://)
    assert listing.urls == [f"{scheme}://data/corpus/{p.relative_to(local)}" for p in files]
    assert listing.sizes.tolist() == [p.stat().st_size for p in files]
    assert all(listing.etags) and len(set(listing.etags)) == len(files)  # one version tag per object
    assert (listing.mtimes_ns > 0).all()
    info = fs.info(listing.urls[3])
    want = str(info["generation"]) if scheme == "gs" else info["etag"].strip('"')
    assert listing.etags[3] == want  # GCS: the generation; Azure: the ETag


@pytest.mark.parametrize("style", ["concat", "diff"])
def test_tokens_headers_sql_and_queries_equal_local(store, tmp_path, style):
    scheme, so, fs, local = store
    remote = Consumer(f"{scheme}://data/corpus/", storage_options=so, style=style, seqlen=64,
                      cache_dir=tmp_path / "c")
    here = Consumer(str(local), style=style, seqlen=64, cache_dir=False)
    assert remote.files[0].startswith(f"{scheme}://data/corpus/cat/")
    assert [remote.documents.header_text(i) for i in range(len(remote.files))] == \
        [here.documents.header_text(i) for i in range(len(here.files))]
    _same_samples(remote, here)
    rows = remote.sql("SELECT class, count(*), sum(size) FROM files GROUP BY class ORDER BY class")
    assert list(rows) == [("cat", 5, sum(SIZES["cat"])), ("dog", 4, sum(SIZES["dog"])), ("eel", 2, 2511)]
    sub, sub_here = remote.where("size > 50 AND class != 'eel'"), here.where("size > 50 AND class != 'eel'")
    assert len(sub.files) == 4 and all(f.startswith(f"{scheme}://") for f in sub.files)
    _same_samples(sub, sub_here)
    again = Consumer(f"{scheme}://data/corpus/", storage_options=so, style=style, seqlen=64, cache_dir=tmp_path / "c")
    assert again.build_info["cache"] == "hit" and again.build_info["libmagic_calls"] == 0


def test_changed_object_is_refused_with_its_url(store):
    scheme, so, fs, local = store
    ds = Consumer(f"{scheme}://data/corpus/", storage_options=so, style="concat", seqlen=32, cache_dir=False)
    ids = np.arange(len(ds))
    first = ds.fetch_numpy(ids)["input_array"]
    key = "data/corpus/dog/dog_003.dat"
    url = f"{scheme}://{key}"
    before = list_objects(url, so)
    original = fs.cat_file(key)
    fs.pipe(key, bytes(reversed(original)))  # same size, other content: a new version
    try:
        with pytest.raises(FileChangedError, match=f"{url}.*changed since it was indexed"):
            ds.fetch_numpy(ids)  # the same reader, a later call: checked again
        out = np.zeros(4, dtype=np.uint8)
        with pytest.raises(FileChangedError, match=f"{url}.*changed since it was indexed"):
            RemoteReader(so).read_ranges([url], [0], [4], out, [0], before.etags, before.sizes)
        assert (out == 0).all()  # nothing of the new version was served
        fs.rm(key)
        with pytest.raises(FileChangedError, match=f"{url}.*(no longer exists|changed since)"):  # Azure: 412
            RemoteReader(so).read_ranges([url], [0], [4], out, [0], before.etags, before.sizes)
    finally:
        fs.pipe(key, original)
    again = Consumer(f"{scheme}://data/corpus/", storage_options=so, style="concat", seqlen=32, cache_dir=False)
    assert np.array_equal(again.fetch_numpy(ids)["input_array"], first)


def test_reindex_after_add_change_delete(store, tmp_path):
    scheme, so, fs, local = store
    prefix = f"{scheme}://data/corpus/"
    cache = tmp_path / "c"

    def build() -> Consumer:
        return Consumer(prefix, storage_options=so, style="concat", seqlen=32, cache_dir=cache)

    first = build()
    assert first.build_info["libmagic_calls"] == len(first.files)
    added, changed = "data/corpus/eel/eel_new.dat", "data/corpus/cat/cat_001.dat"
    original = fs.cat_file(changed)
    try:
        fs.pipe(added, b"#!/bin/sh\necho new object\n")
        ds = build()
        assert ds.build_info["cache"] == "miss" and ds.build_info["libmagic_calls"] == 1  # only the new one
        assert f"{scheme}://{added}" in ds.files
        k = ds.files.index(f"{scheme}://{added}")
        assert "shell script" in ds.documents.header_text(k)
        fs.pipe(changed, b"%PDF-1.4\n" + original[9:])  # same size, new content and type
        ds = build()
        assert ds.build_info["libmagic_calls"] == 1  # only the changed one is described again
        assert "PDF" in ds.documents.header_text(ds.files.index(f"{scheme}://{changed}"))
        fs.rm(added)
        ds = build()
        assert f"{scheme}://{added}" not in ds.files and ds.build_info["libmagic_calls"] == 0
        assert len(ds.files) == len(first.files)
        (local / "cat" / "cat_001.dat").write_bytes(b"%PDF-1.4\n" + original[9:])
        try:
            _same_samples(ds, Consumer(str(local), style="concat", seqlen=32, cache_dir=False))
        finally:
            (local / "cat" / "cat_001.dat").write_bytes(original)
    finally:
        fs.pipe(changed, original)
        if fs.exists(added):
            fs.rm(added)
