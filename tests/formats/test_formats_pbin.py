"""Modalities .pbin: golden 70 bytes (formats.md §7.5), safe unpickling, malformed inputs, old eras."""

from __future__ import annotations

import io
import os
import pickle
import shlex
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import FormatError, InputError, SampleIndexError
from consumer.formats import load_index_pickle, read_pbin, write_pbin

GOLDEN_HEX = (
    "18000000000000000200000001000200030000000400050006000700000008000900000080049517000000000000005d94284b00"
    "4b0886944b084b0a86944b124b068694652e"
)
GOLDEN_DOCS = [[1, 2, 3, 0], [4, 5, 6, 7, 0], [8, 9, 0]]
RAW_INDEX_PICKLE_HEX = "80049517000000000000005d94284b004b0d86944b0e4b1286944b214b0e8694652e"


def golden_data() -> bytes:
    return bytes.fromhex(GOLDEN_HEX)[12:36]


def pbin_bytes(data: bytes, index_pickle: bytes, width: int = 2, data_len: int | None = None) -> bytes:
    return struct.pack("<QI", len(data) if data_len is None else data_len, width) + data + index_pickle


# ----------------------------------------------------------------------------------- golden


def test_golden_write(tmp_path: Path) -> None:
    path = tmp_path / "g.pbin"
    assert write_pbin(path, GOLDEN_DOCS, 2) == 24
    raw = path.read_bytes()
    assert len(raw) == 70
    assert raw.hex() == GOLDEN_HEX


def test_golden_read(tmp_path: Path) -> None:
    path = tmp_path / "g.pbin"
    path.write_bytes(bytes.fromhex(GOLDEN_HEX))
    pb = read_pbin(path)
    assert pb.token_size_in_bytes == 2 and len(pb) == 3
    assert pb.index.dtype == np.int64 and pb.index.tolist() == [[0, 8], [8, 10], [18, 6]]
    assert pb.data.dtype == np.dtype("<u2")
    assert pb.data.tolist() == [1, 2, 3, 0, 4, 5, 6, 7, 0, 8, 9, 0]
    assert [pb[i].tolist() for i in range(3)] == GOLDEN_DOCS
    assert pb[-1].tolist() == [8, 9, 0]
    assert np.shares_memory(pb[1], pb.data) and not pb[1].flags.writeable
    with pytest.raises(SampleIndexError, match="got 3"):
        pb[3]


def test_raw_jsonl_index_pickle_golden() -> None:
    """§7.5 raw JSONL index bytes load through the same safe unpickler."""
    assert load_index_pickle(bytes.fromhex(RAW_INDEX_PICKLE_HEX)).tolist() == [[0, 13], [14, 18], [33, 14]]


@pytest.mark.parametrize("width", [1, 2, 4])
def test_empty_file(tmp_path: Path, width: int) -> None:
    path = tmp_path / "e.pbin"
    assert write_pbin(path, [], width) == 0
    pb = read_pbin(path)
    assert len(pb) == 0 and pb.data.shape == (0,) and pb.index.shape == (0, 2)


def test_empty_documents_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "z.pbin"
    write_pbin(path, [[], [5], []], 1)
    assert [read_pbin(path)[i].tolist() for i in range(3)] == [[], [5], []]


# ----------------------------------------------------------------------------------- malicious pickles


def malicious_pickles(marker: Path) -> dict[str, bytes]:
    cmd = f"touch {shlex.quote(str(marker))}".encode()
    arg = b"X" + struct.pack("<I", len(cmd)) + cmd  # BINUNICODE
    return {
        # GLOBAL 'os system', the argument, TUPLE1, REDUCE, STOP
        "GLOBAL+REDUCE": b"\x80\x02cos\nsystem\n" + arg + b"\x85R.",
        # SHORT_BINUNICODE 'os', SHORT_BINUNICODE 'system', STACK_GLOBAL, ..., REDUCE
        "STACK_GLOBAL+REDUCE": b"\x80\x04\x8c\x02os\x8c\x06system\x93" + arg + b"\x85R.",
        # MARK, argument, INST 'os system'
        "INST": b"(" + arg + b"ios\nsystem\n.",
        # the same call hidden inside a list that otherwise looks like an index
        "inside list": b"\x80\x04]K\x00K\x08\x86acos\nsystem\n" + arg + b"\x85Ra.",
        # EXT1: extension registry lookup
        "EXT1": b"\x80\x02\x82\x01" + arg + b"\x85R.",
        # BINPERSID: persistent id
        "BINPERSID": b"\x80\x02" + arg + b"Q.",
    }


@pytest.mark.parametrize("kind", list(malicious_pickles(Path("x"))))
def test_malicious_index_never_executes(tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "pwned"
    payload = malicious_pickles(marker)[kind]
    path = tmp_path / "evil.pbin"
    path.write_bytes(pbin_bytes(b"", payload))
    with pytest.raises(FormatError) as info:
        read_pbin(path)
    assert "index" in str(info.value)
    with pytest.raises(FormatError):
        load_index_pickle(payload)
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["GLOBAL+REDUCE", "STACK_GLOBAL+REDUCE", "INST", "inside list"])
def test_malicious_payloads_are_well_formed(tmp_path: Path, kind: str) -> None:
    """The payloads really would call os.system: an unpickler that maps it to a recorder records the call."""
    calls: list[str] = []

    class Recorder(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> object:
            assert (module, name) == ("os", "system")
            return calls.append

    marker = tmp_path / "pwned"
    Recorder(io.BytesIO(malicious_pickles(marker)[kind])).load()
    assert calls == [f"touch {shlex.quote(str(marker))}"]
    assert not marker.exists()


def test_malicious_message_names_the_callable(tmp_path: Path) -> None:
    path = tmp_path / "evil.pbin"
    path.write_bytes(pbin_bytes(b"", malicious_pickles(tmp_path / "m")["GLOBAL+REDUCE"]))
    with pytest.raises(FormatError, match=r"os\.system"):
        read_pbin(path)


# ----------------------------------------------------------------------------------- malformed files

DATA = golden_data()


def pk(obj: object) -> bytes:
    return pickle.dumps(obj, protocol=4)


GOOD_INDEX = [(0, 8), (8, 10), (18, 6)]

MALFORMED = [
    ("not a list", pbin_bytes(DATA, pk({"a": 1})), ["expected a list", "dict"]),
    ("tuple of 3", pbin_bytes(DATA, pk([(0, 8, 1)])), ["index[0]", "tuple of 2 ints"]),
    ("float offset", pbin_bytes(DATA, pk([(0.0, 24)])), ["index[0]", "(0.0, 24)"]),
    ("bool length", pbin_bytes(DATA, pk([(0, True)])), ["index[0]", "(0, True)"]),
    ("list entry", pbin_bytes(DATA, pk([[0, 24]])), ["index[0]", "tuple of 2 ints"]),
    ("negative", pbin_bytes(DATA, pk([(0, -8)])), ["non-negative", "(0, -8)"]),
    ("first offset", pbin_bytes(DATA, pk([(2, 22)])), ["index[0] offset", "expected 0", "got 2"]),
    ("gap", pbin_bytes(DATA, pk([(0, 8), (10, 14)])), ["index[1] offset", "expected 8", "got 10"]),
    ("odd length", pbin_bytes(DATA, pk([(0, 3), (3, 21)])), ["multiple of width 2", "got 3"]),
    ("short index", pbin_bytes(DATA, pk([(0, 8), (8, 10)])), ["data_len = 24", "got 18"]),
    ("empty index", pbin_bytes(DATA, pk([])), ["index is empty", "data_len is 24"]),
    ("data_len too big", pbin_bytes(DATA, pk(GOOD_INDEX), data_len=1000), ["data_len", "got 1000"]),
    ("width 3", pbin_bytes(DATA, pk(GOOD_INDEX), width=3), ["token_size_in_bytes", "[1, 2, 4]", "got 3"]),
    ("width 0", pbin_bytes(DATA, pk(GOOD_INDEX), width=0), ["token_size_in_bytes", "got 0"]),
    ("data_len odd", pbin_bytes(DATA, pk(GOOD_INDEX), data_len=23), ["multiple of width 2", "got 23"]),
    ("no index", pbin_bytes(DATA, b""), ["expected a pickle", "got 0 bytes"]),
    ("truncated pickle", pbin_bytes(DATA, pk(GOOD_INDEX)[:-3]), ["not a valid pickle"]),
    ("garbage pickle", pbin_bytes(DATA, b"hello world"), ["not a valid pickle"]),
    ("truncated header", b"\x18\x00\x00", ["truncated header", "at least 12", "got 3"]),
    ("empty file", b"", ["truncated header", "got 0"]),
]


@pytest.mark.parametrize(("name", "raw", "needles"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed(tmp_path: Path, name: str, raw: bytes, needles: list[str]) -> None:
    path = tmp_path / "bad.pbin"
    path.write_bytes(raw)
    with pytest.raises(FormatError) as info:
        read_pbin(path)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_missing_and_special_paths(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        read_pbin(tmp_path / "missing.pbin")
    with pytest.raises(InputError, match="regular file"):
        read_pbin(tmp_path)


# ----------------------------------------------------------------------------------- old eras


def test_era_big_endian_8_byte_header(tmp_path: Path) -> None:
    tokens = np.array([1, 2, 3], dtype=">u4").tobytes()
    raw = struct.pack(">Q", len(tokens)) + tokens + pickle.dumps([(8, 12)], protocol=4)
    path = tmp_path / "old.pbin"
    path.write_bytes(raw)
    with pytest.raises(FormatError, match="before 2024-01-30") as info:
        read_pbin(path)
    assert "big-endian" in str(info.value)


def test_era_big_endian_12_byte_header(tmp_path: Path) -> None:
    tokens = np.array([1, 2, 3], dtype=">u2").tobytes()
    raw = struct.pack(">QI", len(tokens), 2) + tokens + pickle.dumps([(12, 6)], protocol=4)
    path = tmp_path / "old.pbin"
    path.write_bytes(raw)
    with pytest.raises(FormatError, match=r"2024-01-30 \.\. 2024-04-03"):
        read_pbin(path)


def test_era_big_endian_unrecognised_index(tmp_path: Path) -> None:
    raw = struct.pack(">Q", 4) + b"\x00\x00\x00\x07" + b"junk"
    path = tmp_path / "old.pbin"
    path.write_bytes(raw)
    with pytest.raises(FormatError, match="big-endian"):
        read_pbin(path)


def test_era_little_endian_absolute_offsets(tmp_path: Path) -> None:
    raw = pbin_bytes(DATA, pickle.dumps([(12, 8), (20, 10), (30, 6)], protocol=4))
    path = tmp_path / "old.pbin"
    path.write_bytes(raw)
    with pytest.raises(FormatError, match=r"2024-04-03 \.\. 2024-06-25") as info:
        read_pbin(path)
    assert "expected 0, got 12" in str(info.value)


# ----------------------------------------------------------------------------------- writer


@pytest.mark.parametrize(
    ("docs", "width", "needles"),
    [
        ([[256]], 1, ["documents[0]", "[0, 255]", "256"]),
        ([[1], [-1]], 2, ["documents[1]", "-1"]),
        ([[2**32]], 4, ["[0, 4294967295]", "4294967296"]),
        ([[1.0]], 2, ["integers", "float64"]),
        ([[[1]]], 2, ["1-D"]),
    ],
)
def test_writer_refuses_bad_tokens(tmp_path: Path, docs: list, width: int, needles: list[str]) -> None:
    path = tmp_path / "w.pbin"
    with pytest.raises(InputError) as info:
        write_pbin(path, docs, width)
    for needle in needles:
        assert needle in str(info.value)
    assert list(tmp_path.iterdir()) == []  # no temporary file left, nothing at the final path


@pytest.mark.parametrize("width", [3, 8, 0, True])
def test_writer_refuses_bad_width(tmp_path: Path, width: int) -> None:
    with pytest.raises(InputError, match="token_size_in_bytes"):
        write_pbin(tmp_path / "w.pbin", [[1]], width)


def test_writer_failure_keeps_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "keep.pbin"
    write_pbin(path, GOLDEN_DOCS, 2)

    def docs():
        yield [1, 2]
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError):
        write_pbin(path, docs(), 2)
    assert path.read_bytes().hex() == GOLDEN_HEX
    assert os.listdir(tmp_path) == ["keep.pbin"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([1, 2, 4]), st.data())
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, width: int, data: st.DataObject) -> None:
    top = 256**width - 1
    docs = data.draw(st.lists(st.lists(st.integers(0, top), max_size=15), max_size=8))
    path = tmp_path_factory.mktemp("pbin") / "rt.pbin"
    data_len = write_pbin(path, [np.array(d, dtype=np.int64) for d in docs], width)
    pb = read_pbin(path)
    assert data_len == sum(len(d) for d in docs) * width
    assert pb.token_size_in_bytes == width
    assert [pb[i].tolist() for i in range(len(pb))] == docs
