"""ds.sql and ds.where: agree with filtering in Python; read-only; clear errors."""

import os

import numpy as np
import pytest

from consumer import Consumer, QueryError, SelectionError


@pytest.fixture
def ds(tmp_path, corpus_dir):
    return Consumer(corpus_dir, cache_dir=tmp_path / "cache", style="concat", seqlen=40)


def test_group_by_class_agrees_with_python(ds):
    rows = ds.sql("SELECT class, count(*), sum(size) FROM files GROUP BY class ORDER BY class")
    assert rows.columns == ["class", "count(*)", "sum(size)"]
    expected = []
    for c in ds.classes:
        files = [p for p in ds.files if f"/{c}/" in p]
        expected.append((c, len(files), sum(os.path.getsize(p) for p in files)))
    assert list(rows) == expected


def test_view_columns(ds):
    rows = ds.sql("SELECT * FROM files ORDER BY file_id").as_dicts()
    assert [r["path"] for r in rows] == ds.files
    assert [r["tokens"] for r in rows] == ds.documents.doc_len.tolist()
    assert sum(r["samples"] for r in rows) >= len(ds)
    assert all(r["mime"] and r["description"] and r["extension"] == "dat" for r in rows)
    assert [r["class_id"] for r in rows] == [ds.class_to_id[r["class"]] for r in rows]


def test_where_agrees_with_python_and_keeps_settings(ds):
    sub = ds.where("size < ? AND class != 'eel'", (100,))
    expected = [p for p in ds.files if os.path.getsize(p) < 100 and "/eel/" not in p]
    assert sub.files == expected
    assert (sub.style, sub.seqlen, sub.vocab.n_bytes, sub.class_to_id) == (ds.style, ds.seqlen, 2, ds.class_to_id)
    assert sub.classes == ["cat", "dog"]
    out = sub[{"cat": 2, "dog": 1}, "supervised"]
    assert out["input_array"].shape == (3, ds.seqlen) and out["class"].tolist()[2] == ds.class_to_id["dog"]
    # its tokens are the tokens of those files
    for fid, path in enumerate(sub.files):
        assert np.array_equal(sub.document_tokens(fid), ds.document_tokens(ds.files.index(path)))


def test_where_on_mime(ds):
    text = ds.where("mime LIKE 'text/%'")
    assert text.files and all(
        m.startswith("text/") for (m,) in text.sql("SELECT mime FROM files"))
    with pytest.raises(SelectionError, match="matched no file"):
        ds.where("mime LIKE 'image/%'")


def test_sql_after_metadata_none_runs_libmagic_once(tmp_path, corpus_dir):
    ds = Consumer(corpus_dir, cache_dir=tmp_path / "c", metadata=None)
    assert ds.sql("SELECT count(*) FROM files WHERE mime IS NULL")[0][0] == 0


@pytest.mark.parametrize("statement", [
    "DELETE FROM files",
    "UPDATE files SET size = 0",
    "INSERT INTO files(path) VALUES ('x')",
    "DROP VIEW files",
    "CREATE TABLE t(x)",
    "ATTACH DATABASE ':memory:' AS other",
    "PRAGMA journal_mode=DELETE",
    "SELECT 1; DELETE FROM files",
])
def test_writes_are_refused(ds, statement):
    with pytest.raises(QueryError) as err:
        ds.sql(statement)
    assert statement[:20] in str(err.value) or "one statement" in str(err.value)
    assert ds.sql("SELECT count(*) FROM files")[0][0] == len(ds.files)


def test_catalog_file_is_unchanged_by_refused_statements(ds, tmp_path):
    ds.sql("SELECT 1")  # the first statement completes the catalog (MIME types)
    before = ds.catalog.dump()
    for bad in ("DELETE FROM main.files", "UPDATE main.files SET size = 1"):
        with pytest.raises(QueryError, match="refused"):
            ds.sql(bad)
    assert ds.catalog.dump() == before


@pytest.mark.parametrize("statement, message", [
    ("SELEC * FROM files", "SQL error in 'SELEC"),
    ("SELECT nope FROM files", "no such column: nope"),
    ("", "statement must be a non-empty SQL string"),
])
def test_sql_errors_name_the_statement(ds, statement, message):
    with pytest.raises(QueryError, match=message):
        ds.sql(statement)


@pytest.mark.parametrize("statement, suggestion", [
    ("SELECT mimee FROM files", "mime"),            # DuckDB's candidate bindings, kept
    ("SELECT f.mimee FROM files AS f", "mime"),     # DuckDB suggests nothing here: the closest names (difflib)
    ("SELECT class FROM files WHERE sizee > 1", "size"),
])
def test_a_mistyped_column_names_the_column_that_exists(ds, statement, suggestion):
    with pytest.raises(QueryError) as info:
        ds.sql(statement)
    message = str(info.value)
    assert "no such column: " in message
    hint = message.split("no such column: ", 1)[1]
    assert f'"{suggestion}"' in hint or f"'{suggestion}'" in hint, message


def test_where_errors(ds):
    with pytest.raises(QueryError, match="condition must be a non-empty SQL expression"):
        ds.where("")
    with pytest.raises(QueryError, match="no such column"):
        ds.where("colour = 'red'")
