"""A records dataset starts from Modalities' raw index (``<stem>.idx``) beside a ``jsonl``/``lines`` container instead
of the newline scan: the same documents with and without it; an index that does not match the file (unreadable,
past its end, lines not ending at a newline) is refused with a ConsumerWarning and the file is scanned."""

from __future__ import annotations

import pickle
import warnings

import pytest

from consumer import Consumer
from consumer.errors import ConsumerWarning
from consumer.formats.raw_index import write_raw_index

from .writers import write_jsonl

TEXTS = ["héllo", "a longer text " * 20, "x", "\u2028 inside", "last"]


def docs_of(ds: Consumer) -> list[bytes]:
    return [ds.decode(ds.document_tokens(i)) for i in range(len(ds.files))]


def _build(path, kind, tmp_path, cache: bool = False) -> Consumer:
    return Consumer([str(path)], documents=kind, seqlen=16, cache_dir=tmp_path / "c" if cache else False)


def _containers(tmp_path):
    jsonl = write_jsonl(tmp_path / "a.jsonl", TEXTS)
    crlf = tmp_path / "b.jsonl"
    crlf.write_bytes(jsonl.read_bytes().replace(b"\n", b"\r\n").rstrip(b"\r\n"))  # CRLF, no final newline
    lines = tmp_path / "c.txt"
    lines.write_bytes(jsonl.read_bytes())  # JSON lines read as plain lines
    return [(jsonl, "jsonl"), (crlf, "jsonl"), (lines, "lines")]


@pytest.mark.parametrize("cache", [False, True])
def test_same_documents_with_and_without_the_raw_index(tmp_path, cache):
    for path, kind in _containers(tmp_path):
        scanned = _build(path, kind, tmp_path / "scan")
        assert scanned.build_info["records"]["raw_index"] == 0
        write_raw_index(path)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConsumerWarning)
            indexed = _build(path, kind, tmp_path, cache)
        assert indexed.build_info["records"]["raw_index"] == 1
        assert docs_of(indexed) == docs_of(scanned) and len(docs_of(indexed)) == len(TEXTS)
        assert indexed.sql('SELECT record, "offset", length FROM documents ORDER BY 1') == \
            scanned.sql('SELECT record, "offset", length FROM documents ORDER BY 1')


def test_the_index_selects_the_lines(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "one"}\nnot json\n{"text": "three"}\n')
    write_raw_index(path, drop_faulty_entries=True)  # Modalities leaves the faulty line out
    ds = _build(path, "jsonl", tmp_path)
    assert docs_of(ds) == [b"one", b"three"] and ds.build_info["records"]["raw_index"] == 1


def _stale(tmp_path):
    """(index bytes, what the warning says) of raw indexes that do not match ``a.jsonl``."""
    size = (tmp_path / "a.jsonl").stat().st_size
    return [(b"not a pickle", "cannot use this raw index"),
            (pickle.dumps([(0, 5), (3, 4)], protocol=4), "does not match"),  # overlapping
            (pickle.dumps([(0, size + 10)], protocol=4), "does not match"),  # past the end
            (pickle.dumps([(0, 3), (4, 3)], protocol=4), "does not end at a newline")]


@pytest.mark.parametrize("kind", ["jsonl", "lines"])
@pytest.mark.parametrize("case", range(4))
def test_a_stale_index_is_refused_and_the_file_scanned(tmp_path, kind, case):
    path = write_jsonl(tmp_path / "a.jsonl", TEXTS)
    scanned = docs_of(_build(path, kind, tmp_path / "scan"))
    data, message = _stale(tmp_path)[case]
    (tmp_path / "a.idx").write_bytes(data)
    with pytest.warns(ConsumerWarning, match=message):
        ds = _build(path, kind, tmp_path, cache=True)
    assert docs_of(ds) == scanned and ds.build_info["records"]["raw_index"] == 0
