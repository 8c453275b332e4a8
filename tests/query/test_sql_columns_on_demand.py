"""The engine's columns cost only when named: the dataset's own arrays are shared with DuckDB without a copy (int32
lengths scanned as int32, shown as BIGINT), the derived columns (``file_id``, ``tokens``, ``samples``, ``class_id``
under other ids) are made when a statement first needs them, and every way a statement can need one is seen."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer
from consumer.formats.mmidx import IndexedWriter
from consumer.query.statement import analyse


def _peer_store(prefix: Path, n: int = 500, seed: int = 0) -> tuple[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 16, n)
    with IndexedWriter(str(prefix), np.uint16) as w:
        w.add_segments(rng.integers(0, 50_000, int(lengths.sum()), dtype=np.uint16), lengths, np.ones(n, dtype=bool))
        w.end_document()
    return str(prefix), lengths


def _engine(ds: Consumer):
    return ds._session._duck()


def _shares(array, values: np.ndarray) -> bool:
    return array.buffers()[1].address == values.ctypes.data


def test_a_count_and_sum_of_lengths_copies_nothing_and_derives_nothing(tmp_path):
    prefix, lengths = _peer_store(tmp_path / "web")
    for _ in range(2):  # the first open checks the store, the reopen maps the recorded check
        ds = Consumer.from_packed(prefix, style="diff", seqlen=32, cache_dir=tmp_path / "c")
        assert ds.sql("SELECT count(*), sum(length) FROM documents") == [(lengths.size, int(lengths.sum()))]
        columns = _engine(ds)._columns
        assert not {"file_id", "tokens", "samples", "path"} & set(columns)
        size = ds.documents.doc_size
        assert size.dtype == np.int32 and _shares(columns["size"], size)  # the store's own int32 lengths
        assert _shares(columns["class"].indices, ds.documents.doc_class)
        ds.close()
    assert ds.build_info["checks"] == "recorded"  # and the recorded lengths are int32, as the .idx holds them


def test_derived_columns_and_their_aliases_are_made_when_named(tmp_path):
    prefix, lengths = _peer_store(tmp_path / "web")
    ds = Consumer.from_packed(prefix, style="diff", seqlen=8, cache_dir=tmp_path / "c")
    n = lengths.size
    rows = ds.sql("SELECT doc_id, file_id, length, tokens, samples, class_id FROM documents ORDER BY doc_id")
    assert [r[0] for r in rows] == list(range(n)) and [r[1] for r in rows] == list(range(n))
    assert [r[2] for r in rows] == [r[3] for r in rows] == lengths.tolist()
    assert sum(r[4] for r in rows) == len(ds) and {r[5] for r in rows} == {0}
    types = ds.sql("SELECT typeof(file_id), typeof(size), typeof(class_id), typeof(tokens), typeof(samples), "
                   "typeof(mtime_ns) FROM files LIMIT 1")
    assert types == [("BIGINT",) * 6]  # int32 lengths and class codes are shown as BIGINT
    assert ds.to_arrow().schema.field("size").type == "int64"
    ds.close()


def test_whole_rows_using_joins_and_renamed_columns_make_the_derived_columns(tmp_path):
    prefix, lengths = _peer_store(tmp_path / "web", n=50)
    n = lengths.size
    for statement, check in [
        ("SELECT f FROM files f", lambda rows: {r[0]["file_id"] for r in rows} == set(range(n))),
        ("SELECT count(*) FROM files JOIN documents USING (file_id)", lambda rows: rows == [(n,)]),
        ("SELECT max(a), max(d) FROM files AS f(a, b, c, d)", lambda rows: rows == [(n - 1, 0)]),
    ]:
        ds = Consumer.from_packed(prefix, style="diff", seqlen=32, cache_dir=tmp_path / "c")  # nothing made yet
        assert check(ds.sql(statement)), statement
        ds.close()


def test_class_ids_other_than_the_class_indices(tmp_path, corpus_dir):
    ds = Consumer(corpus_dir, cache_dir=tmp_path / "cache", metadata=None, class_to_id={"cat": 7, "dog": 3, "eel": 5},
                  style="diff", seqlen=64)
    assert "class_id" not in _engine(ds)._columns  # a gather of the ids: made when named
    rows = ds.sql("SELECT class, class_id, count(*) FROM files GROUP BY ALL ORDER BY class")
    assert [(c, i) for c, i, _ in rows] == [("cat", 7), ("dog", 3), ("eel", 5)]
    assert ds.sql("SELECT count(*) FROM files WHERE class_id = 3") == [(rows[1][2],)]
    ds.close()


@pytest.mark.parametrize("statement, star, named", [
    ("SELECT f FROM files f", True, set()),
    ("WITH w AS (SELECT size FROM files) SELECT w FROM w", True, {"size"}),
    ("SELECT count(*) FROM files JOIN documents USING (file_id)", False, {"file_id"}),
    ("SELECT count(*) FROM files NATURAL JOIN documents", True, set()),
    ("SELECT count(*) FROM files POSITIONAL JOIN documents", True, set()),
    ("SELECT a FROM files AS f(a)", True, {"a"}),
    ("SELECT * FROM files PIVOT (count(*) FOR class IN ('a'))", True, {"class"}),
    ("SELECT f.size, files.path FROM files f, files", False, {"size", "path"}),
    ("SELECT count(*) FROM files", False, set()),
])
def test_what_a_statement_uses_beyond_the_columns_it_names(statement, star, named):
    import duckdb

    conn = duckdb.connect()
    tree = json.loads(conn.execute("SELECT json_serialize_sql(?)", [statement]).fetchone()[0])["statements"][0]
    use = analyse(tree)
    assert use.star is star and named <= use.columns
