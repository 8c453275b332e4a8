"""Every artefact read back is verified: damaged cache entries are rebuilt (never served, never a crash),
packed stores are checked to the last token, read-only and full caches are told apart from corruption."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, FormatError, verify_packed
from consumer.cli.main import main
from consumer.dataset.cache import load_entry
from consumer.errors import ConsumerWarning
from consumer.fetch.reader import packed_runs

from ..conftest import without_chunk_sums, write_corpus

SMALL = {"cat": [0, 1, 5, 100, 301], "dog": [6, 31, 64], "eel": [250, 11]}
KW = {"style": "concat", "seqlen": 32, "n_bytes": 2}


def _entry(cache: Path) -> Path:
    (entry,) = [p for p in (cache / "index").iterdir() if not p.name.startswith(".")]
    return entry


def _rows(ds: Consumer) -> np.ndarray:
    return ds.fetch_numpy(np.arange(len(ds)), ["input_array", "class"])["input_array"]


@pytest.fixture
def built(tmp_path):
    fps = write_corpus(tmp_path / "data", SMALL)
    cache = tmp_path / "cache"
    ds = Consumer(fps, cache_dir=cache, **KW)
    return fps, cache, _rows(ds)


def _rebuilt_equal(fps, cache, rows) -> None:
    again = Consumer(fps, cache_dir=cache, **KW)
    assert again.build_info["cache"] == "miss"  # damaged: rebuilt, not served
    assert np.array_equal(_rows(again), rows)
    assert Consumer(fps, cache_dir=cache, **KW).build_info["cache"] == "hit"  # and cached again


def test_an_edited_seqlen_in_the_description_is_not_served(built):
    fps, cache, rows = built
    path = _entry(cache) / "description.json"
    desc = json.loads(path.read_text())
    desc["seqlen"] = 16  # rows would overwrite each other if this were served
    path.write_text(json.dumps(desc))
    _rebuilt_equal(fps, cache, rows)


@pytest.mark.parametrize("damage", ["missing key", "entry is a file", "index is a file", "array missing",
                                    "description is a list"])
def test_damaged_or_incomplete_entries_are_rebuilt(built, damage):
    fps, cache, rows = built
    entry = _entry(cache)
    if damage == "missing key":
        path = entry / "description.json"
        desc = json.loads(path.read_text())
        del desc["headers"]
        path.write_text(json.dumps(desc))
    elif damage == "entry is a file":
        shutil.rmtree(entry)
        entry.write_bytes(b"not an entry")
    elif damage == "index is a file":
        shutil.rmtree(cache / "index")
        (cache / "index").write_bytes(b"not a folder")
    elif damage == "array missing":
        (entry / "seg_len.npy").unlink()
    else:
        (entry / "description.json").write_text("[1, 2, 3]")
    _rebuilt_equal(fps, cache, rows)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_single_bit_flips_in_the_description_are_never_served(built, data):
    fps, cache, rows = built
    path = _entry(cache) / "description.json"
    original = path.read_bytes()
    key = _entry(cache).name
    try:
        pos = data.draw(st.integers(0, len(original) - 1))
        bit = data.draw(st.integers(0, 7))
        flipped = bytearray(original)
        flipped[pos] ^= 1 << bit
        path.write_bytes(bytes(flipped))
        entry = load_entry(str(cache), key)  # never raises
        if entry is not None:  # only a flip that leaves the same JSON (white space) may be served
            assert entry[1] == json.loads(original)
    finally:
        path.write_bytes(original)


# ------------------------------------------------------------------------------------------ packed stores


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
def test_verify_detects_a_flipped_token_and_ids_outside_the_vocabulary(tmp_path, fmt):
    fps = write_corpus(tmp_path / "data", SMALL)
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, **KW).pack(prefix, format=fmt)
    report = verify_packed(prefix)
    assert report["checksum"] == "ok" and report["max_id"] < 65542 and report["documents"] == 10
    assert Consumer.from_packed(prefix, verify=True, **{k: KW[k] for k in ("style", "seqlen")}).seqlen == 32
    data = tmp_path / ("store.bin" if fmt == "megatron" else "store.pbin")
    raw = bytearray(data.read_bytes())
    at = len(raw) // 3 if fmt == "megatron" else 12 + 40  # inside the token data
    at -= at % 4
    raw[at:at + 4] = (70000).to_bytes(4, "little")  # an id above vocab.size (65542 for n_bytes=2)
    data.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=r"ids must be in \[0, 65542\), got 70000"):
        verify_packed(prefix)
    with pytest.raises(FormatError, match="ids must be in"):
        Consumer.from_packed(prefix, verify=True, style="concat", seqlen=32)
    ds = Consumer.from_packed(prefix, style="concat", seqlen=32)  # opened without verify: the fetch refuses
    with pytest.raises(FormatError, match=r"chunk 0 \(bytes \d+\.\.\d+ of .*\): crc32c expected"):
        ds.fetch_numpy(np.arange(len(ds)))
    without_chunk_sums(prefix)  # a store packed before chunk sums: the fetch's id check still refuses
    ds = Consumer.from_packed(prefix, style="concat", seqlen=32)
    with pytest.raises(FormatError, match=r"token ids must be in \[0, 65542\), got \[70000\]"):
        ds.fetch_numpy(np.arange(len(ds)))
    assert main(["verify", str(prefix)]) == 2


@pytest.mark.parametrize("bad", [70000, -5])
def test_a_bad_id_is_refused_by_every_fetch_that_serves_it_and_only_those(tmp_path, bad):
    """The fetch does not check again a sample it found clean; a sample holding a bad id is never found clean, so
    every fetch serving it fails (the first and later ones, alone or with samples already served) while the
    other samples are served. (A store without chunk sums: with them, the chunk's CRC refuses every sample of the
    chunk first.)"""
    fps = write_corpus(tmp_path / "data", SMALL)
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, **KW).pack(prefix, format="megatron")
    without_chunk_sums(prefix)
    clean = Consumer.from_packed(prefix, style="concat", seqlen=32)
    rows = clean.fetch_numpy(np.arange(len(clean)))["input_array"]
    data = tmp_path / "store.bin"
    raw = bytearray(data.read_bytes())
    at = (len(raw) // 8) * 4  # token in the middle of the store (int32 tokens)
    raw[at:at + 4] = bad.to_bytes(4, "little", signed=True)
    data.write_bytes(bytes(raw))
    ds = Consumer.from_packed(prefix, style="concat", seqlen=32)
    start = packed_runs(clean.index, clean.documents)  # sample s is store tokens [start[s], start[s] + length)
    victim = int(np.flatnonzero((start <= at // 4) & (at // 4 < start + clean.index.sample_tokens()))[0])
    assert np.array_equal(ds.fetch_numpy(np.array([0, victim - 1]))["input_array"], rows[[0, victim - 1]])
    for ids in ([0, victim], [victim], [victim - 1, victim, 0]):
        with pytest.raises(FormatError, match=rf"sample {victim}: token ids must be in \[0, 65542\), got \[{bad}\]"):
            ds.fetch_numpy(np.array(ids))
    others = np.array([i for i in range(len(ds)) if i != victim])
    assert np.array_equal(ds.fetch_numpy(others)["input_array"], rows[others])


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
def test_a_store_damaged_in_place_after_its_samples_were_served_is_checked_again(tmp_path, fmt):
    """Samples found clean are not re-checked while the store's data file is unchanged; a write to it (same
    inode, e.g. a bad copy over it) makes every sample checked afresh, so the bad id never leaves the fetch."""
    fps = write_corpus(tmp_path / "data", SMALL)
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, **KW).pack(prefix, format=fmt)
    ds = Consumer.from_packed(prefix, style="concat", seqlen=32)
    ids = np.arange(len(ds))
    ds.fetch_numpy(ids)  # every sample served once: found clean
    time.sleep(0.05)  # past the file system's timestamp tick (a few ms), so the write moves the change time
    data = tmp_path / ("store.bin" if fmt == "megatron" else "store.pbin")
    at = len(data.read_bytes()) // 3 if fmt == "megatron" else 12 + 40
    with open(data, "r+b") as f:  # in place: the mapping of the open dataset sees the new bytes
        f.seek(at - at % 4)
        f.write((70000).to_bytes(4, "little"))
    with pytest.raises(FormatError, match=r"token ids must be in \[0, 65542\), got \[70000\]"):
        ds.fetch_numpy(ids)


def test_verify_catches_an_in_range_change_by_its_checksum(tmp_path, capsys):
    fps = write_corpus(tmp_path / "data", SMALL)
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, **KW).pack(prefix)
    assert main(["verify", str(prefix)]) == 0 and "sha256 ok" in capsys.readouterr().out
    data = tmp_path / "store.bin"
    raw = bytearray(data.read_bytes())
    raw[8] ^= 1  # still a valid id
    data.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="token data sha256 expected"):
        verify_packed(prefix)


def test_a_store_without_a_recorded_checksum_still_verifies_its_ids(tmp_path):
    fps = write_corpus(tmp_path / "data", SMALL)
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, **KW).pack(prefix)
    side_path = tmp_path / "store.consumer.json"
    side = json.loads(side_path.read_text())
    del side["tokens_sha256"]
    side_path.write_text(json.dumps(side))
    assert verify_packed(prefix)["checksum"] == "absent"


# ------------------------------------------------------------------------------------------ I/O trouble


def _chattr(flag: str, *paths: Path) -> bool:
    return subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True).returncode == 0


def test_a_read_only_cache_is_used_read_only_with_a_warning(tmp_path):
    """The cache directory made immutable (``chattr +i``: refused even to root) after a first build: a second
    dataset over more files still builds from the old catalog's results, warns, and moves nothing aside."""
    fps = write_corpus(tmp_path / "data", SMALL)
    cache = tmp_path / "cache"
    first = Consumer(fps, cache_dir=cache, **KW)
    rows = _rows(first)
    first.close()
    more = {**fps, "fox": write_corpus(tmp_path / "more", {"fox": [10, 20]})["fox"]}
    if not shutil.which("chattr") or not _chattr("+i", cache, cache / "index"):
        pytest.skip("chattr +i is not available on this file system")
    try:
        again = Consumer(fps, cache_dir=cache, **KW)
        assert again.build_info["cache"] == "hit" and np.array_equal(_rows(again), rows)
        with pytest.warns(ConsumerWarning, match="cannot be written|is not writable") as caught:
            bigger = Consumer(more, cache_dir=cache, **KW)
        assert len(bigger.files) == 12 and bigger.build_info["cache"] == "miss"
        assert bigger.build_info["libmagic_calls"] == 2  # the old catalog's results were used
        assert any("catalog" in str(w.message) for w in caught) and any("index is not cached" in str(w.message)
                                                                        for w in caught)
        assert bigger.sql("SELECT count(*) FROM files")[0][0] == 12
    finally:
        _chattr("-i", cache, cache / "index")
    assert not [n for n in os.listdir(cache) if ".corrupt" in n]  # nothing moved aside


def test_a_catalog_claiming_a_schema_it_lacks_is_rebuilt(tmp_path):
    import sqlite3
    fps = write_corpus(tmp_path / "data", SMALL)
    cache = tmp_path / "cache"
    Consumer(fps, cache_dir=cache, **KW).close()
    conn = sqlite3.connect(cache / "catalog.sqlite")
    conn.execute("ALTER TABLE files DROP COLUMN histogram")
    conn.commit()
    conn.close()
    ds = Consumer(fps, cache_dir=False, **KW)
    again = Consumer(fps, cache_dir=cache, metadata="mime", **{k: v for k, v in KW.items()})
    assert again.build_info["cache"] == "miss" and again.build_info["libmagic_calls"] == len(ds.files)
    assert [n for n in os.listdir(cache) if n.startswith("catalog.sqlite.corrupt-")]


def test_a_fetch_over_the_memory_budget_is_refused_before_allocating(tmp_path, monkeypatch):
    fps = write_corpus(tmp_path / "data", SMALL)
    ds = Consumer(fps, cache_dir=False, seqlen=10**9, metadata=None)  # a typo-sized seqlen: rows of 8 GB each
    with pytest.raises(Exception) as info:
        ds.fetch_numpy(np.arange(len(ds)))
    assert "over the fetch budget" in str(info.value) and "bytes" in str(info.value)
    monkeypatch.setenv("CONSUMER_MAX_BATCH_BYTES", "1000")
    small = Consumer(fps, cache_dir=False, seqlen=16, metadata=None)
    with pytest.raises(Exception, match=r"needs about \d+ bytes, over the fetch budget of 1000 bytes"):
        small.fetch_numpy(np.arange(len(small)))
    assert small.fetch_numpy(np.arange(2))["input_array"].shape == (2, 16)
    monkeypatch.setenv("CONSUMER_MAX_BATCH_BYTES", "lots")
    with pytest.raises(Exception, match="CONSUMER_MAX_BATCH_BYTES must be a positive number of bytes"):
        small.fetch_numpy(np.arange(2))


def test_an_inflating_file_table_is_refused_before_it_inflates(tmp_path):
    """A small .consumer.npz whose member declares (and holds) a huge array: refused from the zip header."""
    import zipfile

    fps = write_corpus(tmp_path / "data", SMALL)
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, **KW).pack(prefix)
    table = tmp_path / "store.consumer.npz"
    big = np.zeros(40_000_000, dtype=np.int64)  # 320 MB of zeros: compresses to about 0.3 MB
    with zipfile.ZipFile(table, "a", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("doc_size_extra.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, big)
    assert table.stat().st_size < 2 << 20
    side_path = tmp_path / "store.consumer.json"
    side = json.loads(side_path.read_text())
    side["files"]["table"]["size"] = table.stat().st_size
    side_path.write_text(json.dumps(side))
    with pytest.raises(FormatError, match=r"file table member 'doc_size_extra.npy': expected at most \d+ bytes"):
        Consumer.from_packed(prefix)
