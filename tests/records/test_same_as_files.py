"""A records dataset gives exactly what the same documents, written one per file in record order, give: the same
documents, samples, masks and packed ``.bin/.idx/.pbin`` (both styles, n_bytes 1-3, every query preset)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.fetch.columns import QUERY_PRESETS

from .writers import write_exploded, write_jsonl, write_lines, write_parquet, write_tar

SETTINGS = [("diff", 1), ("diff", 2), ("diff", 3), ("concat", 1), ("concat", 2), ("concat", 3)]


def _pair(kind: str, container: Path, docs: list[bytes], tmp: Path, style: str, n_bytes: int,
          **options) -> tuple[Consumer, Consumer]:
    common = dict(style=style, n_bytes=n_bytes, seqlen=12, metadata=None, cache_dir=False, seed=7,
                  long_files="windows" if style == "diff" else "truncate")
    rec = Consumer(str(container), documents=kind, **common, **options)
    files = Consumer(write_exploded(tmp / f"exploded-{style}-{n_bytes}", docs), **common)
    return rec, files


def assert_same(rec: Consumer, files: Consumer) -> None:
    """Same documents, samples and every query's columns (masks included, two epochs)."""
    assert len(rec.files) == len(files.files)
    for i in range(len(files.files)):
        assert np.array_equal(rec.document_tokens(i), files.document_tokens(i)), i
    assert len(rec) == len(files)
    ids = np.arange(len(files))
    for query in [q for q in QUERY_PRESETS if q != "megatron"]:  # megatron: only over sampling="megatron"
        for epoch in (0, 1):
            a, b = rec.fetch_numpy(ids, query, epoch=epoch), files.fetch_numpy(ids, query, epoch=epoch)
            assert a.keys() == b.keys()
            for k in a:
                assert np.array_equal(a[k], b[k]), (query, k)


def _lines_docs(raw: bytes) -> list[bytes]:
    return [line for line in raw.split(b"\n") if line]


PIECES = [b"a", b"\r", b"\n", b"\xff", b"\xe2\x80\xa8", b"\x85", b"\x00", b"xyz", b"\r\n"]  # U+2028, NEL: not breaks
line_bytes = st.lists(st.sampled_from(PIECES), min_size=1, max_size=40).map(b"".join).filter(
    lambda r: bool(_lines_docs(r)))
texts = st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30), min_size=1,
                 max_size=8)
blobs = st.lists(st.binary(max_size=40), min_size=1, max_size=8)
quick = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@quick
@given(raw=line_bytes)
def test_lines_same_as_files(tmp_path_factory, raw):
    tmp = tmp_path_factory.mktemp("lines")
    container = tmp / "c.txt"
    container.write_bytes(raw)
    for style, n in SETTINGS:
        assert_same(*_pair("lines", container, _lines_docs(raw), tmp, style, n))


@quick
@given(docs=texts, ascii_only=st.booleans())
def test_jsonl_same_as_files(tmp_path_factory, docs, ascii_only):
    tmp = tmp_path_factory.mktemp("jsonl")
    container = write_jsonl(tmp / "c.jsonl", docs, extra={"id": 1}, ensure_ascii=ascii_only)
    for style, n in SETTINGS:
        assert_same(*_pair("jsonl", container, [d.encode() for d in docs], tmp, style, n))


@quick
@given(docs=blobs)
def test_tar_same_as_files(tmp_path_factory, docs):
    tmp = tmp_path_factory.mktemp("tar")
    container = write_tar(tmp / "c.tar", docs)
    for style, n in SETTINGS:
        assert_same(*_pair("tar", container, docs, tmp, style, n))


@quick
@given(docs=blobs)
def test_parquet_same_as_files(tmp_path_factory, docs):
    tmp = tmp_path_factory.mktemp("parquet")
    container = write_parquet(tmp / "c.parquet", docs)
    for style, n in SETTINGS:
        assert_same(*_pair("parquet", container, docs, tmp, style, n))


DOCS = [b"alpha\r", b"", b"\xff\xfe not utf-8", "caf\u00e9 \u2028 nel\u0085".encode(), b"x" * 300, b"\x00\x01"]


def _containers(tmp: Path) -> dict[str, tuple[Path, list[bytes]]]:
    text_docs = [d for d in DOCS if d and b"\n" not in d]
    utf8 = [d for d in DOCS if _is_utf8(d)]
    return {"lines": (write_lines(tmp / "c.txt", text_docs, final_newline=False), text_docs),
            "jsonl": (write_jsonl(tmp / "c.jsonl", [d.decode() for d in utf8]), utf8),
            "tar": (write_tar(tmp / "c.tar", DOCS), DOCS),
            "parquet": (write_parquet(tmp / "c.parquet", DOCS), DOCS)}


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode()
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("kind", ["lines", "jsonl", "tar", "parquet"])
@pytest.mark.parametrize("n_bytes", [1, 2, 3])
def test_packed_stores_same_as_files(tmp_path, kind, n_bytes):
    container, docs = _containers(tmp_path)[kind]
    rec, files = _pair(kind, container, docs, tmp_path, "diff", n_bytes)
    assert_same(rec, files)
    for fmt, suffixes in (("megatron", (".bin", ".idx")), ("modalities", (".pbin",))):
        rec.pack(tmp_path / f"rec-{fmt}", format=fmt)
        files.pack(tmp_path / f"files-{fmt}", format=fmt)
        for suffix in suffixes:
            assert (tmp_path / f"rec-{fmt}{suffix}").read_bytes() == (tmp_path / f"files-{fmt}{suffix}").read_bytes()
    again = Consumer.from_packed(tmp_path / "rec-megatron", style="diff", seqlen=12, long_files="windows", seed=7)
    assert np.array_equal(again.fetch_numpy(np.arange(len(again)))["input_array"],
                          files.fetch_numpy(np.arange(len(files)))["input_array"])
