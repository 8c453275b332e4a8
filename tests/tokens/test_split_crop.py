"""ds.split (stratified by file, stable), long_files="crop" (a seeded window per file and epoch), and datasets
that pickle whatever built them (spawn workers on a dataset built in memory after SQL)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import Consumer, InputError

from ..conftest import write_corpus

SIZES = {"cat": [3, 40, 90, 120, 7, 64, 300, 18, 22, 51], "dog": [5, 500, 31, 64, 77, 12], "eel": [2500, 11, 9]}


@pytest.fixture
def ds(tmp_path):
    return Consumer(write_corpus(tmp_path / "data", SIZES), cache_dir=False, seqlen=32, metadata=None)


def test_split_is_disjoint_stratified_and_stable(ds):
    parts = ds.split({"train": 0.7, "val": 0.3}, seed=1)
    train, val = parts["train"], parts["val"]
    assert set(train.files).isdisjoint(val.files) and sorted(train.files + val.files) == sorted(ds.files)
    for c, n in zip(ds.classes, [10, 6, 3]):
        got = sum(1 for f in train.files if f"/{c}/" in f)
        assert abs(got - 0.7 * n) < 1  # largest remainder: within one file of the target per class
    again = ds.split({"train": 0.7, "val": 0.3}, seed=1)
    assert again["train"].files == train.files and again["val"].files == val.files
    other = ds.split({"train": 0.7, "val": 0.3}, seed=2)
    assert other["train"].files != train.files
    assert train.class_to_id == ds.class_to_id and train.seqlen == ds.seqlen  # same ids and width as the parent
    assert np.array_equal(train.fetch_numpy(np.arange(len(train)))["input_array"][0],
                          ds.fetch_numpy(np.array([ds.files.index(train.files[0])]))["input_array"][0])


def test_split_keeps_each_file_on_its_side_when_the_corpus_is_rebuilt(tmp_path, ds):
    rebuilt = Consumer(write_corpus(tmp_path / "data", SIZES), cache_dir=False, seqlen=32, metadata=None)
    a = ds.split({"a": 0.5, "b": 0.25, "c": 0.25})
    b = rebuilt.split({"a": 0.5, "b": 0.25, "c": 0.25})
    assert {k: v.files for k, v in a.items()} == {k: v.files for k, v in b.items()}


@pytest.mark.parametrize("fractions, message", [
    ({"train": 0.9, "val": 0.2}, "must add up to 1"),
    ({"train": 1.0, "val": 0.0}, r"fractions\['val'\] must be a number in \(0, 1\]"),
    ([0.5, 0.5], "must be a non-empty dict"),
    ({"a": 0.97, "b": 0.01, "c": 0.01, "d": 0.01}, "would get no file"),
])
def test_split_errors(ds, fractions, message):
    with pytest.raises(InputError, match=message):
        ds.split(fractions)


def test_crop_serves_a_seeded_window_per_file_and_epoch(ds, tmp_path):
    crop = Consumer(ds.corpus, cache_dir=False, seqlen=32, metadata=None, long_files="crop", seed=7)
    assert len(crop) == len(ds)  # one sample per file, as with truncate
    ids = np.arange(len(crop))
    q = ["input_array", "file_id", "offset", "length"]
    epochs = [crop.fetch_numpy(ids, q, epoch=e) for e in range(4)]
    for out in epochs:
        for row, f, off, n in zip(out["input_array"], out["file_id"], out["offset"], out["length"]):
            doc = crop.document_tokens(int(f))
            assert 0 <= off <= max(doc.size - 32, 0)
            assert np.array_equal(row[:n], doc[off:off + n]) and n == min(doc.size, 32)
    long = np.flatnonzero(crop.documents.doc_len > 40)
    offsets = np.stack([e["offset"][long] for e in epochs])
    assert (offsets != offsets[0]).any()  # windows move between epochs
    assert np.array_equal(crop.fetch_numpy(ids, q, epoch=2)["offset"], epochs[2]["offset"])  # and are reproducible
    single = crop.fetch_numpy(long[:1], q, epoch=3)  # independent of the batch it is fetched in
    assert single["offset"][0] == epochs[3]["offset"][long[0]]
    crop.pack(tmp_path / "store")
    packed = Consumer.from_packed(tmp_path / "store", seqlen=32, long_files="crop", seed=7)
    for e in range(2):
        q = ["input_array", "labels"]
        a, b = crop.fetch_numpy(ids, q, epoch=e), packed.fetch_numpy(ids, q, epoch=e)
        assert all(np.array_equal(a[k], b[k]) for k in a)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**63), epoch=st.integers(0, 10**6), room=st.integers(0, 10**9))
def test_crop_offsets_stay_in_range(seed, epoch, room):
    from consumer.tokens.split import crop_offsets
    ids = np.arange(64, dtype=np.int64)
    out = crop_offsets(seed, epoch, ids, np.full(64, room, dtype=np.int64))
    assert out.min() >= 0 and out.max() <= room
    assert np.array_equal(out, crop_offsets(seed, epoch, ids, np.full(64, room, dtype=np.int64)))


def test_a_dataset_built_in_memory_after_sql_pickles_small_and_feeds_spawn_workers(ds):
    ds.sql("SELECT count(*) FROM files")  # an open in-memory SQLite connection must not travel
    blob = pickle.dumps(ds)
    assert len(blob) < 3 << 20
    clone = pickle.loads(blob)
    ids = np.arange(len(ds))
    labels = clone.fetch_numpy(ids, "mlm", epoch=3)["labels"]
    assert np.array_equal(labels, ds.fetch_numpy(ids, "mlm", epoch=3)["labels"])
    spawned = ds.dataloader(4, query=["sample_id", "input_array"], num_workers=1, multiprocessing_context="spawn")
    inline = ds.dataloader(4, query=["sample_id", "input_array"])
    got = [b["sample_id"].tolist() for b in spawned]
    assert got == [b["sample_id"].tolist() for b in inline] and sorted(sum(got, [])) == list(range(len(ds)))
