"""SQL over documents: the ``documents`` relation (one row per document, lazy ``json``, byte predicates on the
document's bytes), ``files`` with one row per container, ``where()`` selecting documents, and ``documents`` equal to
``files`` in files mode."""

from __future__ import annotations

import pytest

from consumer import Consumer
from consumer.errors import QueryError

from .writers import write_jsonl, write_lines, write_tar


@pytest.fixture
def jsonl_ds(tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_text('{"text": "hello", "lang": "en", "label": "x"}\n{"text": "bonjour", "lang": "fr", "label": "y"}\n')
    b = write_jsonl(tmp_path / "b.jsonl", ["hi", "salut"], extra={"lang": "en", "label": "x"})
    return Consumer([str(a), str(b)], documents="jsonl", class_field="label", cache_dir=tmp_path / "c", seqlen=8,
                    style="diff")


def test_documents_rows_and_columns(jsonl_ds, tmp_path):
    rows = jsonl_ds.sql('SELECT doc_id, file_id, path, record, "offset", length, class, class_id, tokens, samples '
                        "FROM documents ORDER BY doc_id")
    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    second = {p: (tmp_path / p).read_bytes().index(b"\n") + 1 for p in ("a.jsonl", "b.jsonl")}  # line 2's offset
    # class x first (container then record), then class y
    assert [r[:8] for r in rows] == [(0, 0, f"{a}#0", 0, 0, 5, "x", 0), (1, 1, f"{b}#0", 0, 0, 2, "x", 0),
                                     (2, 1, f"{b}#1", 1, second["b.jsonl"], 5, "x", 0),
                                     (3, 0, f"{a}#1", 1, second["a.jsonl"], 7, "y", 1)]
    assert all(r[8] > 0 and r[9] >= 1 for r in rows)


def test_json_column_filters_on_any_field(jsonl_ds):
    assert jsonl_ds.sql("SELECT count(*) FROM documents WHERE json_extract_string(json, '$.lang') = 'en'") == [(3,)]
    en = jsonl_ds.where("json_extract_string(json, '$.lang') = 'en'")
    assert [en.decode(en.document_tokens(i)) for i in range(len(en.files))] == [b"hello", b"hi", b"salut"]


def test_files_has_one_row_per_container(jsonl_ds, tmp_path):
    rows = jsonl_ds.sql("SELECT file_id, path, class, size, tokens, samples FROM files ORDER BY file_id")
    assert [(r[0], r[1], r[2]) for r in rows] == [(0, str(tmp_path / "a.jsonl"), None),
                                                   (1, str(tmp_path / "b.jsonl"), "x")]
    assert rows[0][3] == (tmp_path / "a.jsonl").stat().st_size
    docs = jsonl_ds.sql("SELECT file_id, sum(tokens), sum(samples) FROM documents GROUP BY file_id ORDER BY 1")
    assert [(r[0], r[4], r[5]) for r in rows] == docs


def test_byte_predicates_read_the_documents_bytes(tmp_path):
    p = write_lines(tmp_path / "l.txt", [b"GET /a", b"POST /b", b"GET /c\r"])
    ds = Consumer(str(p), documents="lines", cache_dir=False)
    assert ds.sql("SELECT record FROM documents WHERE head(path, 4) = 'GET '::BLOB ORDER BY 1") == [(0,), (2,)]
    assert ds.sql("SELECT record FROM documents WHERE contains(path, '/b'::BLOB)") == [(1,)]
    assert ds.sql("SELECT record FROM documents WHERE tail(path, 1) = '\\x0D'::BLOB") == [(2,)]  # the CR is kept
    t = write_tar(tmp_path / "t.tar", [b"\x7fELF....", b"text"])
    tar = Consumer(str(t), documents="tar", cache_dir=False)
    assert tar.sql("SELECT path FROM documents WHERE head(path, 4) = '\\x7FELF'::BLOB") == [(f"{t}/m00000",)]
    assert tar.sql('SELECT "offset", length FROM documents ORDER BY doc_id') == [(512, 8), (1536, 4)]


def test_documents_equals_files_in_files_mode(corpus_dir):
    ds = Consumer(corpus_dir, cache_dir=False, metadata=None)
    files = ds.sql("SELECT file_id, path, class, size, tokens, samples FROM files ORDER BY file_id")
    docs = ds.sql('SELECT doc_id, path, class, length, tokens, samples FROM documents ORDER BY doc_id')
    assert files == docs
    assert ds.sql('SELECT count(*) FROM documents WHERE record = 0 AND "offset" = 0 AND json IS NULL') == \
        [(len(files),)]


def test_internal_tables_stay_sealed(jsonl_ds):
    with pytest.raises(QueryError, match="not allowed"):
        jsonl_ds.sql("SELECT * FROM consumer_containers")


def test_container_class_when_its_documents_stay_in_container_order(tmp_path):
    # class x: a#0; class y: a#1, b#0 -- the documents keep container order, and a holds two classes
    a = tmp_path / "a.jsonl"
    a.write_text('{"text": "one", "label": "x"}\n{"text": "two", "label": "y"}\n')
    b = tmp_path / "b.jsonl"
    b.write_text('{"text": "three", "label": "y"}\n')
    ds = Consumer([str(a), str(b)], documents="jsonl", class_field="label", cache_dir=False, seqlen=8)
    assert ds.sql("SELECT file_id FROM documents ORDER BY doc_id") == [(0,), (0,), (1,)]
    assert ds.sql("SELECT file_id, class FROM files ORDER BY file_id") == [(0, None), (1, "y")]
    folders = {"p": [b"1", b"2"], "q": [b"3"]}
    for name, docs in folders.items():
        (tmp_path / name).mkdir()
        write_lines(tmp_path / name / "c.txt", docs)
    by_folder = Consumer({k: [str(tmp_path / k / "c.txt")] for k in folders}, documents="lines", cache_dir=False)
    assert by_folder.sql("SELECT class FROM files ORDER BY file_id") == [("p",), ("q",)]
