"""Fuzzing every reader this module family owns: only FormatError / InputError may come out.

Valid files are written by the project's writers, then damaged (bytes overwritten, header fields set to
arbitrary 64-bit values, cut, extended) and read back. A read that succeeds must give a store that can be
read whole. Example counts are listed in ``docs/reliability.md`` (``FUZZ_EXAMPLES`` below).
"""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.errors import FormatError, InputError
from consumer.formats.mmidx import IndexedReader, IndexedWriter, read_index, write_fairseq
from consumer.formats.pbin import load_index_pickle, read_pbin, write_pbin
from consumer.util.fileio import load_json_bounded

DOCUMENTED = (FormatError, InputError)
FUZZ_EXAMPLES = {"idx-megatron": 700, "idx-fairseq": 500, "idx+bin": 600, "pbin": 800, "pickle": 1000,
                 "json": 800}
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture,
                                                        HealthCheck.too_slow], "derandomize": False}

DOCS = [np.arange(n, dtype=np.int64) % 250 for n in (0, 3, 7, 1, 12)]

damage = st.fixed_dictionaries({
    "flips": st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 255)), max_size=6),
    "fields": st.lists(st.tuples(st.integers(0, 64), st.integers(0, 2**64 - 1)), max_size=2),
    "cut": st.none() | st.integers(0, 2**20),
    "extra": st.binary(max_size=24),
})


def damaged(raw: bytes, d: dict) -> bytes:
    """``raw`` with 8-byte fields overwritten, bytes flipped, cut and extended as ``d`` says."""
    b = bytearray(raw)
    for offset, value in d["fields"]:
        if len(b) >= 8:
            pos = offset % (len(b) - 7)
            b[pos:pos + 8] = struct.pack("<Q", value)
    for pos, value in d["flips"]:
        if b:
            b[pos % len(b)] = value
    if d["cut"] is not None:
        b = b[: d["cut"] % (len(b) + 1)]
    return bytes(b + d["extra"])


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("fuzz-src")
    with IndexedWriter(root / "meg", np.uint16) as w:
        for doc in DOCS:
            w.add_document(doc)
    with IndexedWriter(root / "mm", np.int32, multimodal=True) as w:
        for i, doc in enumerate(DOCS):
            w.add_document(doc, modes=[i % 3])
    write_fairseq(root / "fs", DOCS, np.uint32)
    write_pbin(root / "p.pbin", DOCS, 2)
    return {name: (root / name).read_bytes() for name in
            ("meg.idx", "meg.bin", "mm.idx", "fs.idx", "fs.bin", "p.pbin")}


def _read_all(reader: IndexedReader) -> int:
    total = sum(int(reader[i].sum()) for i in range(len(reader)))
    for d in range(reader.index.document_count):
        reader.document(d)
    return total


@settings(max_examples=FUZZ_EXAMPLES["idx-megatron"], **SETTINGS)
@given(d=damage, which=st.sampled_from(["meg.idx", "mm.idx"]))
def test_fuzz_megatron_idx(stores, tmp_path: Path, d: dict, which: str) -> None:
    path = tmp_path / "x.idx"
    path.write_bytes(damaged(stores[which], d))
    try:
        index = read_index(path, multimodal=which == "mm.idx")
    except DOCUMENTED:
        return
    assert index.flavour in ("megatron", "fairseq")
    assert int(index.document_indices[-1]) == index.sequence_count


@settings(max_examples=FUZZ_EXAMPLES["idx-fairseq"], **SETTINGS)
@given(d=damage)
def test_fuzz_fairseq_idx(stores, tmp_path: Path, d: dict) -> None:
    path = tmp_path / "x.idx"
    path.write_bytes(damaged(stores["fs.idx"], d))
    try:
        index = read_index(path)
    except DOCUMENTED:
        return
    assert index.bin_size >= 0


@settings(max_examples=FUZZ_EXAMPLES["idx+bin"], **SETTINGS)
@given(d_idx=damage, d_bin=damage, flavour=st.sampled_from(["meg", "fs"]), keep_idx=st.booleans())
def test_fuzz_idx_with_bin(stores, tmp_path: Path, d_idx: dict, d_bin: dict, flavour: str, keep_idx: bool) -> None:
    idx = stores[f"{flavour}.idx"]
    (tmp_path / "x.idx").write_bytes(idx if keep_idx else damaged(idx, d_idx))
    (tmp_path / "x.bin").write_bytes(damaged(stores[f"{flavour}.bin"], d_bin))
    try:
        reader = IndexedReader(tmp_path / "x")
    except DOCUMENTED:
        return
    assert _read_all(reader) >= 0
    out = np.zeros(64, dtype=np.int64)
    try:
        reader.read_into(out, [0, len(reader) - 1], [0, 0], [1, 1], [0, 5])
    except DOCUMENTED:
        pass


@settings(max_examples=FUZZ_EXAMPLES["pbin"], **SETTINGS)
@given(d=damage, region=st.sampled_from(["anywhere", "header", "pickle"]))
def test_fuzz_pbin(stores, tmp_path: Path, d: dict, region: str) -> None:
    raw = stores["p.pbin"]
    if region == "header":
        raw = damaged(raw[:12], {**d, "cut": None, "extra": b""}) + raw[12:]
    elif region == "pickle":
        data_len = struct.unpack_from("<Q", raw)[0]
        raw = raw[: 12 + data_len] + damaged(raw[12 + data_len:], d)
    else:
        raw = damaged(raw, d)
    path = tmp_path / "x.pbin"
    path.write_bytes(raw)
    try:
        pbin = read_pbin(path)
    except DOCUMENTED:
        return
    assert sum(int(pbin[i].size) for i in range(len(pbin))) * pbin.token_size_in_bytes == pbin.data.nbytes


index_pickles = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda obj, p: pickle.dumps(obj, protocol=p),
              st.recursive(st.integers(-(2**70), 2**70) | st.none() | st.text(max_size=4),
                           lambda c: st.lists(c, max_size=4) | st.tuples(c, c), max_leaves=12),
              st.integers(0, 5)),
    st.builds(lambda raw, d: damaged(raw, d),
              st.builds(lambda lens, p: pickle.dumps([(sum(lens[:i]), n) for i, n in enumerate(lens)], protocol=p),
                        st.lists(st.integers(0, 2**40), max_size=20), st.integers(0, 5)),
              damage),
)


@settings(max_examples=FUZZ_EXAMPLES["pickle"], **SETTINGS)
@given(data=index_pickles)
def test_fuzz_index_pickle(data: bytes) -> None:
    try:
        index = load_index_pickle(data)
    except DOCUMENTED:
        return
    assert index.dtype == np.int64 and index.ndim == 2 and index.shape[1] == 2 and (index >= 0).all()


SIDECAR = json.dumps({"format": "megatron", "n_bytes": 2, "classes": ["cat", "dog"],
                      "class_to_id": {"cat": 0, "dog": 1}, "headers": ["ASCII text", "data"],
                      "nested": {"a": [1, [2, [3, {"b": '[[{\\"}'}]]]}}, indent=1)

json_texts = st.one_of(
    st.text(max_size=80),
    st.builds(lambda d: damaged(SIDECAR.encode(), d), damage),
    st.builds(lambda n, o: o * n + "1" + {"[": "]", "{": "}"}.get(o, "") * n, st.integers(0, 400),
              st.sampled_from(["[", "{", "[{"])),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                 lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                 max_leaves=40).map(json.dumps),
)


@settings(max_examples=FUZZ_EXAMPLES["json"], **SETTINGS)
@given(text=json_texts)
def test_fuzz_bounded_json(text: str | bytes) -> None:
    try:
        load_json_bounded(text, "sidecar.json")
    except FormatError as e:
        assert str(e).startswith("sidecar.json: ")


def test_fuzz_total_is_several_thousand() -> None:
    assert sum(FUZZ_EXAMPLES.values()) >= 4000
