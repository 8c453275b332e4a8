"""A packed store's sample index: built once, kept in the index cache, mapped at every later open, never stale."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer
from consumer.dataset.cache import INDEX_DIR
from consumer.errors import FormatError
from consumer.fetch.reader import packed_runs
from consumer.tokens.index import INDEX_ARRAYS

from ..conftest import write_corpus

SETTINGS = [("concat", 23, "truncate"), ("diff", 40, "windows"), ("diff", "auto", "truncate")]


def _store(tmp_path: Path, sizes: dict, name: str = "store", seed: int = 0) -> str:
    fps = write_corpus(tmp_path / f"data_{name}_{seed}", sizes, seed=seed)
    prefix = str(tmp_path / name)
    Consumer(fps, n_bytes=1, cache_dir=False).pack(prefix)
    return prefix


def _all(ds: Consumer) -> dict:
    return ds.fetch_numpy(np.arange(len(ds)), ["input_array", "class", "file_id", "offset", "length"])


@pytest.mark.parametrize(("style", "seqlen", "long_files"), SETTINGS)
def test_the_second_open_maps_the_index_the_first_built(tmp_path, style, seqlen, long_files):
    prefix = _store(tmp_path, {"a": [5, 80, 3, 200], "b": [17, 1, 64]})
    cache = str(tmp_path / "cache")
    first = Consumer.from_packed(prefix, style=style, seqlen=seqlen, long_files=long_files, cache_dir=cache)
    again = Consumer.from_packed(prefix, style=style, seqlen=seqlen, long_files=long_files, cache_dir=cache)
    uncached = Consumer.from_packed(prefix, style=style, seqlen=seqlen, long_files=long_files, cache_dir=False)
    assert (first.build_info["index"], again.build_info["index"], uncached.build_info["index"]) == \
        ("miss", "hit", "off")
    for k in INDEX_ARRAYS:
        np.testing.assert_array_equal(getattr(again.index, k), getattr(uncached.index, k), err_msg=k)
    assert again.index.runs is not None
    np.testing.assert_array_equal(again.index.runs.start, packed_runs(uncached.index, uncached.documents))
    np.testing.assert_array_equal(again.index.sample_tokens(), uncached.index.sample_tokens())
    want = _all(uncached)
    for ds in (first, again):
        got = _all(ds)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_other_settings_get_their_own_entry(tmp_path):
    prefix = _store(tmp_path, {"a": [5, 80, 3], "b": [17]})
    cache = str(tmp_path / "cache")
    Consumer.from_packed(prefix, style="concat", seqlen=16, cache_dir=cache)
    other = Consumer.from_packed(prefix, style="concat", seqlen=17, cache_dir=cache)
    assert other.build_info["index"] == "miss" and other.seqlen == 17
    assert len(os.listdir(os.path.join(cache, INDEX_DIR))) >= 2


def test_a_store_packed_again_at_the_same_prefix_is_a_new_entry(tmp_path):
    cache = str(tmp_path / "cache")
    prefix = _store(tmp_path, {"a": [5, 80, 3], "b": [17]}, seed=1)
    old = Consumer.from_packed(prefix, style="concat", seqlen=16, cache_dir=cache)
    assert old.build_info["index"] == "miss"
    _store(tmp_path, {"a": [50, 8], "b": [170, 2, 9]}, seed=2)  # the same prefix, other files
    new = Consumer.from_packed(prefix, style="concat", seqlen=16, cache_dir=cache)
    fresh = Consumer.from_packed(prefix, style="concat", seqlen=16, cache_dir=False)
    assert new.build_info["index"] == "miss" and len(new) == len(fresh)
    np.testing.assert_array_equal(_all(new)["input_array"], _all(fresh)["input_array"])


def _entry(cache: str, kind: str) -> Path:
    """The cache entry of that kind (``description.json``'s ``kind``)."""
    for folder in Path(cache, INDEX_DIR).iterdir():
        if folder.is_dir() and json.loads((folder / "description.json").read_text()).get("kind") == kind:
            return folder
    raise AssertionError(f"no {kind} entry under {cache}")


def test_a_damaged_entry_is_built_again_never_served(tmp_path):
    prefix = _store(tmp_path, {"a": [5, 80, 3, 200], "b": [17, 1, 64]})
    cache = str(tmp_path / "cache")
    want = _all(Consumer.from_packed(prefix, style="concat", seqlen=23, cache_dir=False))
    Consumer.from_packed(prefix, style="concat", seqlen=23, cache_dir=cache)
    entry = _entry(cache, "packed store index")
    arrays = sorted(p for p in entry.iterdir() if p.suffix == ".npy")
    assert {p.stem for p in arrays} == {*INDEX_ARRAYS, "sample_tokens", "runs"}
    for victim in arrays:
        raw = bytearray(victim.read_bytes())
        raw[-1] ^= 0x10  # one bit of the last value
        victim.write_bytes(bytes(raw))
        ds = Consumer.from_packed(prefix, style="concat", seqlen=23, cache_dir=cache)
        assert ds.build_info["index"] == "miss", victim.name
        got = _all(ds)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{victim.name}: {k}")
        entry = _entry(cache, "packed store index")


def test_lengths_edited_after_the_index_was_cached_are_still_refused(tmp_path):
    """The length check is recorded in the entry of one version of the store: a table edited since (same size,
    other values) is a new version, checked again."""
    prefix = _store(tmp_path, {"a": [5, 80, 3], "b": [17, 2]})
    cache = str(tmp_path / "cache")
    Consumer.from_packed(prefix, style="concat", seqlen=16, cache_dir=cache)
    table = Path(prefix + ".consumer.npz")
    with np.load(table) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["doc_size"][1] += 3
    side_path = Path(prefix + ".consumer.json")
    side = json.loads(side_path.read_text())
    table.unlink()
    from consumer.packed.table import write_table  # the same writer: the table has the same size
    write_table(table, [p.decode() for p in bytes(arrays["paths"]).split(b"\0")], arrays["doc_class"],
                arrays["doc_size"], arrays["doc_header"])
    assert table.stat().st_size == side["files"]["table"]["size"]
    with pytest.raises(FormatError, match=r"document 1 of the store .*length expected"):
        Consumer.from_packed(prefix, style="concat", seqlen=16, cache_dir=cache)


def test_the_full_check_is_recorded_once_per_store_version(tmp_path):
    """The first open checks every document and records it; later opens of the same files rely on the record; a
    store file written since (any write moves its change time) is checked in full again, and a damaged record is
    never relied on."""
    prefix = _store(tmp_path, {"a": [5, 80, 3, 200], "b": [17, 1, 64]})
    cache = str(tmp_path / "cache")
    first = Consumer.from_packed(prefix, style="concat", seqlen=23, cache_dir=cache)
    second = Consumer.from_packed(prefix, style="diff", seqlen=40, cache_dir=cache)
    assert (first.build_info["checks"], second.build_info["checks"]) == ("full", "recorded")
    want = _all(Consumer.from_packed(prefix, style="diff", seqlen=40, cache_dir=False))
    got = _all(second)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    record = _entry(cache, "packed store check")
    for victim in sorted(record.glob("*.npy")):
        raw = bytearray(victim.read_bytes())
        raw[-3] ^= 0x01
        victim.write_bytes(bytes(raw))
        again = Consumer.from_packed(prefix, style="diff", seqlen=40, cache_dir=cache)
        assert again.build_info["checks"] == "full", victim.name
        got = _all(again)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        record = _entry(cache, "packed store check")
    idx = Path(prefix + ".idx")
    idx.write_bytes(idx.read_bytes())  # the same bytes, written again: another change time
    assert Consumer.from_packed(prefix, style="diff", seqlen=40, cache_dir=cache).build_info["checks"] == "full"


def test_the_files_fingerprint_is_found_once_per_store_version(tmp_path):
    """``get_dict()["files_sha256"]`` (every loader's dataset fingerprint) is computed at its first use and recorded
    in the store's index entry: the next open has it without reading the file table."""
    prefix = _store(tmp_path, {"a": [5, 80, 3, 200], "b": [17, 1, 64]})
    cache = str(tmp_path / "cache")
    first = Consumer.from_packed(prefix, style="concat", seqlen=23, cache_dir=cache)
    assert first._built.files_digest is None
    want = first.get_dict()["files_sha256"]
    again = Consumer.from_packed(prefix, style="concat", seqlen=23, cache_dir=cache)
    assert again.build_info["index"] == "hit" and again._built.files_digest == want
    assert again.get_dict()["files_sha256"] == want
    uncached = Consumer.from_packed(prefix, style="concat", seqlen=23, cache_dir=False)
    assert uncached.get_dict()["files_sha256"] == want
    state = again.dataloader(4, seed=1).state_dict()
    uncached.dataloader(4, seed=1).load_state_dict(state)  # the same dataset, whatever the digest's way
