"""JSONL texts read from their records' lines: a plain container's texts are decoded again when read (nothing
stored twice), a compressed one's go to the decode cache, and a text that is not the one indexed is never served."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.errors import FileChangedError, InputError
from consumer.sources.records import RecordOptions
from consumer.sources.records.jsonl_read import BadLine, LineTexts
from consumer.sources.records.source import RecordFiles

from ..helpers.ranges import MALFORMED_RANGES

TEXTS = ["plain", 'a "quoted" line\nbreak', "café 東京 \U0001f600", "", "tab\there \\ back", "x" * 5000]


def _docs(ds: Consumer) -> list[bytes]:
    return [ds.decode(ds.document_tokens(i)) for i in range(len(ds.files))]


def _decoded_files(cache) -> list[int]:
    return sorted(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache) for f in fs
                  if f == "decoded.bin")


def test_a_plain_container_is_not_stored_twice(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps({"id": k, "text": t}, ensure_ascii=k % 2 == 0) + "\n"
                         for k, t in enumerate(TEXTS)), encoding="utf-8")
    want = [t.encode() for t in TEXTS]
    cache = tmp_path / "cache"
    ds = Consumer(str(p), documents="jsonl", cache_dir=cache, metadata=None, n_bytes=1)
    assert _docs(ds) == want
    assert _decoded_files(cache) == [0]  # the index only: the texts stay in the container
    again = Consumer(str(p), documents="jsonl", cache_dir=cache, metadata=None, n_bytes=1)
    assert again.build_info["records"]["reused"] == 1 and _docs(again) == want
    got = ds.sql("SELECT json FROM documents ORDER BY file_id")  # the records' lines, read in place
    assert [r[0].encode() for r in got] == p.read_bytes().split(b"\n")[:-1]


def test_a_compressed_container_keeps_its_texts_in_the_decode_cache(tmp_path):
    p = tmp_path / "d.jsonl.gz"
    p.write_bytes(gzip.compress("".join(json.dumps({"text": t}) + "\n" for t in TEXTS).encode()))
    cache = tmp_path / "cache"
    ds = Consumer(str(p), documents="jsonl", cache_dir=cache, metadata=None, n_bytes=1)
    assert _docs(ds) == [t.encode() for t in TEXTS]
    assert _decoded_files(cache)[0] > sum(len(t.encode()) for t in TEXTS)  # the texts and the lines


def test_ranges_of_many_documents_in_one_read(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS), encoding="utf-8")
    ds = Consumer(str(p), documents="jsonl", cache_dir=False, metadata=None, n_bytes=1)
    source = ds.documents.source
    want = [t.encode() for t in TEXTS]
    ids = np.array([5, 1, 2, 1, 4], dtype=np.int64)  # one document twice, out of order
    offsets = np.array([4990, 3, 0, 0, 6], dtype=np.int64)
    lengths = np.array([10, 5, len(want[2]), 2, 2], dtype=np.int64)
    at = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    out = np.zeros(int(lengths.sum()), dtype=np.uint8)
    source.read_ranges(ids, offsets, lengths, out, at)
    assert out.tobytes() == b"".join(want[i][o:o + n] for i, o, n in zip(ids, offsets, lengths))


def test_a_text_not_as_indexed_is_never_served(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS), encoding="utf-8")
    ds = Consumer(str(p), documents="jsonl", cache_dir=False, metadata=None, n_bytes=1)
    src: RecordFiles = ds.documents.source
    sizes = src.sizes.copy()
    sizes[1] += 1  # as if the line now held another text (a rewrite the version checks could not see)
    wrong = RecordFiles(src.containers, src.paths, src.doc_container, src.doc_offset, sizes, src.doc_inplace,
                        src.decoded, src.json_offset, src.json_length, src.record, src.from_lines, src.options)
    with pytest.raises(FileChangedError, match=r"d\.jsonl#1.*when indexed"):
        wrong.document_bytes(1)
    assert wrong.document_bytes(0) == b"plain"
    shifted = src.json_offset.copy()
    shifted[2] += 1  # as if the line now began elsewhere: it no longer decodes as a record
    broken = RecordFiles(src.containers, src.paths, src.doc_container, src.doc_offset, src.sizes, src.doc_inplace,
                         src.decoded, shifted, src.json_length, src.record, src.from_lines, src.options)
    with pytest.raises(FileChangedError, match=r"d\.jsonl#2.*no longer decodes"):
        broken.document_bytes(2)


def test_line_texts_names_the_line_that_is_not_a_record():
    texts = LineTexts(RecordOptions("jsonl"))
    data, at, n = texts([b'{"text": "a\\u00e9"}', b' {"x": 1, "text": "b"}\r'])
    assert [data[o:o + k].tobytes() for o, k in zip(at.tolist(), n.tolist())] == ["aé".encode(), b"b"]
    with pytest.raises(BadLine) as e:
        texts([b'{"text": "a"}', b'{"text": 3}'])
    assert e.value.index == 1


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_ranges_of_any_documents_read_exactly(tmp_path_factory, data):
    # ranges sorted by container and offset, near ones read as one span, overlapping and repeated ones: the bytes
    # asked for, in the order asked, for documents in place (lines) and decoded from their lines (jsonl)
    root = tmp_path_factory.mktemp("reads")
    texts = [f"doc {k} " + "é\n\"x" * (k % 7) + "y" * (k * 37 % 5000) for k in range(40)]
    parts = [texts[0:15], texts[15:30], texts[25:40]]  # three containers (two share five texts)
    for name, part in zip("abc", parts):
        (root / f"{name}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in part), encoding="utf-8")
        (root / f"{name}.txt").write_bytes(b"".join(t.encode().replace(b"\n", b" ") + b"\n" for t in part))
    every = [t.encode() for part in parts for t in part]
    for kind, suffix in (("jsonl", "*.jsonl"), ("lines", "*.txt")):
        ds = Consumer(str(root / suffix), documents=kind, cache_dir=False, metadata=None, n_bytes=1)
        source = ds.documents.source
        docs = [source.document_bytes(i) for i in range(len(source.sizes))]
        assert docs == (every if kind == "jsonl" else [d.replace(b"\n", b" ") for d in every])
        ids = data.draw(st.lists(st.integers(0, len(docs) - 1), max_size=30))
        offsets, lengths = [], []
        for i in ids:
            lo = data.draw(st.integers(0, len(docs[i])))
            offsets.append(lo)
            lengths.append(data.draw(st.integers(0, len(docs[i]) - lo)))
        at = np.cumsum([0] + lengths[:-1]).astype(np.int64) if ids else np.zeros(0, dtype=np.int64)
        out = np.full(sum(lengths) + 2, 0xEE, dtype=np.uint8)
        source.read_ranges(np.array(ids, dtype=np.int64), np.array(offsets, dtype=np.int64),
                           np.array(lengths, dtype=np.int64), out, at)
        want = b"".join(docs[i][o:o + n] for i, o, n in zip(ids, offsets, lengths))
        assert out.tobytes() == want + b"\xee\xee", kind


@pytest.mark.parametrize("ids, offsets, lengths, out, at, match", MALFORMED_RANGES)
def test_malformed_ranges_of_documents_are_refused_with_the_bad_value(tmp_path, ids, offsets, lengths, out, at,
                                                                      match):
    """A few ranges (one document) are checked with plain ints, more with numpy: the same refusals."""
    p = tmp_path / "d.jsonl"
    texts = ["plain", "a", "x" * 5000, "b", "c", "d"]  # document 2 of 5,000 bytes, as the table wants
    p.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    source = Consumer(str(p), documents="jsonl", cache_dir=False, metadata=None).documents.source
    with pytest.raises(InputError, match=match):
        source.read_ranges(np.array(ids), np.array(offsets), np.array(lengths), out, np.array(at))
    with pytest.raises(InputError, match=match):
        source.read_ranges(ids, offsets, lengths, out, at)
