"""MMIDIDX .idx/.bin: golden vectors (formats.md §7.1), malformed inputs, merge, round trips."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import FormatError, InputError, SampleIndexError
from consumer.formats import (
    FAIRSEQ,
    MEGATRON,
    IndexedReader,
    IndexedWriter,
    merge,
    mmidx,
    optimal_dtype,
    read_index,
    write_fairseq,
)

DOCS = [[1, 2, 3], [4, 5, 6, 7], [8, 9]]
BIN_HEX = "010002000300040005000600070008000900"
IDX_HEX = (
    "4d4d4944494458000001000000000000000803000000000000000400000000000000030000000400000002000000"
    "000000000000000006000000000000000e00000000000000000000000000000001000000000000000200000000000000"
    "0300000000000000"
)
IDX_DOC_HEX = (
    "4d4d4944494458000001000000000000000803000000000000000300000000000000030000000400000002000000"
    "000000000000000006000000000000000e0000000000000000000000000000000200000000000000"
    "0300000000000000"
)
FAIRSEQ_HEX = (
    "4d4d494449445800000100000000000000080300000000000000030000000400000002000000000000000000000006"
    "000000000000000e00000000000000"
)


def write_golden(prefix: Path, idx_hex: str = IDX_HEX, bin_hex: str = BIN_HEX) -> str:
    Path(f"{prefix}.idx").write_bytes(bytes.fromhex(idx_hex))
    Path(f"{prefix}.bin").write_bytes(bytes.fromhex(bin_hex))
    return str(prefix)


def items(reader: IndexedReader) -> list[list[int]]:
    return [x.tolist() for x in reader]


# ----------------------------------------------------------------------------------- golden vectors


def test_golden_add_item_end_document(tmp_path: Path) -> None:
    prefix = str(tmp_path / "ds")
    with IndexedWriter(prefix, np.uint16) as w:
        for doc in DOCS:
            w.add_item(doc)
            w.end_document()
    assert Path(prefix + ".bin").read_bytes().hex() == BIN_HEX
    assert Path(prefix + ".idx").read_bytes().hex() == IDX_HEX
    assert len(Path(prefix + ".idx").read_bytes()) == 102
    r = IndexedReader(prefix)
    assert r.flavour == MEGATRON and r.dtype == np.uint16 and len(r) == 3
    assert items(r) == DOCS
    assert r.get(1, offset=1, length=2).tolist() == [5, 6]
    assert r.lengths.tolist() == [3, 4, 2]
    assert r.pointers.tolist() == [0, 6, 14]
    assert r.document_indices.tolist() == [0, 1, 2, 3]
    assert r.modes is None


def test_golden_add_document_one_sequence_each(tmp_path: Path) -> None:
    prefix = str(tmp_path / "ds")
    with IndexedWriter(prefix, np.uint16) as w:
        for doc in DOCS:
            w.add_document(doc)
    assert Path(prefix + ".idx").read_bytes().hex() == IDX_HEX


def test_golden_add_document_with_lengths(tmp_path: Path) -> None:
    prefix = str(tmp_path / "ds")
    with IndexedWriter(prefix, np.uint16) as w:
        w.add_document([1, 2, 3, 4, 5, 6, 7], lengths=[3, 4])
        w.add_document([8, 9], [2])
    assert Path(prefix + ".bin").read_bytes().hex() == BIN_HEX
    assert Path(prefix + ".idx").read_bytes().hex() == IDX_DOC_HEX
    r = IndexedReader(prefix)
    assert r.document_indices.tolist() == [0, 2, 3]
    assert [[s.tolist() for s in r.document(d)] for d in range(2)] == [[[1, 2, 3], [4, 5, 6, 7]], [[8, 9]]]


def test_golden_multimodal(tmp_path: Path) -> None:
    prefix = str(tmp_path / "mm")
    with IndexedWriter(prefix, np.uint16, multimodal=True) as w:
        for mode, doc in enumerate(DOCS):
            w.add_item(doc, mode=mode)
            w.end_document()
    raw = Path(prefix + ".idx").read_bytes()
    assert len(raw) == 105 and raw.hex() == IDX_HEX + "000102"
    r = IndexedReader(prefix, multimodal=True)
    assert r.modes is not None and r.modes.tolist() == [0, 1, 2]
    assert items(r) == DOCS
    with pytest.raises(FormatError, match="multimodal=True"):
        IndexedReader(prefix)  # 105 bytes fits only the multimodal layout
    with pytest.raises(FormatError, match="multimodal=False"):
        IndexedReader(write_golden(tmp_path / "plain"), multimodal=True)


def test_golden_add_index_twice(tmp_path: Path) -> None:
    src = write_golden(tmp_path / "src")
    out = str(tmp_path / "out")
    with IndexedWriter(out, np.uint16) as w:
        w.add_index(src)
        w.add_index(src)
    r = IndexedReader(out)
    assert r.lengths.tolist() == [3, 4, 2, 3, 4, 2]
    assert r.pointers.tolist() == [0, 6, 14, 18, 24, 32]
    assert r.document_indices.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert items(r) == DOCS + DOCS


def test_golden_fairseq(tmp_path: Path) -> None:
    prefix = str(tmp_path / "fs")
    write_fairseq(prefix, DOCS, np.uint16)
    assert Path(prefix + ".idx").read_bytes().hex() == FAIRSEQ_HEX
    assert Path(prefix + ".bin").read_bytes().hex() == BIN_HEX
    r = IndexedReader(prefix)
    assert r.flavour == FAIRSEQ and len(r) == 3
    assert r.document_indices.tolist() == [0, 1, 2, 3]  # synthesised
    assert items(r) == DOCS


def test_both_flavours_read_identical_tokens(tmp_path: Path) -> None:
    meg = IndexedReader(write_golden(tmp_path / "m"))
    fai = IndexedReader(write_golden(tmp_path / "f", FAIRSEQ_HEX))
    assert (meg.flavour, fai.flavour) == (MEGATRON, FAIRSEQ)
    assert items(meg) == items(fai)
    assert np.array_equal(meg.tokens, fai.tokens)


@pytest.mark.parametrize(
    ("vocab_size", "expected"),
    [(None, np.int32), (65499, np.uint16), (65500, np.int32), (65536, np.int32), (256, np.uint16)],
)
def test_optimal_dtype(vocab_size: int | None, expected: type) -> None:
    assert optimal_dtype(vocab_size) == np.dtype(expected)


def test_fairseq_uint32_code_9(tmp_path: Path) -> None:
    prefix = str(tmp_path / "fs32")
    write_fairseq(prefix, [[70000, 1], [2**32 - 1]], np.uint32)
    assert Path(prefix + ".idx").read_bytes()[17] == 9
    r = IndexedReader(prefix)
    assert r.dtype == np.uint32 and items(r) == [[70000, 1], [2**32 - 1]]


# ----------------------------------------------------------------------------------- malformed inputs


def patch(offset: int, data: bytes) -> Callable[[bytearray], bytearray]:
    def apply(b: bytearray) -> bytearray:
        b[offset : offset + len(data)] = data
        return b

    return apply


def doc_idx_patch(values: list[int]) -> Callable[[bytearray], bytearray]:
    return patch(34 + 12 * 3, struct.pack("<4q", *values))


IDX_CASES = [
    ("wrong magic", patch(0, b"XMIDIDX\x00\x00"), ["magic", "MMIDIDX", "XMIDIDX"]),
    ("tntidx magic", patch(0, b"TNTIDX\x00\x00\x01"), ["magic", "TNTIDX"]),
    ("version 2", patch(9, struct.pack("<Q", 2)), ["version", "expected 1", "got 2"]),
    ("code 6", patch(17, b"\x06"), ["dtype code", "got 6", "[1, 2, 3, 4, 5, 8]", "float"]),
    ("code 7", patch(17, b"\x07"), ["dtype code", "got 7", "float"]),
    ("code 9 megatron", patch(17, b"\x09"), ["dtype code", "got 9", "[1, 2, 3, 4, 5, 8]", "fairseq"]),
    ("code 99", patch(17, b"\x63"), ["dtype code", "got 99", "[1, 2, 3, 4, 5, 8]"]),
    ("truncated idx", lambda b: b[:-8], ["truncated", "expected 102", "got 94", "62"]),
    ("trailing idx byte", lambda b: b + b"\x00", ["trailing", "expected 102", "got 103"]),
    ("neither flavour (M too big)", patch(26, struct.pack("<Q", 5)), ["expected 110", "62", "got 102", "M=5"]),
    ("N garbage", patch(18, struct.pack("<Q", 2**40)), ["got 102", "N=1099511627776"]),
    ("header only", lambda b: b[:20], ["truncated", "26", "got 20"]),
    ("empty idx", lambda b: b[:0], ["truncated", "got 0"]),
    ("doc_idx start", doc_idx_patch([1, 1, 2, 3]), ["document_indices[0]", "expected 0", "got 1"]),
    ("doc_idx decreasing", doc_idx_patch([0, 2, 1, 3]), ["non-decreasing", "document_indices[2]", ">= 2", "got 1"]),
    ("doc_idx end", doc_idx_patch([0, 1, 2, 2]), ["document_indices[-1]", "expected N = 3", "got 2"]),
    ("pointer", patch(34 + 12 + 8, struct.pack("<q", 7)), ["pointers[1]", "expected 6", "got 7"]),
    ("negative length", patch(34, struct.pack("<i", -3)), ["lengths[0]", "expected >= 0", "got -3"]),
]


FAIRSEQ_CASES = [
    ("fairseq code 6", patch(17, b"\x06"), ["got 6", "[1, 2, 3, 4, 5, 8, 9, 10]", "float"]),
    ("fairseq code 11", patch(17, b"\x0b"), ["got 11", "[1, 2, 3, 4, 5, 8, 9, 10]"]),
    ("fairseq pointer", patch(26 + 12 + 16, struct.pack("<q", 13)), ["pointers[2]", "expected 14", "got 13"]),
    ("fairseq truncated", lambda b: b[:-1], ["truncated", "got 61"]),
]


MALFORMED = [(name, IDX_HEX, mutate, needles) for name, mutate, needles in IDX_CASES] + \
    [(name, FAIRSEQ_HEX, mutate, needles) for name, mutate, needles in FAIRSEQ_CASES]


@pytest.mark.parametrize(("name", "golden", "mutate", "needles"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_idx(
    tmp_path: Path, name: str, golden: str, mutate: Callable[[bytearray], bytearray], needles: list[str]
) -> None:
    prefix = write_golden(tmp_path / "bad")
    Path(prefix + ".idx").write_bytes(bytes(mutate(bytearray(bytes.fromhex(golden)))))
    with pytest.raises(FormatError) as info:
        IndexedReader(prefix)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


@pytest.mark.parametrize(
    ("bin_hex", "needles"),
    [
        (BIN_HEX[:-2], ["truncated .bin", "expected 18", "got 17"]),
        (BIN_HEX + "00", ["trailing", "expected 18", "got 19"]),
        (BIN_HEX + "0000", ["trailing", "expected 18", "got 20"]),
        ("", ["truncated .bin", "expected 18", "got 0"]),
    ],
    ids=["truncated bin", "one trailing byte", "trailing token", "empty bin"],
)
@pytest.mark.parametrize("idx_hex", [IDX_HEX, FAIRSEQ_HEX], ids=["megatron", "fairseq"])
def test_malformed_bin(tmp_path: Path, idx_hex: str, bin_hex: str, needles: list[str]) -> None:
    prefix = write_golden(tmp_path / "bad", idx_hex, bin_hex)
    with pytest.raises(FormatError) as info:
        IndexedReader(prefix)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_wrong_dtype_for_data_is_caught_at_open(tmp_path: Path) -> None:
    """formats.md §7.6: dtype byte patched 8 -> 4 reads garbage in Megatron; we refuse at open.

    The pointers (byte offsets computed with the real itemsize) already disagree with the new itemsize;
    with consistent pointers the .bin size check would catch it (see test_malformed_bin).
    """
    raw = bytearray(bytes.fromhex(IDX_HEX))
    raw[17] = 4
    prefix = write_golden(tmp_path / "bad")
    Path(prefix + ".idx").write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=r"pointers\[1\]: expected 12 .*itemsize 4.*got 6"):
        IndexedReader(prefix)


def test_missing_and_special_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        IndexedReader(tmp_path / "nothing")
    (tmp_path / "dir.idx").mkdir()
    with pytest.raises(InputError, match="regular file"):
        IndexedReader(tmp_path / "dir")
    prefix = write_golden(tmp_path / "nobin")
    os.unlink(prefix + ".bin")
    with pytest.raises(InputError, match="not found"):
        IndexedReader(prefix)


def test_read_index_alone(tmp_path: Path) -> None:
    prefix = write_golden(tmp_path / "g")
    index = read_index(prefix + ".idx")
    assert (index.flavour, index.dtype_code, index.sequence_count, index.document_count, index.bin_size) == (
        MEGATRON,
        8,
        3,
        3,
        18,
    )


# ----------------------------------------------------------------------------------- empty datasets


@pytest.mark.parametrize("flavour", [MEGATRON, FAIRSEQ])
def test_empty_dataset(tmp_path: Path, flavour: str) -> None:
    prefix = str(tmp_path / "empty")
    with IndexedWriter(prefix, np.int32, flavour=flavour):
        pass
    assert os.path.getsize(prefix + ".bin") == 0
    assert os.path.getsize(prefix + ".idx") == (42 if flavour == MEGATRON else 26)
    r = IndexedReader(prefix)
    assert len(r) == 0 and r.flavour == flavour
    assert r.document_indices.tolist() == [0]
    assert r.tokens.shape == (0,)
    r.read_into(np.zeros(0, np.int64), [], [], [], [])
    with pytest.raises(SampleIndexError):
        r.get(0)


def test_empty_sequences_in_nonempty_dataset(tmp_path: Path) -> None:
    prefix = str(tmp_path / "gaps")
    with IndexedWriter(prefix, np.uint8) as w:
        w.add_document([])
        w.add_document([7, 8])
        w.add_document(np.array([], dtype=np.int64))
        w.end_document()  # an empty document (repeated doc_idx value)
    r = IndexedReader(prefix)
    assert items(r) == [[], [7, 8], []]
    assert r.document_indices.tolist() == [0, 1, 2, 3, 3]
    assert r.document(3) == []


def test_only_empty_sequences(tmp_path: Path) -> None:
    """N > 0 but an empty .bin: must not try to mmap the empty file."""
    prefix = str(tmp_path / "zeros")
    with IndexedWriter(prefix, np.uint16) as w:
        w.add_document([])
        w.add_document([])
    r = IndexedReader(prefix)
    assert items(r) == [[], []]


# ----------------------------------------------------------------------------------- access


def test_get_is_zero_copy_and_read_only(tmp_path: Path) -> None:
    r = IndexedReader(write_golden(tmp_path / "g"))
    view = r.get(1)
    assert np.shares_memory(view, r.tokens)
    assert not view.flags.writeable
    assert r.get(2, offset=2).tolist() == []
    assert r[0].tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    ("args", "error", "needles"),
    [
        ((3,), SampleIndexError, ["0 <= i < 3", "got 3"]),
        ((-1,), SampleIndexError, ["got -1"]),
        ((0, 4), InputError, ["offset=4", "<= 3"]),
        ((0, 1, 3), InputError, ["offset=1", "length=3"]),
        ((0, -1, 1), InputError, ["offset=-1"]),
        (("0",), InputError, ["must be an int"]),
    ],
)
def test_get_errors(tmp_path: Path, args: tuple, error: type, needles: list[str]) -> None:
    r = IndexedReader(write_golden(tmp_path / "g"))
    with pytest.raises(error) as info:
        r.get(*args)
    for needle in needles:
        assert needle in str(info.value)


def reference_fill(r: IndexedReader, shape: tuple[int, int], ranges: list[tuple[int, int, int, int]]) -> np.ndarray:
    out = np.full(shape, -1, dtype=np.int64).reshape(-1)
    for seq, off, cnt, dst in ranges:
        out[dst : dst + cnt] = r.get(seq)[off : off + cnt]
    return out.reshape(shape)


@pytest.mark.parametrize("copy", [mmidx._copy_ranges_loop, mmidx._copy_ranges_gather, None])
def test_read_into_fills_rows(tmp_path: Path, copy: Callable | None) -> None:
    rng = np.random.default_rng(0)
    prefix = str(tmp_path / "rows")
    docs = [rng.integers(0, 60000, size=int(n)) for n in rng.integers(0, 300, size=40)]
    with IndexedWriter(prefix, np.uint16) as w:
        for doc in docs:
            w.add_document(doc)
    r = IndexedReader(prefix)
    batch, width = 8, 64
    ranges = []
    for b in range(batch):  # each row: up to 3 pieces, like a sample crossing documents
        col = 0
        while col < width:
            seq = int(rng.integers(0, len(docs)))
            size = int(r.lengths[seq])
            off = int(rng.integers(0, size + 1))
            cnt = min(size - off, width - col, int(rng.integers(0, 40)))
            ranges.append((seq, off, cnt, b * width + col))
            col += max(cnt, 1)
            if len(ranges) % 3 == 0:
                break
    out = np.full((batch, width), -1, dtype=np.int64)
    seq, off, cnt, dst = (np.array(c, dtype=np.int64) for c in zip(*ranges))
    if copy is None:
        r.read_into(out, seq, off, cnt, dst)
    else:
        copy(out.reshape(-1), r.tokens, r.pointers[seq] // 2 + off, cnt, dst)
    assert np.array_equal(out, reference_fill(r, (batch, width), ranges))


def test_read_into_long_ranges_auto_path(tmp_path: Path) -> None:
    prefix = str(tmp_path / "long")
    docs = [np.arange(i * 1000, i * 1000 + 500) for i in range(4)]
    with IndexedWriter(prefix, np.int32) as w:
        for doc in docs:
            w.add_document(doc)
    r = IndexedReader(prefix)
    out = np.zeros((4, 200), dtype=np.int64)
    r.read_into(out, [3, 2, 1, 0], [0, 100, 200, 300], [200] * 4, [0, 200, 400, 600])
    assert np.array_equal(out, np.stack([docs[3][:200], docs[2][100:300], docs[1][200:400], docs[0][300:500]]))


@pytest.mark.parametrize(
    ("out", "args", "error", "needles"),
    [
        (np.zeros(10, np.int64), ([3], [0], [1], [0]), SampleIndexError, ["seq_ids[0]", "got 3"]),
        (np.zeros(10, np.int64), ([1], [2], [3], [0]), InputError, ["offset=2", "length=3", "<= 4"]),
        (np.zeros(10, np.int64), ([1], [0], [4], [7]), InputError, ["dest[0]", "out.size = 10", "dest=7"]),
        (np.zeros(10, np.int64), ([1], [0], [-1], [0]), InputError, ["length=-1"]),
        (np.zeros(10, np.int64), ([1, 2], [0], [1], [0]), InputError, ["same length"]),
        (np.zeros(10, np.float32), ([1], [0], [1], [0]), InputError, ["out dtype", "float32"]),
        (np.zeros(10, np.int8), ([1], [0], [1], [0]), InputError, ["out dtype", "int8"]),
        (np.zeros((10, 2), np.int64)[:, 0], ([1], [0], [1], [0]), InputError, ["C-contiguous"]),
    ],
)
def test_read_into_errors(tmp_path: Path, out: np.ndarray, args: tuple, error: type, needles: list[str]) -> None:
    r = IndexedReader(write_golden(tmp_path / "g"))
    before = out.copy()
    with pytest.raises(error) as info:
        r.read_into(out, *args)
    for needle in needles:
        assert needle in str(info.value)
    assert np.array_equal(out, before)


# ----------------------------------------------------------------------------------- writer


def test_writer_is_atomic(tmp_path: Path) -> None:
    prefix = str(tmp_path / "ds")
    w = IndexedWriter(prefix, np.uint16)
    w.add_document([1, 2, 3])
    assert not os.path.exists(prefix + ".bin") and not os.path.exists(prefix + ".idx")
    assert len(list(tmp_path.iterdir())) == 1  # only the temporary .bin
    w.finalize()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.bin", "ds.idx"]
    with pytest.raises(InputError, match="finalized"):
        w.add_document([4])


def test_writer_exception_removes_temp_files(tmp_path: Path) -> None:
    prefix = str(tmp_path / "ds")
    with pytest.raises(RuntimeError):
        with IndexedWriter(prefix, np.uint16) as w:
            w.add_document([1, 2, 3])
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_writer_failure_keeps_previous_dataset(tmp_path: Path) -> None:
    prefix = write_golden(tmp_path / "ds")
    with pytest.raises(InputError):
        with IndexedWriter(prefix, np.uint16) as w:
            w.add_document([1])
            w.add_document([70000])  # out of range for uint16
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.bin", "ds.idx"]
    assert items(IndexedReader(prefix)) == DOCS


def test_writer_overwrites_existing(tmp_path: Path) -> None:
    prefix = write_golden(tmp_path / "ds")
    with IndexedWriter(prefix, np.uint8) as w:
        w.add_document([42])
    assert items(IndexedReader(prefix)) == [[42]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.bin", "ds.idx"]


def test_finalize_refuses_open_document(tmp_path: Path) -> None:
    prefix = str(tmp_path / "ds")
    w = IndexedWriter(prefix, np.uint16)
    w.add_item([1, 2])
    with pytest.raises(InputError, match="end_document"):
        w.finalize()
    w.end_document()
    w.finalize()
    assert items(IndexedReader(prefix)) == [[1, 2]]


@pytest.mark.parametrize(
    ("dtype", "tokens", "needles"),
    [
        (np.uint16, [1, 70000], ["uint16", "[0, 65535]", "70000"]),
        (np.uint8, [-1], ["uint8", "-1"]),
        (np.int32, [2**31], ["int32", "2147483648"]),
        (np.uint16, [1.5], ["integers", "float64"]),
        (np.uint16, [[1, 2]], ["1-D"]),
    ],
)
def test_writer_refuses_bad_tokens(tmp_path: Path, dtype: type, tokens: list, needles: list[str]) -> None:
    with IndexedWriter(tmp_path / "ds", dtype) as w:
        with pytest.raises(InputError) as info:
            w.add_document(tokens)
        for needle in needles:
            assert needle in str(info.value)


def test_writer_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="float32"):
        IndexedWriter(tmp_path / "a", np.float32)
    with pytest.raises(InputError, match="uint32"):
        IndexedWriter(tmp_path / "a", np.uint32)  # no Megatron code
    with pytest.raises(InputError, match="flavour"):
        IndexedWriter(tmp_path / "a", np.uint16, flavour="lazy")
    with pytest.raises(InputError, match="directory does not exist"):
        IndexedWriter(tmp_path / "missing" / "a", np.uint16)
    with IndexedWriter(tmp_path / "a", np.uint16) as w:
        with pytest.raises(InputError, match=r"sum to len\(tokens\) = 3, got sum 4"):
            w.add_document([1, 2, 3], lengths=[2, 2])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "a.idx"]


def test_add_index_dtype_mismatch(tmp_path: Path) -> None:
    src = write_golden(tmp_path / "src")  # uint16
    with IndexedWriter(tmp_path / "out", np.int32) as w:
        with pytest.raises(FormatError) as info:
            w.add_index(src)
    assert "int32" in str(info.value) and "uint16" in str(info.value)


# ----------------------------------------------------------------------------------- merge


def write_docs(prefix: Path, docs: list[list[list[int]]], dtype: type) -> str:
    with IndexedWriter(prefix, dtype) as w:
        for doc in docs:
            flat = [t for seq in doc for t in seq]
            w.add_document(np.array(flat, dtype=np.int64), lengths=[len(s) for s in doc])
    return str(prefix)


def test_merge_equals_writing_union(tmp_path: Path) -> None:
    a = [[[1, 2], [3]], [[4, 5, 6]], [[]]]
    b = [[[7]], [[8, 9], [10, 11], [12]]]
    pa, pb = write_docs(tmp_path / "a", a, np.int32), write_docs(tmp_path / "b", b, np.int32)
    union = write_docs(tmp_path / "u", a + b, np.int32)
    merge([pa, pb], tmp_path / "m")
    for ext in (".idx", ".bin"):
        assert Path(str(tmp_path / "m") + ext).read_bytes() == Path(union + ext).read_bytes()


def test_merge_fairseq_into_megatron(tmp_path: Path) -> None:
    fs = str(tmp_path / "fs")
    write_fairseq(fs, DOCS, np.uint16)
    merge([fs, write_golden(tmp_path / "meg")], tmp_path / "m")
    r = IndexedReader(tmp_path / "m")
    assert r.flavour == MEGATRON and items(r) == DOCS + DOCS
    assert r.document_indices.tolist() == list(range(7))


def test_merge_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="non-empty list"):
        merge([], tmp_path / "m")
    with pytest.raises(InputError, match="non-empty list"):
        merge(str(tmp_path / "x"), tmp_path / "m")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------- round trips

DTYPE_RANGES = {np.uint8: (0, 255), np.uint16: (0, 65535), np.int32: (-(2**31), 2**31 - 1)}


@st.composite
def documents(draw: st.DrawFn) -> tuple[type, list[list[list[int]]]]:
    dtype = draw(st.sampled_from(sorted(DTYPE_RANGES, key=str)))
    lo, hi = DTYPE_RANGES[dtype]
    seq = st.lists(st.integers(lo, hi), max_size=12)
    docs = draw(st.lists(st.lists(seq, max_size=3), max_size=6))
    return dtype, docs


@settings(max_examples=60, deadline=None)
@given(documents())
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, case: tuple[type, list[list[list[int]]]]) -> None:
    dtype, docs = case
    base = tmp_path_factory.mktemp("rt")
    r = IndexedReader(write_docs(base / "ds", docs, dtype))
    assert r.dtype == np.dtype(dtype)
    assert items(r) == [seq for doc in docs for seq in doc]
    assert np.diff(r.document_indices).tolist() == [len(doc) for doc in docs]
    fs = str(base / "fs")
    write_fairseq(fs, [seq for doc in docs for seq in doc], dtype)
    f = IndexedReader(fs)
    assert f.flavour == FAIRSEQ and items(f) == items(r)


def test_multimodal_modes_validated_before_writing(tmp_path: Path) -> None:
    prefix = str(tmp_path / "mm")
    with IndexedWriter(prefix, np.uint8, multimodal=True) as w:
        with pytest.raises(InputError, match="int8"):
            w.add_item([1], mode=200)
        with pytest.raises(InputError, match="one per sequence"):
            w.add_document([1, 2], lengths=[1, 1], modes=[0])
        w.add_document([1, 2], lengths=[1, 1], modes=[3, -4])
    r = IndexedReader(prefix, multimodal=True)
    assert items(r) == [[1], [2]] and r.modes is not None and r.modes.tolist() == [3, -4]


@settings(max_examples=200, deadline=None)
@given(cnt=st.lists(st.integers(0, 9), min_size=1, max_size=40), gaps=st.data(), sort_dst=st.booleans())
def test_every_copy_strategy_copies_the_same(cnt, gaps, sort_dst):
    """The loop, the gather and the masked copy (ranges in order, dense) give the same output."""
    n = len(cnt)
    c = np.array(cnt, dtype=np.int64)
    src_gap = np.array(gaps.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.int64)
    dst_gap = np.array(gaps.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.int64)
    src = np.cumsum(src_gap + c) - c
    dst = np.cumsum(dst_gap + c) - c
    if not sort_dst:  # another order on the destination side: not for the masked copy
        perm = np.random.default_rng(n).permutation(n)
        dst = (np.cumsum((dst_gap + c)[perm]) - c[perm])[np.argsort(perm)]
    tokens = np.arange(1000, 1000 + int(src[-1] + c[-1]) + 1, dtype=np.int64)
    size = int((dst + c).max()) + 1
    want = np.full(size, -1, dtype=np.int64)
    mmidx._copy_ranges_loop(want, tokens, src, c, dst)
    for copy in (mmidx._copy_ranges_gather, mmidx.copy_ranges):
        got = np.full(size, -1, dtype=np.int64)
        copy(got, tokens, src, c, dst)
        assert got.tolist() == want.tolist()
    if sort_dst and int(c.sum()):
        got = np.full(size, -1, dtype=np.int64)
        mmidx._copy_ranges_masked(got, tokens, src, c, dst)
        assert got.tolist() == want.tolist()
