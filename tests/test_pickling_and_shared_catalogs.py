"""Defects found in review, each with the case that showed it: shared catalogs of subsets, a re-packed store
under a pickled dataset, a catalog left open by a cache hit, the input form after pickling, callables."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from consumer import Consumer, FileChangedError, InputError

from .conftest import write_corpus

SIZES = {"a": [10, 200, 3000], "b": [40, 5]}


@pytest.mark.parametrize("cache", ["off", "on"])
def test_a_subset_keeps_working_when_its_parent_is_closed(tmp_path, cache):
    fps = write_corpus(tmp_path / "data", SIZES)
    ds = Consumer(fps, cache_dir=False if cache == "off" else tmp_path / "c", seqlen=64)
    sub = ds.where("class = 'a'")
    ds.close()
    assert sub.sql("SELECT count(*) FROM files")[0][0] == 3
    split = ds.split({"x": 0.5, "y": 0.5})
    split["x"].close()
    assert split["y"].sql("SELECT count(*) FROM files")[0][0] == len(split["y"].files)


def test_an_unpickled_packed_dataset_refuses_a_store_packed_again(tmp_path):
    fps = write_corpus(tmp_path / "data", SIZES)
    Consumer(fps, cache_dir=False).pack(tmp_path / "p")
    ds = Consumer.from_packed(tmp_path / "p", style="concat", seqlen=32)
    blob = pickle.dumps(ds)
    assert np.array_equal(pickle.loads(blob).fetch_numpy(np.arange(len(ds)))["input_array"],
                          ds.fetch_numpy(np.arange(len(ds)))["input_array"])
    other = write_corpus(tmp_path / "other", {"a": [77, 88], "b": [99]})
    Consumer(other, cache_dir=False).pack(tmp_path / "p")
    with pytest.raises(FileChangedError, match="the packed store changed since this dataset was opened"):
        pickle.loads(blob)


def _open_catalog_fds() -> int:
    out = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            out += "catalog.sqlite" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return out


def test_a_cache_hit_opens_no_catalog(tmp_path):
    fps = write_corpus(tmp_path / "data", SIZES)
    Consumer(fps, cache_dir=tmp_path / "c").close()
    before = _open_catalog_fds()
    kept = [Consumer(fps, cache_dir=tmp_path / "c") for _ in range(5)]  # referenced: only close() may release
    assert all(k.build_info["cache"] == "hit" for k in kept)
    assert _open_catalog_fds() == before


def test_pickling_keeps_the_input_form_and_the_loader_state(tmp_path):
    fps = write_corpus(tmp_path / "data", SIZES)
    Consumer(str(tmp_path / "data"), cache_dir=tmp_path / "c", seqlen=64)  # the entry is made by the dir form
    ds = Consumer(fps, cache_dir=tmp_path / "c", seqlen=64)  # an F3 dict: a hit on the same entry
    assert ds.build_info["cache"] == "hit"
    clone = pickle.loads(pickle.dumps(ds))
    assert clone.get_dict() == ds.get_dict() and clone.get_dict()["data_mode"] == "F3"
    loader = ds.dataloader(2, query=["sample_id"])
    next(iter(loader))
    clone.dataloader(2, query=["sample_id"]).load_state_dict(loader.state_dict())


def test_a_dataset_with_a_lambda_header_pickles(tmp_path):
    fps = write_corpus(tmp_path / "data", SIZES)
    ds = Consumer(fps, cache_dir=False, seqlen=64, metadata=lambda p: "custom " + os.path.basename(p)[:1])
    clone = pickle.loads(pickle.dumps(ds))
    ids = np.arange(len(ds))
    assert np.array_equal(clone.fetch_numpy(ids)["input_array"], ds.fetch_numpy(ids)["input_array"])
    assert clone.get_dict()["metadata"] == "callable"


def test_duplicates_refuse_stores(tmp_path):
    fps = write_corpus(tmp_path / "data", SIZES)
    Consumer(fps, cache_dir=False).pack(tmp_path / "p")
    with pytest.raises(InputError, match="in a packed store"):
        Consumer.from_packed(tmp_path / "p").duplicates()


def test_an_unreachable_server_is_a_remote_error_naming_the_url():
    pytest.importorskip("aiohttp")
    from consumer import RemoteError
    with pytest.raises(RemoteError, match="cannot list the objects.*127.0.0.1:9"):
        Consumer({"a": ["http://127.0.0.1:9/x.bin"]}, cache_dir=False)
