"""The chunk sums file (consumer.formats.chunksums): golden bytes, symmetric encode/decode, exact errors, and the
verifier's first-touch checks (every range touching a damaged chunk refused, every other range served)."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import FormatError, InputError
from consumer.formats.chunksums import (
    ChunkHasher,
    ChunkSums,
    ChunkVerifier,
    check_chunk_bytes,
    crc32c,
    decode_sums,
    encode_sums,
    sums_of_bytes,
    sums_of_file,
    sums_size,
)

GOLDEN_DATA = bytes((i * 7 + 3) % 251 for i in range(10000))  # 3 chunks of 4096 bytes (the last 1808)
GOLDEN = bytes.fromhex(
    "434e534d53554d53"  # magic b"CNSMSUMS"
    "01000000"  # version 1
    "01000000"  # algorithm 1 = crc32c
    "0010000000000000"  # chunk_bytes 4096
    "0c00000000000000"  # data_offset 12
    "1027000000000000"  # data_bytes 10000
    "0300000000000000"  # 3 chunks
    "bf5b1b7c" "436c693f" "7cb34674"  # the chunks' CRC-32C, u32 little-endian
    "4ecafab8")  # CRC-32C of everything before
# the CRCs above were computed by a plain bitwise CRC-32C (polynomial 0x82F63B78, reflected), not by google-crc32c


def test_crc32c_is_the_castagnoli_crc() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C
    assert crc32c(b"") == 0 and crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


def test_golden_vector() -> None:
    sums = sums_of_bytes(GOLDEN_DATA, 4096, data_offset=12)
    assert encode_sums(sums) == GOLDEN and len(GOLDEN) == sums_size(10000, 4096) == 52 + 4 * 3
    back = decode_sums(GOLDEN, "golden")
    assert (back.chunk_bytes, back.data_offset, back.data_bytes, back.algorithm) == (4096, 12, 10000, "crc32c")
    assert back.sums.tolist() == [crc32c(GOLDEN_DATA[i:i + 4096]) for i in range(0, 10000, 4096)]
    assert back.byte_range(2) == (8192, 10000)


def test_sums_of_a_file_equal_sums_of_its_bytes(tmp_path) -> None:
    path = tmp_path / "x.pbin"
    path.write_bytes(b"H" * 12 + GOLDEN_DATA + b"index")
    assert encode_sums(sums_of_file(path, 12, 10000, 4096)) == GOLDEN
    with pytest.raises(FormatError, match=r"x\.pbin: truncated: wanted 10010 bytes at byte 12, got 10005"):
        sums_of_file(path, 12, 10010, 4096)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=40000), shift=st.integers(12, 14), offset=st.integers(0, 100),
       cuts=st.lists(st.integers(0, 40000), max_size=6))
def test_encode_decode_and_streaming_are_symmetric(data, shift, offset, cuts) -> None:
    whole = sums_of_bytes(data, 1 << shift, offset)
    hasher = ChunkHasher(1 << shift, offset)
    at = 0
    for cut in sorted(c for c in cuts if c <= len(data)) + [len(data)]:
        hasher.update(data[at:cut])  # pieces of any size, empty ones included
        at = cut
    streamed = hasher.finish()
    assert encode_sums(streamed) == encode_sums(whole)
    back = decode_sums(encode_sums(whole), "x")
    assert back.sums.tolist() == whole.sums.tolist() and back.data_bytes == len(data) == whole.data_bytes
    assert whole.chunks == -(-len(data) // (1 << shift))


def _patched(offset: int, fmt: str, value: int) -> bytes:
    blob = bytearray(GOLDEN)
    struct.pack_into(fmt, blob, offset, value)
    return bytes(blob)


@pytest.mark.parametrize("blob, message", [
    (GOLDEN[:63], "file size expected 64 bytes for 3 chunks, got 63"),
    (GOLDEN[:40], "expected at least 52 bytes, got 40"),
    (b"CNSMSUMX" + GOLDEN[8:], "magic expected b'CNSMSUMS', got b'CNSMSUMX'"),
    (_patched(8, "<I", 2), "version expected 1, got 2"),
    (_patched(12, "<I", 7), r"algorithm expected one of \[1\] \(1 = crc32c\), got 7"),
    (_patched(16, "<Q", 4097), r"chunk_bytes expected a power of two in \[4096, 1073741824\], got 4097"),
    (_patched(16, "<Q", 2048), r"chunk_bytes expected a power of two in \[4096, 1073741824\], got 2048"),
    (_patched(40, "<Q", 4), "chunk count expected 3 for 10000 bytes in chunks of 4096, got 4"),
    (_patched(32, "<Q", 20000), "chunk count expected 5 for 20000 bytes in chunks of 4096, got 3"),
    (GOLDEN + b"\0", "file size expected 64 bytes for 3 chunks, got 65"),
    (_patched(48, "<I", 1), "the file's own crc32c expected b8faca4e, got [0-9a-f]{8}: the sums file is damaged"),
    (_patched(24, "<Q", 13), "the file's own crc32c expected b8faca4e, got [0-9a-f]{8}"),
])
def test_decode_errors_are_exact(blob, message) -> None:
    with pytest.raises(FormatError, match=f"^where: chunk sums: {message}"):
        decode_sums(blob, "where")


@pytest.mark.parametrize("bad", [0, 4095, 4097, 3 << 12, 1 << 31, True, 4096.0, "4096"])
def test_chunk_bytes_is_a_power_of_two_in_range(bad) -> None:
    with pytest.raises(InputError, match=r"checksum_chunk_bytes must be a power of two in \[4096, 1073741824\], got"):
        check_chunk_bytes(bad, "checksum_chunk_bytes")
    assert check_chunk_bytes(1 << 20) == 1 << 20
    with pytest.raises(InputError, match="sums: expected 3 chunk sums"):
        ChunkSums(4096, 0, 10000, np.zeros(2, dtype=np.uint32))


def _store(n_tokens: int, bad_chunk: int | None) -> tuple[np.ndarray, ChunkVerifier]:
    """uint16 tokens in 4 KiB chunks (2048 tokens each), with one chunk damaged after summing when asked."""
    tokens = np.arange(n_tokens, dtype=np.uint16)
    sums = sums_of_bytes(tokens, 4096)
    if bad_chunk is not None:
        tokens[bad_chunk * 2048 + 5] ^= 1 << 3
    tokens.flags.writeable = False
    return tokens, ChunkVerifier(sums, "store", "store.bin", 2)


@settings(max_examples=80, deadline=None)
@given(ranges=st.lists(st.tuples(st.integers(0, 20000), st.integers(0, 5000)), min_size=1, max_size=30),
       bad=st.integers(0, 9))
def test_a_range_is_refused_iff_it_touches_the_damaged_chunk(ranges, bad) -> None:
    """Few ranges (plain ints) and many (numpy) take different paths: both refuse exactly the batches touching
    the damaged chunk, and a refused batch leaves that chunk unchecked (it is refused again)."""
    tokens, verifier = _store(20000, bad)  # 10 chunks (the last 1568 tokens)
    src = np.array([min(a, 20000) for a, _ in ranges], dtype=np.int64)
    cnt = np.array([min(c, 20000 - a) for a, c in zip(src.tolist(), (c for _, c in ranges))], dtype=np.int64)
    touched = {k for a, c in zip(src.tolist(), cnt.tolist()) if c for k in range(a // 2048, (a + c - 1) // 2048 + 1)}
    named = rf"^store: chunk {bad} \(bytes {bad * 4096}\.\.{min(bad * 4096 + 4096, 40000)} of store\.bin\): "
    for _ in range(2):
        if bad in touched:
            with pytest.raises(FormatError, match=named + "crc32c expected [0-9a-f]{8}, got [0-9a-f]{8}"):
                verifier.check_ranges(tokens, src, cnt)
        else:
            verifier.check_ranges(tokens, src, cnt)
            assert verifier.verified == len(touched)


@settings(max_examples=80, deadline=None)
@given(first=st.lists(st.tuples(st.integers(0, 20000), st.integers(0, 12000)), min_size=1, max_size=30),
       second=st.lists(st.tuples(st.integers(0, 20000), st.integers(0, 12000)), min_size=1, max_size=30),
       spans=st.booleans())
def test_lookups_after_a_first_touch_check_every_chunk_of_a_long_range(first, second, spans) -> None:
    """Ranges over many chunks (up to 6 here): once some chunks are verified, the lookups (plain ints, one
    gather, ``check_spans``) still verify every chunk of a later range not verified yet, the middle ones too."""
    tokens, verifier = _store(20000, None)

    def arrays(ranges):
        src = np.array([a for a, _ in ranges], dtype=np.int64)
        return src, np.array([min(c, 20000 - a) for a, c in ranges], dtype=np.int64)

    def chunks(src, cnt):
        return {k for a, c in zip(src.tolist(), cnt.tolist()) if c for k in range(a // 2048, (a + c - 1) // 2048 + 1)}

    a = arrays(first)
    verifier.check_ranges(tokens, *a)
    assert verifier.verified == len(chunks(*a))
    b = arrays(second)
    if spans:
        verifier.check_spans(tokens, b[0].tolist(), b[1].tolist())
    else:
        verifier.check_ranges(tokens, *b)
    assert {c for c in range(verifier.sums.chunks) if verifier.seen[c]} == chunks(*a) | chunks(*b)


@pytest.mark.parametrize("n", [3, 40])
def test_empty_ranges_read_nothing_and_check_nothing(n) -> None:
    tokens, verifier = _store(20000, 3)
    at = np.array([3 * 2048, 4 * 2048, 3 * 2048 + 7] * n, dtype=np.int64)[:n]
    verifier.check_ranges(tokens, at, np.zeros(n, dtype=np.int64))
    verifier.check_ranges(tokens, at, np.zeros(n, dtype=np.int64), longest=0)
    assert verifier.verified == 0
    verifier.check_ranges(tokens, np.r_[at, 0], np.r_[np.zeros(n, dtype=np.int64), 2048], longest=2048)
    assert verifier.verified == 1  # chunk 0 only
    with pytest.raises(FormatError, match="chunk 3 "):
        verifier.check_ranges(tokens, np.r_[at, 2048 * 4 - 1], np.r_[np.zeros(n, dtype=np.int64), 2], longest=2)


def test_a_pickled_verifier_keeps_its_map() -> None:
    tokens, verifier = _store(20000, 3)
    verifier.check(tokens, 0, 4096)
    again = pickle.loads(pickle.dumps(verifier))
    assert again.verified == 1
    again.check_ranges(tokens, np.arange(0, 20 * 300, 300), np.full(20, 10))  # the numpy path reads the map
    assert again.verified == 3 and verifier.verified == 1  # chunks 0-2: the copy's map and counts moved together
    changed = tokens.copy()
    changed[2048 + 1] ^= 1  # chunk 1 changed after it was found intact: not read again (the map says so)
    again.check_ranges(changed, np.arange(0, 20 * 300, 300), np.full(20, 10))
    with pytest.raises(FormatError, match="chunk 3 "):
        again.check_ranges(tokens, np.arange(0, 20 * 100, 100) + 6144, np.full(20, 10))


def test_scalar_check_and_scan() -> None:
    tokens, verifier = _store(20000, 3)
    verifier.check(tokens, 0, 4096 * 3)  # chunks 0-2
    verifier.check(tokens, 10, 10)  # empty range: nothing
    assert verifier.verified == 3
    with pytest.raises(FormatError, match=r"chunk 3 \(bytes 12288\.\.16384 of store\.bin\)"):
        verifier.check(tokens, 4096 * 2, 4096 * 3 + 1)
    bad = verifier.scan(tokens, 0)
    assert [b.chunk for b in bad] == [3] and (bad[0].file_lo, bad[0].file_hi) == (12288, 16384)
    assert verifier.verified == 9
    with pytest.raises(InputError, match="first_byte must be a multiple of 4096, got 2"):
        verifier.scan(tokens[1:], 2)


@settings(max_examples=60, deadline=None)
@given(ranges=st.lists(st.tuples(st.integers(0, 40000), st.integers(0, 2049)), min_size=1, max_size=60),
       bad=st.integers(0, 19), bounded=st.booleans())
def test_ranges_no_longer_than_a_chunk_are_refused_iff_they_touch_the_damaged_chunk(ranges, bad, bounded) -> None:
    """``longest`` (rows of at most a chunk and a token: first and last chunk looked up, one gather) and the general
    lookup agree: a batch is refused exactly when it touches the damaged chunk, else its chunks are verified."""
    tokens, verifier = _store(40000, bad)  # 20 chunks of 2048 tokens (the last 1088)
    src = np.array([a for a, _ in ranges], dtype=np.int64)
    cnt = np.array([min(c, 40000 - a) for a, c in ranges], dtype=np.int64)
    touched = {k for a, c in zip(src.tolist(), cnt.tolist()) if c for k in range(a // 2048, (a + c - 1) // 2048 + 1)}
    longest = 2049 if bounded else None
    for _ in range(2):
        if bad in touched:
            with pytest.raises(FormatError, match=rf"^store: chunk {bad} \(bytes {bad * 4096}\.\."):
                verifier.check_ranges(tokens, src, cnt, longest)
            assert bad not in {c for c in range(20) if verifier.seen[c]}
        else:
            verifier.check_ranges(tokens, src, cnt, longest)
            assert {c for c in range(20) if verifier.seen[c]} == touched


@settings(max_examples=40, deadline=None)
@given(want=st.sets(st.integers(0, 39), min_size=1, max_size=40), bad_sum=st.integers(0, 39),
       bad_id=st.integers(0, 39))
def test_many_chunks_read_from_the_file_at_once_stop_at_the_first_damaged_one(tmp_path_factory, want, bad_sum,
                                                                              bad_id) -> None:
    """Chunks read by pread into one buffer, their sums and ids checked all at once: the first damaged chunk among
    those asked (a wrong sum, or an id outside the vocabulary under an intact sum) raises naming it, the ones before
    it are marked verified, it and the ones after are not."""
    path = tmp_path_factory.mktemp("many") / "store.bin"
    tokens = (np.arange(40 * 2048) % 60000).astype(np.uint16)
    tokens[bad_id * 2048 + 9] = 65000  # summed as it is: an intact chunk holding a bad id
    sums = sums_of_bytes(tokens, 4096)
    tokens[bad_sum * 2048 + 3] ^= 1 << 4  # changed after summing: its sum is wrong
    tokens.tofile(path)
    verifier = ChunkVerifier(sums, "store", "store.bin", 2, local_file=path, id_limit=60000)
    chunks = sorted(want)
    src = np.array(chunks, dtype=np.int64) * 2048 + 100
    problems = [c for c in chunks if c in (bad_sum, bad_id)]
    if not problems:
        verifier.check_ranges(tokens, src, np.full(src.size, 10, dtype=np.int64), 10)
        assert verifier.verified == len(chunks)
        return
    first = problems[0]
    what = "crc32c expected" if first == bad_sum else r"token ids must be in \[0, 60000\), got \[65000\]"
    with pytest.raises(FormatError, match=rf"^store: chunk {first} \(bytes {first * 4096}\.\.{first * 4096 + 4096} of "
                                          rf"store\.bin\).*{what}"):
        verifier.check_ranges(tokens, src, np.full(src.size, 10, dtype=np.int64), 10)
    assert {c for c in range(40) if verifier.seen[c]} == {c for c in chunks if c < first}


@pytest.mark.parametrize("bad", [None, 3, 25])
def test_a_few_ranges_over_many_chunks_verify_every_chunk(bad) -> None:
    """A few ranges (plain ints), one of them over more chunks than are listed one by one: every chunk of them
    is verified, a damaged one among them refused."""
    tokens, verifier = _store(80000, bad)  # 40 chunks
    starts, counts = [100, 2048 * 30 + 7], [2048 * 28, 10]
    want = set(range(0, 29)) | {30}
    if bad is not None and bad in want:
        with pytest.raises(FormatError, match=rf"^store: chunk {bad} "):
            verifier.check_spans(tokens, starts, counts)
        assert {c for c in range(40) if verifier.seen[c]} == set(range(bad))
    else:
        verifier.check_ranges(tokens, np.array(starts), np.array(counts))
        assert {c for c in range(40) if verifier.seen[c]} == want
