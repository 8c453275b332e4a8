"""Per-chunk checksums of packed stores: every flipped bit of the token data is refused before its sample is
served and named with its chunk by ``consumer verify``; older stores open with a warning; the data files that
other readers see are unchanged."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer, FormatError, merge_packed, verify_packed
from consumer.cli.main import main
from consumer.errors import ConsumerWarning
from consumer.fetch.reader import packed_runs
from consumer.formats import IndexedReader, read_pbin
from consumer.formats.chunksums import DEFAULT_CHUNK_BYTES
from consumer.packed.open import load_store
from consumer.sources.token_store import FileTokens

from ..conftest import without_chunk_sums, write_corpus

CHUNK = 4096
FLIPS = 1000
# 45 files of 500..2380 bytes, n_bytes=1: ~60k uint16 tokens, 30 chunks of 4 KiB
SIZES = {"a": list(range(500, 2000, 50)), "b": list(range(700, 2500, 120))}
DATA = {"megatron": (".bin", 0), "modalities": (".pbin", 12)}  # data file suffix, first byte of the token data


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Consumer:
    root = tmp_path_factory.mktemp("chunksums")
    return Consumer(write_corpus(root / "data", SIZES, seed=3), cache_dir=False, style="diff", seqlen="auto",
                    n_bytes=1, metadata=None)


def _open(prefix: Path) -> Consumer:
    return Consumer.from_packed(prefix, style="diff", seqlen="auto")


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
def test_every_flipped_bit_is_refused_before_its_sample_is_served_and_verify_names_its_chunk(
        tmp_path, corpus, fmt, capsys) -> None:
    """1,000 random single-bit flips of the token data, one at a time, each with fresh opens: the fetch of the
    sample holding the flipped bit raises FormatError naming the store, chunk and byte range (no row served);
    a sample outside that chunk is still served intact; ``consumer verify --json`` exits 2 and lists exactly that
    chunk with its byte range."""
    prefix = tmp_path / "store"
    corpus.pack(prefix, format=fmt, checksum_chunk_bytes=CHUNK)
    suffix, offset = DATA[fmt]
    data = Path(f"{prefix}{suffix}")
    clean = _open(prefix)
    rows = clean.fetch_numpy(np.arange(len(clean)))["input_array"]
    start = packed_runs(clean.index, clean.documents)  # sample s is store tokens [start[s], start[s] + length[s])
    length = clean.index.sample_tokens()
    first_chunk, last_chunk = start // (CHUNK // 2), (start + length - 1) // (CHUNK // 2)
    data_bytes = int(clean.documents.doc_len.sum()) * 2
    assert start.min() >= 0 and data_bytes > 29 * CHUNK
    rng = np.random.default_rng(21)
    flat = rng.choice(data_bytes * 8, size=FLIPS, replace=False)  # distinct (byte, bit) pairs
    fd = os.open(data, os.O_RDWR)
    try:
        for byte, bit in zip((flat // 8).tolist(), (flat % 8).tolist()):
            original = os.pread(fd, 1, offset + byte)
            os.pwrite(fd, bytes([original[0] ^ (1 << bit)]), offset + byte)
            try:
                chunk = byte // CHUNK
                lo, hi = offset + chunk * CHUNK, offset + min(chunk * CHUNK + CHUNK, data_bytes)
                named = rf"{re.escape(str(prefix))}: chunk {chunk} \(bytes {lo}\.\.{hi} of {re.escape(str(data))}\)"
                ds = _open(prefix)
                (victim,) = np.flatnonzero((start <= byte // 2) & (byte // 2 < start + length))
                with pytest.raises(FormatError, match=named + ": crc32c expected"):
                    ds.fetch_numpy(np.array([victim]))
                others = np.flatnonzero((first_chunk > chunk) | (last_chunk < chunk))
                other = others[byte % others.size]
                assert np.array_equal(ds.fetch_numpy(np.array([other]))["input_array"][0], rows[other])
                assert main(["verify", str(prefix), "--json"]) == 2
                report = json.loads(capsys.readouterr().out)
                assert [(b["chunk"], b["bytes"], b["file"]) for b in report["bad_chunks"]] == [(chunk, [lo, hi],
                                                                                               str(data))]
                assert not report["ok"] and report["checksum"] == "bad"
            finally:
                os.pwrite(fd, original, offset + byte)
    finally:
        os.close(fd)
    assert verify_packed(prefix)["ok"]


def test_verify_lists_every_damaged_chunk(tmp_path, corpus, capsys) -> None:
    prefix = tmp_path / "store"
    corpus.pack(prefix, checksum_chunk_bytes=CHUNK)
    assert main(["verify", str(prefix)]) == 0
    assert re.search(r"ok: 45 documents, \d+ tokens, .*sha256 ok, 30 chunks of 4096 bytes ok", capsys.readouterr().out)
    data = Path(f"{prefix}.bin")
    raw = bytearray(data.read_bytes())
    for chunk in (2, 7, 29):
        raw[chunk * CHUNK + 100] ^= 0x10
    data.write_bytes(bytes(raw))
    assert main(["verify", str(prefix)]) == 2
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert [re.search(r"damaged chunk (\d+): bytes (\d+)\.\.(\d+) of ", x).groups() for x in lines] == [
        ("2", "8192", "12288"), ("7", "28672", "32768"), ("29", "118784", str(len(raw)))]
    assert "3 of 30 chunks damaged: chunk 2 (bytes 8192..12288" in err and "token data sha256 expected" in err
    with pytest.raises(FormatError, match=r"3 of 30 chunks damaged: chunk 2 .*; chunk 7 .*; chunk 29 "):
        verify_packed(prefix)
    with pytest.raises(FormatError, match="3 of 30 chunks damaged"):
        Consumer.from_packed(prefix, verify=True)


def test_a_chunk_is_checked_once_then_served_from_the_map(tmp_path, corpus) -> None:
    prefix = tmp_path / "store"
    corpus.pack(prefix, format="modalities", checksum_chunk_bytes=CHUNK)
    ds = _open(prefix)
    verifier = ds.documents.source.tokens.verifier
    assert verifier.verified == 0 and verifier.sums.chunks == 30  # nothing is read at open
    start = packed_runs(ds.index, ds.documents)
    s = int(np.argmax(start > 5 * CHUNK))
    ds.fetch_numpy(np.array([s]))
    lo, hi = start[s] * 2 // CHUNK, ((start[s] + ds.index.sample_tokens()[s]) * 2 - 1) // CHUNK
    assert verifier.verified == hi - lo + 1
    ds.fetch_numpy(np.arange(len(ds)))
    assert verifier.verified == 30


def test_a_store_packed_before_chunk_sums_opens_with_a_warning_and_todays_checks(tmp_path, corpus, capsys) -> None:
    prefix = tmp_path / "store"
    corpus.pack(prefix, checksum_chunk_bytes=CHUNK)
    rows = _open(prefix).fetch_numpy(np.arange(len(corpus)))["input_array"]
    without_chunk_sums(prefix)
    with pytest.warns(ConsumerWarning, match=r"store: this store was packed before per-chunk checksums existed"):
        ds = _open(prefix)
    assert ds.documents.source.tokens.verifier is None
    assert np.array_equal(ds.fetch_numpy(np.arange(len(ds)))["input_array"], rows)
    report = verify_packed(prefix)
    assert report["ok"] and report["chunks"] == 0 and report["checksum"] == "ok"
    assert main(["verify", str(prefix)]) == 0
    out, err = capsys.readouterr()
    assert "sha256 ok, no chunk sums (packed by an older version)" in out and "packed before per-chunk" in err
    data = Path(f"{prefix}.bin")
    raw = bytearray(data.read_bytes())
    raw[5000] ^= 1  # an in-vocabulary change: only the sha256 of verify sees it
    data.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="token data sha256 expected"):
        verify_packed(prefix)


def test_a_missing_or_damaged_sums_file_is_refused_at_open(tmp_path, corpus) -> None:
    prefix = tmp_path / "store"
    corpus.pack(prefix, checksum_chunk_bytes=CHUNK)
    sums = Path(f"{prefix}.consumer.sums")
    blob = sums.read_bytes()
    sums.unlink()  # a deleted sums file never turns the store into an unchecked one
    with pytest.raises(FormatError, match=r"store\.consumer\.sums: chunk sums file is missing: expected 172 bytes"):
        _open(prefix)
    sums.write_bytes(blob[:-4])
    with pytest.raises(FormatError, match=r"chunk sums file: size expected 172 bytes \(recorded in the sidecar\), "
                                          r"got 168"):
        _open(prefix)
    damaged = bytearray(blob)
    damaged[60] ^= 1
    sums.write_bytes(bytes(damaged))
    with pytest.raises(FormatError, match="the file's own crc32c expected .* the sums file is damaged"):
        _open(prefix)
    side_path = Path(f"{prefix}.consumer.json")
    side = json.loads(side_path.read_text())
    sums.write_bytes(blob)
    side["chunksums"]["chunk_bytes"] = 8192
    side_path.write_text(json.dumps(side))
    with pytest.raises(FormatError, match=r"chunk_bytes expected 8192 \(the store's token data\), got 4096"):
        _open(prefix)
    side["chunksums"] = {"name": "x"}
    side_path.write_text(json.dumps(side))
    with pytest.raises(FormatError, match=r"sidecar field 'chunksums': expected \{'name'"):
        _open(prefix)


def test_the_files_other_readers_see_are_unchanged(tmp_path, corpus) -> None:
    """The chunk size changes nothing but the sums file; Megatron's and Modalities' readers read the stores."""
    for fmt, files in (("megatron", (".bin", ".idx", ".consumer.npz")), ("modalities", (".pbin", ".consumer.npz"))):
        a, b = tmp_path / f"{fmt}-a", tmp_path / f"{fmt}-b"
        corpus.pack(a, format=fmt)
        corpus.pack(b, format=fmt, checksum_chunk_bytes=1 << 12)
        for suffix in files:
            assert Path(f"{a}{suffix}").read_bytes() == Path(f"{b}{suffix}").read_bytes()
        side_a, side_b = (json.loads(Path(f"{p}.consumer.json").read_text()) for p in (a, b))
        assert side_a["files"].keys() == side_b["files"].keys() == set(
            {"megatron": ["bin", "idx", "table"], "modalities": ["pbin", "table"]}[fmt])
        assert side_a["chunksums"]["chunk_bytes"] == DEFAULT_CHUNK_BYTES
        assert side_b["chunksums"]["chunk_bytes"] == 1 << 12
    doc0 = corpus.document_tokens(0)
    assert np.array_equal(IndexedReader(str(tmp_path / "megatron-a"))[0], doc0)
    pb = read_pbin(f"{tmp_path / 'modalities-a'}.pbin")
    assert np.array_equal(pb.data[pb.index[0, 0] // 2:][:len(doc0)], doc0)
    with pytest.raises(Exception, match="checksum_chunk_bytes must be a power of two"):
        corpus.pack(tmp_path / "c", checksum_chunk_bytes=5000)


@pytest.mark.parametrize("order_by", ["corpus", "inputs"])
def test_merge_writes_sums_and_refuses_a_damaged_input(tmp_path, order_by) -> None:
    fa = write_corpus(tmp_path / "a", {"x": [3000, 5000]}, seed=1)
    fb = write_corpus(tmp_path / "b", {"y": [4000, 7000]}, seed=2)
    for name, fps in (("sa", fa), ("sb", fb)):
        Consumer(fps, cache_dir=False, n_bytes=1, metadata=None).pack(tmp_path / name, checksum_chunk_bytes=CHUNK)
    merge_packed([tmp_path / "sa", tmp_path / "sb"], tmp_path / "m", order_by=order_by)
    report = verify_packed(tmp_path / "m")
    merged_bytes = Path(f"{tmp_path / 'm'}.bin").stat().st_size
    assert report["ok"] and report["chunk_bytes"] == DEFAULT_CHUNK_BYTES
    assert report["chunks"] == -(-merged_bytes // DEFAULT_CHUNK_BYTES)
    data = tmp_path / "sb.bin"
    raw = bytearray(data.read_bytes())
    raw[CHUNK + 7] ^= 2
    data.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=r"sb: chunk 1 \(bytes 4096\.\.8192 of .*sb\.bin\): crc32c expected"):
        merge_packed([tmp_path / "sa", tmp_path / "sb"], tmp_path / "m2", order_by=order_by)
    assert not Path(f"{tmp_path / 'm2'}.consumer.json").exists()


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
def test_one_pass_reads_by_pread_give_the_mapped_tokens_and_check_each_chunk(tmp_path, corpus, fmt) -> None:
    """``TokenStore.for_one_pass`` (what a merge copies through): a local store's data file by plain reads, from
    the format's data offset, the same tokens as the memory map; a damaged chunk is refused by ``read`` and
    returned as stored by ``read_as_stored`` (what ``verify_packed`` scans)."""
    prefix = tmp_path / "store"
    corpus.pack(prefix, format=fmt, checksum_chunk_bytes=CHUNK)
    mapped = load_store(prefix).tokens
    reads = mapped.for_one_pass()
    assert isinstance(reads, FileTokens) and reads.dtype == mapped.dtype and reads.size == mapped.size
    try:
        assert np.array_equal(reads.read(0, reads.size), mapped.read(0, mapped.size))
        assert np.array_equal(reads.read_as_stored(100, 7), mapped.mapped()[100:107])
    finally:
        reads.close()
    data = Path(mapped.data_file)
    raw = bytearray(data.read_bytes())
    at = mapped.verifier.sums.data_offset + 3 * CHUNK + 5
    raw[at] ^= 4
    data.write_bytes(bytes(raw))
    damaged = load_store(prefix).tokens.for_one_pass()
    w = damaged.itemsize
    try:
        assert damaged.read_as_stored(0, damaged.size).tobytes()[3 * CHUNK + 5] == raw[at]  # as stored, unchecked
        assert np.array_equal(damaged.read(0, 3 * CHUNK // w), mapped.read(0, 3 * CHUNK // w))  # intact chunks
        with pytest.raises(FormatError, match=r"chunk 3 \(bytes .*\): crc32c expected"):
            damaged.read(3 * CHUNK // w, 1)
    finally:
        damaged.close()
