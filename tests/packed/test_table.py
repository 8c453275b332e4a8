"""The packed store's file table (format 2): mapped in place, aligned, checked; format 1 read; store order kept."""

from __future__ import annotations

import json
import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, open_packed
from consumer.errors import FormatError
from consumer.packed.table import TABLE_KEYS, read_table, write_table

from ..conftest import write_corpus
from ..helpers.stores import as_format_1_table
from ..records.writers import write_jsonl, write_lines, write_parquet, write_tar

_paths = st.lists(st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=1,
                          max_size=12), min_size=1, max_size=40)


def _side(n: int, classes: int = 3, headers: int = 2) -> dict:
    return {"documents": n, "classes": [f"c{i}" for i in range(classes)], "headers": [f"h{i}" for i in range(headers)]}


def _write(tmp_path: Path, paths: list[str], seed: int = 0) -> tuple[Path, dict]:
    rng = np.random.default_rng(seed)
    n = len(paths)
    cols = {"doc_class": rng.integers(0, 3, n), "doc_size": rng.integers(0, 1 << 40, n),
            "doc_header": rng.integers(0, 2, n)}
    path = tmp_path / f"t{seed}.consumer.npz"
    if path.exists():
        path.unlink()
    write_table(path, paths, cols["doc_class"], cols["doc_size"], cols["doc_header"])
    return path, cols


def _data_offsets(path: Path) -> dict[str, int]:
    """Where each member's .npy data starts in the file (from the local headers and the .npy headers)."""
    out = {}
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            at = info.header_offset
            name_len, extra_len = struct.unpack_from("<HH", raw, at + 26)
            lo = at + 30 + name_len + extra_len
            header_len = struct.unpack_from("<H", raw, lo + 8)[0]
            out[info.filename[:-4]] = lo + 10 + header_len
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(paths=_paths, seed=st.integers(0, 3))
def test_the_table_reads_back_as_written_as_views_of_one_map(tmp_path, paths, seed):
    path, cols = _write(tmp_path, paths, seed)
    listed, doc_class, doc_size, doc_header = read_table(path, _side(len(paths)))
    assert list(listed) == paths
    for got, key in ((doc_class, "doc_class"), (doc_size, "doc_size"), (doc_header, "doc_header")):
        np.testing.assert_array_equal(got, cols[key])
        assert not got.flags.writeable  # a view of the read-only map, not a copy in the heap
    with np.load(path, allow_pickle=False) as z:  # any numpy reads it as a plain .npz
        assert sorted(z.files) == sorted(TABLE_KEYS)
        np.testing.assert_array_equal(z["doc_size"], cols["doc_size"])
    for key, at in _data_offsets(path).items():
        assert at % 64 == 0, key


def test_each_member_is_stored_uncompressed(tmp_path):
    path, _ = _write(tmp_path, [f"/data/f{i}" for i in range(1000)])
    with zipfile.ZipFile(path) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
        assert [i.filename for i in z.infolist()] == [k + ".npy" for k in TABLE_KEYS]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_flipped_bit_anywhere_in_the_table_is_refused_or_changes_nothing(tmp_path, data):
    """Bits of the ZIP headers that no reader uses (times, attributes, the alignment's zero bytes) change nothing;
    every other flip is a FormatError at open: never a different path, class, size or header served."""
    paths = [f"/corpus/class{i % 3}/file_{i:04d}.bin" for i in range(60)]
    path, cols = _write(tmp_path, paths)
    raw = bytearray(path.read_bytes())
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(raw))
    try:
        listed, doc_class, doc_size, doc_header = read_table(path, _side(len(paths)))
    except FormatError:
        return
    assert list(listed) == paths
    for got, key in ((doc_class, "doc_class"), (doc_size, "doc_size"), (doc_header, "doc_header")):
        np.testing.assert_array_equal(got, cols[key])


@pytest.mark.parametrize(("damage", "message"), [
    ("truncate", "file table"),
    ("wrong dtype", r"file table member 'doc_size': expected a 1-D array of <i8, got shape \(5,\) of <i4"),
    ("short column", r"file table 'doc_class': expected 5 integers"),
    ("class out of range", r"file table doc_class\[2\] \('c'\): expected an index in \[0, 3\), got 7"),
    ("negative size", r"file table doc_size\[1\] \('b'\): expected >= 0, got -1"),
    ("empty path", "expected 6 increasing offsets"),
    ("missing member", r"missing \['doc_header'\]"),
])
def test_malformed_tables_are_refused_naming_what_is_wrong(tmp_path, damage, message):
    path = tmp_path / "t.consumer.npz"
    paths = ["a", "b", "c", "d", "e"]
    cols = {"doc_class": np.array([0, 1, 2, 0, 1]), "doc_size": np.array([1, 2, 3, 4, 5]),
            "doc_header": np.zeros(5, dtype=np.int64)}
    if damage == "truncate":
        write_table(path, paths, **cols)
        path.write_bytes(path.read_bytes()[:300])
    elif damage == "empty path":
        write_table(path, ["a", "", "c", "d", "e"], **cols)
    elif damage == "class out of range":
        write_table(path, paths, np.array([0, 1, 7, 0, 1]), cols["doc_size"], cols["doc_header"])
    elif damage == "negative size":
        write_table(path, paths, cols["doc_class"], np.array([1, -1, 3, 4, 5]), cols["doc_header"])
    else:
        write_table(path, paths, **cols)
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        if damage == "wrong dtype":
            arrays["doc_size"] = arrays["doc_size"].astype(np.int32)
        elif damage == "short column":
            arrays["doc_class"] = arrays["doc_class"][:4]
        else:
            del arrays["doc_header"]
        path.unlink()
        np.savez(path, **arrays)  # stored, as format 2, but not written here: unaligned
    with pytest.raises(FormatError, match=message):
        read_table(path, _side(5))


def test_a_format_1_table_still_opens(tmp_path):
    """A store packed before the mapped table (a compressed .npz without ``path_at``) opens and serves the same."""
    fps = write_corpus(tmp_path / "data", {"cat": [3, 50, 7], "dog": [9, 300]}, seed=1)
    prefix = str(tmp_path / "store")
    ds = Consumer(fps, style="concat", seqlen=16)
    ds.pack(prefix)
    as_format_1_table(prefix)
    back = Consumer.from_packed(prefix, style="concat", seqlen=16)
    assert list(back.files) == list(ds.files)
    np.testing.assert_array_equal(back.fetch_numpy(np.arange(len(ds)))["input_array"],
                                  ds.fetch_numpy(np.arange(len(ds)))["input_array"])


def _datasets(tmp_path: Path) -> dict[str, list]:
    """One of every kind of dataset (``Consumer`` arguments), containers of more than 10 records among them."""
    texts = [f"doc{i}" + "x" * (i % 7) for i in range(23)]
    write_jsonl(tmp_path / "a.jsonl", texts[:12])
    write_jsonl(tmp_path / "b.jsonl", texts[12:])
    write_lines(tmp_path / "l.txt", [t.encode() for t in texts])
    write_parquet(tmp_path / "p.parquet", [t.encode() for t in texts[:14]])
    write_tar(tmp_path / "t.tar", [t.encode() for t in texts[:13]])
    fps = write_corpus(tmp_path / "files", {"cat": [3, 50, 7, 1, 2, 4, 5, 6, 8, 9, 10, 11], "dog": [9, 300]}, seed=2)
    return {"files": [fps, {}], "jsonl": [str(tmp_path / "*.jsonl"), {"documents": "jsonl"}],
            "lines": [str(tmp_path / "l.txt"), {"documents": "lines"}],
            "parquet": [str(tmp_path / "p.parquet"), {"documents": "parquet"}],
            "tar": [str(tmp_path / "t.tar"), {"documents": "tar"}]}


@pytest.mark.parametrize("kind", ["files", "jsonl", "lines", "parquet", "tar"])
@pytest.mark.parametrize(("style", "seqlen"), [("diff", 12), ("concat", 10)])
@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
def test_a_store_serves_the_samples_of_the_dataset_it_was_packed_from(tmp_path, kind, style, seqlen, fmt):
    """``from_packed(pack(ds))`` serves ``ds``'s samples in ``ds``'s order: a container of more than 10 records
    packs ``#0, #1, ..., #10``, and opens in that order (not ``#0, #1, #10, #11, #2`` as strings sort)."""
    fps, options = _datasets(tmp_path)[kind]
    ds = Consumer(fps, style=style, seqlen=seqlen, n_bytes=1, **options)
    prefix = str(tmp_path / f"store_{kind}")
    ds.pack(prefix, format=fmt)
    back = Consumer.from_packed(prefix, style=style, seqlen=seqlen)
    assert list(back.files) == list(ds.files)
    ids = np.arange(len(ds))
    a, b = ds.fetch_numpy(ids, ["input_array", "class", "file_id"]), back.fetch_numpy(ids, ["input_array", "class",
                                                                                             "file_id"])
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    _, docs, _ = open_packed(prefix)
    assert isinstance(docs.paths[0], str) and not docs.doc_size.flags.writeable  # the mapped column, not a copy


def test_twelve_jsonl_records_read_back_in_record_order(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [f"doc{i}" for i in range(12)])
    ds = Consumer(str(tmp_path / "d.jsonl"), documents="jsonl", style="diff", seqlen=8, metadata=None)
    ds.pack(str(tmp_path / "p"))
    back = Consumer.from_packed(str(tmp_path / "p"), style="diff", seqlen=8)
    texts = [back.decode(back[k]["input_array"]).rstrip(b"\0") for k in range(12)]
    assert [t[:len(f"doc{k}")] for k, t in enumerate(texts)] == [f"doc{k}".encode() for k in range(12)]
    assert os.path.basename(back.files[10]) == "d.jsonl#10"


def test_a_path_twice_in_the_table_opens_and_verify_names_it(tmp_path):
    """An open does not look for duplicate paths (that would read every path); ``consumer verify`` does."""
    from consumer import verify_packed

    fps = write_corpus(tmp_path / "data", {"cat": [3, 50, 7], "dog": [9, 300]}, seed=1)
    prefix = str(tmp_path / "store")
    Consumer(fps, style="diff", seqlen=16).pack(prefix)
    assert verify_packed(prefix)["duplicate_path"] is None
    table = Path(prefix + ".consumer.npz")
    with np.load(table) as z:
        arrays = {k: z[k] for k in z.files}
    paths = [p.decode() for p in bytes(arrays["paths"]).split(b"\0")]
    paths[3] = paths[1]
    table.unlink()
    write_table(table, paths, arrays["doc_class"], arrays["doc_size"], arrays["doc_header"])
    side_path = Path(prefix + ".consumer.json")
    side = json.loads(side_path.read_text())
    side["files"]["table"]["size"] = table.stat().st_size
    side_path.write_text(json.dumps(side))
    Consumer.from_packed(prefix, style="diff", seqlen=16, cache_dir=False)
    with pytest.raises(FormatError, match=r"file table: expected each path once, got .* more than once"):
        verify_packed(prefix)
    assert verify_packed(prefix, errors="report")["duplicate_path"] == paths[1]


@pytest.mark.parametrize("kind", ["jsonl", "tar"])
def test_merging_records_stores_in_corpus_order_is_the_pack_of_the_whole(tmp_path, kind):
    """Containers of more than 10 records, packed on two "machines" and merged: record order inside each container
    (a string sort of the paths would put ``#10`` before ``#2``, and tar members are in archive order)."""
    from consumer import merge_packed

    texts = [f"record {i} " + "y" * (i % 5) for i in range(14)]
    if kind == "jsonl":
        a, b = write_jsonl(tmp_path / "a.jsonl", texts), write_jsonl(tmp_path / "b.jsonl", texts[::-1])
    else:
        names = [f"m{13 - i}.txt" for i in range(14)]  # archive order is not name order
        a = write_tar(tmp_path / "a.tar", [t.encode() for t in texts], names=names)
        b = write_tar(tmp_path / "b.tar", [t.encode() for t in texts[::-1]], names=names)
    options = {"documents": kind, "style": "diff", "seqlen": 16, "cache_dir": False}
    Consumer({"x": [str(a), str(b)]}, **options).pack(tmp_path / "whole")
    Consumer({"x": [str(b)]}, **options).pack(tmp_path / "part_b")
    Consumer({"x": [str(a)]}, **options).pack(tmp_path / "part_a")
    merge_packed([str(tmp_path / "part_b"), str(tmp_path / "part_a")], str(tmp_path / "merged"))
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"merged{suffix}").read_bytes() == (tmp_path / f"whole{suffix}").read_bytes(), suffix
    merged = Consumer.from_packed(tmp_path / "merged", style="diff", seqlen=16, cache_dir=False)
    assert list(merged.files) == list(Consumer.from_packed(tmp_path / "whole", cache_dir=False).files)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10**6)), min_size=1, max_size=40),
       reorder=st.booleans(), window=st.integers(1, 7))
def test_paths_made_on_demand_are_written_a_window_at_a_time(tmp_path_factory, records, reorder, window):
    from consumer.sources.records.names import RecordPaths, record_paths

    tmp = tmp_path_factory.mktemp("t")
    records = sorted(records)  # documents in container, then record order (as a build makes them)
    cont = np.array([c for c, _ in records], dtype=np.int32)
    rec = np.array([r for _, r in records], dtype=np.int32)
    names = ["/d/a.jsonl", "/d/é b.txt", "/d/c"]
    order = np.random.default_rng(len(records)).permutation(len(records)) if reorder else None
    lazy = RecordPaths((names, cont, rec, None) if order is None else (names, cont, rec, None, order))
    want = list(record_paths(names, cont, rec))
    want = want if order is None else [want[i] for i in order.tolist()]
    n = len(records)
    path = tmp / "t.consumer.npz"
    write_table(path, lazy, np.zeros(n, np.int32), np.ones(n, np.int64), np.zeros(n, np.int32), window=window)
    assert not lazy._made()  # written piece by piece: the whole blob was never made
    listed, *_ = read_table(path, _side(n))
    assert list(listed) == want
    plain = tmp / "p.consumer.npz"
    write_table(plain, want, np.zeros(n, np.int32), np.ones(n, np.int64), np.zeros(n, np.int32), window=window)
    assert plain.read_bytes() == path.read_bytes()  # the same bytes however the paths were given
