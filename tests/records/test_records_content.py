"""Content columns and ``dedupe="content"`` on records: the content of a document is its bytes (sha256, entropy,
printable, histogram computed on them), and deduplication keeps the first copy in document order (class,
container, record)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from consumer import Consumer
from consumer.catalog.stats import decode_histogram, printable_fraction

from .writers import write_jsonl, write_lines, write_tar

DOCS = [b"alpha", b"beta", b"alpha", b"\x00\x01binary\xff", b"beta"]


def _container(tmp_path, kind):
    if kind == "jsonl":
        return write_jsonl(tmp_path / "a.jsonl", [d.decode("latin-1") for d in DOCS])
    if kind == "lines":
        return write_lines(tmp_path / "a.txt", DOCS)
    return write_tar(tmp_path / "a.tar", DOCS)


def _bytes(kind):
    return [d.decode("latin-1").encode() for d in DOCS] if kind == "jsonl" else DOCS


@pytest.mark.parametrize("kind", ["jsonl", "lines", "tar"])
def test_content_columns_are_computed_on_each_documents_bytes(tmp_path, kind):
    ds = Consumer([str(_container(tmp_path, kind))], documents=kind, seqlen=8, cache_dir=tmp_path / "c")
    rows = ds.sql("SELECT sha256, printable, histogram FROM documents ORDER BY doc_id")
    want = _bytes(kind)
    assert [r[0] for r in rows] == [hashlib.sha256(b).hexdigest() for b in want]
    for (_, printable, hist), b in zip(rows, want):
        counts = np.bincount(np.frombuffer(b, dtype=np.uint8), minlength=256).astype(np.uint64)
        assert np.array_equal(decode_histogram(hist), counts)
        assert printable == pytest.approx(printable_fraction(counts))


@pytest.mark.parametrize("kind", ["jsonl", "lines", "tar"])
def test_dedupe_content_keeps_the_first_copy_in_document_order(tmp_path, kind):
    ds = Consumer([str(_container(tmp_path, kind))], documents=kind, seqlen=8, cache_dir=tmp_path / "c",
                  dedupe="content")
    want = _bytes(kind)
    assert [ds.decode(ds.document_tokens(i))[-len(b):] for i, b in enumerate([want[0], want[1], want[3]])] == \
        [want[0], want[1], want[3]]
    report = ds.build_info["dedupe"]
    assert report["kept"] == 3 and report["dropped_files"] == 2
    assert [(d["path"].rsplit("#", 1)[-1].rsplit("/", 1)[-1], d["kept"].rsplit("#", 1)[-1].rsplit("/", 1)[-1])
            for d in report["dropped"]] == ([("2", "0"), ("4", "1")] if kind != "tar" else
                                            [("m00002", "m00000"), ("m00004", "m00001")])


def test_dedupe_follows_record_numbers_not_path_strings(tmp_path):
    docs = [f"doc{k}".encode() for k in range(9)] + [b"same", b"same"]  # records 9 and 10 are copies
    path = write_lines(tmp_path / "a.txt", docs)
    ds = Consumer([str(path)], documents="lines", seqlen=8, cache_dir=False, dedupe="content")
    assert ds.files[-1].endswith("#9") and len(ds.files) == 10
    assert ds.build_info["dedupe"]["dropped"][0]["path"].endswith("#10")


def test_dedupe_across_containers_and_classes(tmp_path):
    for cls, docs in {"a": [b"one", b"two"], "b": [b"two", b"three"]}.items():
        (tmp_path / "d" / cls).mkdir(parents=True)
        write_lines(tmp_path / "d" / cls / "x.txt", docs)
    ds = Consumer(str(tmp_path / "d"), documents="lines", seqlen=8, cache_dir=False, dedupe="content")
    assert [f.rsplit("/", 2)[-2:] for f in ds.files] == [["a", "x.txt#0"], ["a", "x.txt#1"], ["b", "x.txt#1"]]
    assert ds.build_info["dedupe"]["cross_class_groups"] == 1


def test_duplicates_of_records_list_members_in_record_order(tmp_path):
    """Equal documents are grouped in corpus order: record 9 before record 10 (a path order would reverse them)."""
    from consumer import Consumer

    from .writers import write_lines

    docs = [f"d{i}".encode() for i in range(12)]
    docs[9] = docs[10] = docs[2] = b"same"
    shard = write_lines(tmp_path / "a.txt", docs)
    ds = Consumer([str(shard)], documents="lines", cache_dir=False)
    (group,) = ds.duplicates()
    assert [m.file_id for m in group.members] == [2, 9, 10]
    assert [m.path for m in group.members] == [f"{shard}#{i}" for i in (2, 9, 10)]
    kept = Consumer([str(shard)], documents="lines", cache_dir=False, dedupe="content")
    assert len(kept.files) == 10 and kept.document_tokens(2).tolist() == ds.document_tokens(2).tolist()
