"""Cold reads of a local packed store: the first touch of a chunk reads it with ``pread`` from the data file (no
memory-map read-ahead), checks its CRC and its ids before any byte of it is served; stores with 1 MiB sums (packed
before 16 KiB became the default) and stores without sums serve the same rows; loader workers check for
themselves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, FormatError
from consumer.fetch.packed_rows import PackedRows
from consumer.fetch.reader import packed_runs
from consumer.formats.chunksums import DEFAULT_CHUNK_BYTES

from ..conftest import without_chunk_sums, write_corpus
from ..helpers.racing import evict_store as _evict

# two classes of 40 files of 3..12 KB, n_bytes=2 (int32 tokens): ~470 KB of token data, ~29 chunks of 16 KiB
SIZES = {"a": list(range(3000, 12000, 450)), "b": list(range(3100, 12100, 450))}
KW = {"style": "concat", "seqlen": 512}


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """The same documents packed with 16 KiB sums (the default), 1 MiB sums and no sums."""
    root = tmp_path_factory.mktemp("cold")
    raw = Consumer(write_corpus(root / "data", SIZES, seed=5), cache_dir=False, n_bytes=2, metadata=None, **KW)
    out = {"16k": root / "s16k", "1m": root / "s1m", "none": root / "none"}
    raw.pack(out["16k"])
    raw.pack(out["1m"], checksum_chunk_bytes=1 << 20)
    raw.pack(out["none"])
    without_chunk_sums(out["none"])
    return out


def _rows(prefix: Path, ids: np.ndarray) -> np.ndarray:
    return Consumer.from_packed(prefix, **KW).fetch_numpy(ids)["input_array"]


def test_the_default_chunk_is_16_kib_and_a_first_touch_reads_only_the_chunks_of_its_rows(stores) -> None:
    ds = Consumer.from_packed(stores["16k"], **KW)
    verifier = ds.documents.source.tokens.verifier
    assert DEFAULT_CHUNK_BYTES == 1 << 14 and verifier.sums.chunk_bytes == 1 << 14
    assert verifier.local_file is not None and verifier.id_limit == ds.vocab.size
    start, length = packed_runs(ds.index, ds.documents), ds.index.sample_tokens()
    ids = np.array([3, len(ds) // 2, len(ds) - 1])
    _evict(stores["16k"])
    ds.fetch_numpy(ids)
    want = set()
    for s, n in zip(start[ids].tolist(), length[ids].tolist()):
        want |= set(range(s * 4 >> 14, ((s + n) * 4 - 1 >> 14) + 1))
    assert verifier.verified == len(want) and {c for c in range(verifier.sums.chunks) if verifier.seen[c]} == want
    rows = PackedRows(ds.index, ds.documents)
    assert rows.by_chunks and rows.rows(ids, None, np.dtype(np.int64)) is not None and not rows.blocks.any()


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
def test_a_damaged_byte_of_an_evicted_store_is_refused_naming_its_chunk_before_any_row_is_served(
        tmp_path, fmt) -> None:
    raw = Consumer(write_corpus(tmp_path / "data", SIZES, seed=6), cache_dir=False, n_bytes=2, metadata=None, **KW)
    prefix = tmp_path / "store"
    raw.pack(prefix, format=fmt)
    clean = Consumer.from_packed(prefix, **KW)
    rows = clean.fetch_numpy(np.arange(len(clean)))["input_array"]
    start, length = packed_runs(clean.index, clean.documents), clean.index.sample_tokens()
    data, offset = (Path(f"{prefix}.bin"), 0) if fmt == "megatron" else (Path(f"{prefix}.pbin"), 12)
    token = int(start[len(clean) // 2]) + 7  # inside the middle sample
    with open(data, "r+b") as f:
        f.seek(offset + 4 * token)
        old = f.read(1)
        f.seek(offset + 4 * token)
        f.write(bytes([old[0] ^ 0x10]))
    _evict(prefix)
    ds = Consumer.from_packed(prefix, **KW)
    chunk = 4 * token >> 14
    lo, hi = offset + (chunk << 14), offset + min((chunk + 1) << 14, int(length.sum()) * 4)
    victim = int(np.flatnonzero((start <= token) & (token < start + length))[0])
    for ids in ([victim], [0, victim], list(range(len(ds)))):  # the lean path (few, many rows) and the loader's
        with pytest.raises(FormatError, match=rf"chunk {chunk} \(bytes {lo}\.\.{hi} of .*\): crc32c expected .* "
                                              "nothing of this read was served"):
            ds.fetch_numpy(np.array(ids))
    with pytest.raises(FormatError, match=rf"chunk {chunk} \(bytes {lo}\.\.{hi} of "):
        ds.fetch_numpy(np.array([victim]), query=["input_array", "file_id"], out_dtype=np.int32)
    safe = np.flatnonzero((start + length) * 4 <= chunk << 14)  # samples wholly before the damaged chunk
    assert safe.size and np.array_equal(ds.fetch_numpy(safe)["input_array"], rows[safe])


def test_an_intact_chunk_holding_an_id_outside_the_vocabulary_is_refused(tmp_path) -> None:
    """A chunk whose CRC matches but which holds an id >= vocab size (written so, sums and all) is refused with
    the chunk named: with chunk sums the ids are checked with the chunk, not by the fetch's block check."""
    raw = Consumer(write_corpus(tmp_path / "data", SIZES, seed=7), cache_dir=False, n_bytes=2, metadata=None, **KW)
    prefix = tmp_path / "store"
    raw.pack(prefix)
    data = Path(f"{prefix}.bin")
    blob = bytearray(data.read_bytes())
    blob[4 * 5000:4 * 5001] = (70000).to_bytes(4, "little")
    data.write_bytes(bytes(blob))
    from consumer.formats.chunksums import sums_of_file
    from consumer.packed.sums import write_sums_file

    write_sums_file(Path(f"{prefix}.consumer.sums"), sums_of_file(data, 0, len(blob), DEFAULT_CHUNK_BYTES))
    ds = Consumer.from_packed(prefix, **KW)
    with pytest.raises(FormatError, match=r"chunk 1 \(bytes 16384\.\.32768 of .*\): token ids must be in "
                                          r"\[0, 65542\), got \[70000\]"):
        ds.fetch_numpy(np.arange(len(ds)))


def test_stores_with_1_mib_sums_or_none_serve_the_same_rows(stores) -> None:
    ids = np.arange(len(Consumer.from_packed(stores["16k"], **KW)))
    want = _rows(stores["16k"], ids)
    for key in ("1m", "none"):
        _evict(stores[key])
        if key == "none":
            with pytest.warns(Warning, match="packed before per-chunk checksums"):
                got = _rows(stores[key], ids[::-1])
        else:
            got = _rows(stores[key], ids[::-1])
        assert np.array_equal(got, want[::-1])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.integers(0, 10 ** 6), min_size=1, max_size=40), min_size=1, max_size=4),
       key=st.sampled_from(["16k", "1m"]), out=st.sampled_from([np.int64, np.int32]))
def test_chunks_read_with_pread_and_through_the_map_give_the_same_rows(stores, batches, key, out) -> None:
    """A verifier reading first-touched chunks with pread and one reading them through the memory map (as before)
    verify the same chunks and the fetch serves the same rows, whatever the batches."""
    cold = Consumer.from_packed(stores[key], **KW)
    mapped = Consumer.from_packed(stores[key], **KW)
    mapped.documents.source.tokens.verifier.local_file = None  # the chunks are read from the map
    n = len(cold)
    for batch in batches:
        ids = np.array([i % n for i in batch])
        a = cold.fetch_numpy(ids, out_dtype=out)["input_array"]
        b = mapped.fetch_numpy(ids, out_dtype=out)["input_array"]
        assert a.dtype == np.dtype(out) and np.array_equal(a, b)
    va, vb = (d.documents.source.tokens.verifier for d in (cold, mapped))
    assert va.verified == vb.verified and bytes(va.seen) == bytes(vb.seen)


def test_loader_workers_read_cold_chunks_and_refuse_a_damaged_one(stores, tmp_path) -> None:
    ds = Consumer.from_packed(stores["16k"], **KW)
    every = ds.fetch_numpy(np.arange(len(ds)))["input_array"]
    _evict(stores["16k"])
    got = np.concatenate([b["input_array"].numpy() for b in
                          ds.dataloader(8, num_workers=1, shuffle=True, drop_last=False)])
    assert sorted(map(bytes, got)) == sorted(map(bytes, every))  # every sample once, row for row
    raw = Consumer(write_corpus(tmp_path / "data", SIZES, seed=8), cache_dir=False, n_bytes=2, metadata=None, **KW)
    prefix = tmp_path / "store"
    raw.pack(prefix)
    data = Path(f"{prefix}.bin")
    with open(data, "r+b") as f:
        f.seek(20000)
        old = f.read(1)
        f.seek(20000)
        f.write(bytes([old[0] ^ 1]))
    _evict(prefix)
    damaged = Consumer.from_packed(prefix, **KW)
    with pytest.raises(FormatError, match=r"chunk 1 \(bytes 16384\.\.32768 of .*\): crc32c expected"):
        for _ in damaged.dataloader(len(damaged), num_workers=1, shuffle=False):
            pass


@pytest.mark.parametrize("cached_read_s", [0.0, 1.0])
def test_runs_read_serially_or_on_threads_give_the_same_rows(stores, monkeypatch, cached_read_s) -> None:
    """A first touch reads the runs one after another while reads come from the page cache, and hands the rest to
    the reader threads once one waited on the device: both ways verify the same chunks and serve the same rows."""
    from consumer.formats import chunksums

    want = _rows(stores["16k"], np.arange(len(Consumer.from_packed(stores["16k"], **KW))))
    monkeypatch.setattr(chunksums, "_CACHED_READ_S", cached_read_s)  # 0: every read counts as slow
    ds = Consumer.from_packed(stores["16k"], **KW)
    ids = np.random.default_rng(3).permutation(len(ds))[:40]
    _evict(stores["16k"])
    assert np.array_equal(ds.fetch_numpy(ids)["input_array"], want[ids])
    verifier = ds.documents.source.tokens.verifier
    assert verifier.verified > 1 and (verifier._threads is not None) == (cached_read_s == 0.0)
