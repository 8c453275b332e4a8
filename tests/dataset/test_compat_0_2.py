"""What release 0.2 left on disk and in pickles still works after the subpackage move: pickled datasets load
(old flat module names resolve to the new modules) and serve the same batches, index cache entries and
catalogs written by 0.2 are read as they are (no rebuild), and the cache key of a file table is unchanged.

The fixtures in tests/data/v0.2.0 were written by 0.2.0 before the move (generate.py there says how); the
pickles hold absolute paths under /tmp/consumer-pickle-0.2.0, so the test writes the same corpus there."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import pickle
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer, FileChangedError
from consumer.catalog.catalog import Catalog
from consumer.dataset.cache import cache_key, file_table_sha256, load_entry

from ..helpers.stores import as_format_1_table

DATA = Path(__file__).resolve().parents[1] / "data" / "v0.2.0"
ROOT = Path("/tmp/consumer-pickle-0.2.0")
EXPECTED = json.loads((DATA / "expected.json").read_text())


def _generator():
    spec = importlib.util.spec_from_file_location("v020_generate", DATA / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def old_world():
    """The corpus, store and index cache entry the 0.2 pickles point at, recreated at their absolute paths."""
    if not Path("/tmp").is_dir():
        pytest.skip("no /tmp: the 0.2 pickles hold paths under /tmp")
    lock = open("/tmp/consumer-pickle-0.2.0.lock", "w")  # noqa: SIM115  (held for the module's tests)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        shutil.rmtree(ROOT, ignore_errors=True)
        corpus = _generator().write_corpus(ROOT)
        source = Consumer(str(corpus), style="concat", seqlen=48, metadata=None, cache_dir=False)
        source.pack(str(ROOT / "store" / "corpus"))
        as_format_1_table(str(ROOT / "store" / "corpus"))  # what 0.2 wrote, whose size the pickles recorded
        shutil.copytree(DATA / "cache" / "index", ROOT / "cache" / "index")
        yield corpus
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)
        lock.close()


def _load(name: str) -> Consumer:
    return pickle.loads((DATA / f"{name}.pkl").read_bytes())


def _lists(batch: dict) -> dict:
    return {k: v.tolist() for k, v in batch.items()}


def test_old_module_names_are_the_new_modules() -> None:
    import consumer.index as old_index
    import consumer.ir as old_ir

    from consumer.sources import corpus
    from consumer.tokens import index

    assert old_ir is corpus and old_index is index
    assert "consumer.ir" in sys.modules


def test_a_pickled_packed_dataset_continues_where_it_stopped(old_world) -> None:
    ds = _load("packed")
    assert ds.build_info["cache"] == "packed" and ds.mode == "mlm"
    assert _lists(ds[None]) == EXPECTED["packed_next"]  # the same next batch, masks included


def test_a_pickled_subset_of_a_store_serves_the_same_samples(old_world) -> None:
    ds = _load("packed_subset")
    fresh = Consumer.from_packed(str(ROOT / "store" / "corpus"), style="concat", seqlen=32).subset([0, 2, 5])
    assert len(ds) == len(fresh)
    assert np.array_equal(ds[0:len(ds)]["input_array"].numpy(), fresh[0:len(fresh)]["input_array"].numpy())


def test_a_pickled_uncached_dataset_loads_and_refuses_files_that_were_written_again(old_world) -> None:
    ds = _load("raw_arrays")
    fresh = Consumer(str(old_world), style="diff", seqlen=64, metadata=None, cache_dir=False)
    for name in ("seg_ptr", "seg_doc", "seg_start", "seg_len", "seg_col", "sample_class", "class_ptr"):
        assert np.array_equal(getattr(ds.index, name), getattr(fresh.index, name)), name
    assert list(ds.files) == list(fresh.files)
    # the state 0.2's cursor gave after create_batches(3, seed=1) and one batch: it continues in 0.2's order
    saved_0_2 = {"version": 1, "kind": "samples", "n_samples": 9, "batch_size": 3, "drop_last": False, "seed": 1,
                 "shuffle": True, "epoch": 0, "position": 1}
    fresh.load_state_dict(saved_0_2)
    assert ds.state_dict() == fresh.state_dict() and ds.state_dict()["settings"]["stream"] == "epoch"
    assert _lists(fresh[None, "supervised"]) == EXPECTED["raw_next"]  # what the pickled one serves next
    assert ds.get_dict() == {**fresh.get_dict(), "batches": ds.get_dict()["batches"]}
    # a new cursor follows the one batch order (the loader's), which is not 0.2's cursor order
    fresh.create_batches(3, seed=1)
    fresh[None]
    assert _lists(fresh[None, "supervised"]) != EXPECTED["raw_next"]
    with pytest.raises(FileChangedError):  # the files at those paths are new ones (other change stamps)
        ds[None, "supervised"]


def test_a_pickled_cached_dataset_opens_the_index_entry_written_by_0_2(old_world) -> None:
    ds = _load("cached")
    assert ds.build_info["cache"] == "hit" and ds.build_info["key"] == EXPECTED["cached_key"]
    fresh = Consumer(str(old_world), style="diff", seqlen=40, metadata=None, cache_dir=False)
    assert np.array_equal(ds.index.seg_len, fresh.index.seg_len) and ds.classes == fresh.classes


def test_index_entries_and_catalogs_of_0_2_are_read_without_a_rebuild(tmp_path) -> None:
    shutil.copytree(DATA / "cache", tmp_path / "cache")
    entry = load_entry(str(tmp_path / "cache"), EXPECTED["cached_key"])
    assert entry is not None and entry[1]["files"] == 9
    catalog = Catalog(str(tmp_path / "cache" / "catalog.sqlite"))
    try:
        assert catalog.count() == 9 and len(catalog.verified_rows()) == 9
    finally:
        catalog.close()
    assert not list((tmp_path / "cache").glob("catalog.sqlite.corrupt-*"))  # read as it is, not moved aside


def test_the_cache_key_of_a_file_table_is_unchanged() -> None:
    key = cache_key({"probe": 1, "files_sha256": file_table_sha256(["/a/x", "/b/y"], [0, 1], [3, 4], [5, 6])})
    assert key == EXPECTED["probe_key"]
