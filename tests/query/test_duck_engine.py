"""The DuckDB engine: lazy libmagic and content columns, column detection from the parse tree, result names,
parameters, timeout, max_rows and Ctrl-C."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import QueryError
from consumer.query.statement import analyse, output_names

from ..conftest import interrupted_child, write_corpus

RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
FILES_COLUMNS = ["file_id", "path", "class", "class_id", "size", "mtime_ns", "extension", "description", "mime",
                 "header", "sha256", "tokens", "samples", "entropy", "printable", "zeros", "histogram"]


@pytest.fixture
def built(tmp_path, corpus_dir, magic_calls):
    ds = Consumer(corpus_dir, cache_dir=tmp_path / "cache", metadata=None, style="concat", seqlen=64)
    assert magic_calls == []  # metadata=None: the build runs no libmagic
    yield ds
    ds.close()


def _content_known(ds) -> int:
    docs = ds.documents
    return sum(r is not None for r in ds.catalog.content_rows(docs.paths, docs.doc_size, docs.doc_mtime))


def test_statements_naming_no_lazy_column_run_no_libmagic_and_read_no_file(built, magic_calls):
    n = len(built.files)
    assert built.sql("SELECT count(*) FROM files") == [(n,)]
    rows = built.sql("SELECT class, count(*), sum(size), max(tokens), sum(samples) FROM files GROUP BY class "
                     "ORDER BY class")
    assert [r[0] for r in rows] == built.classes and sum(r[1] for r in rows) == n
    assert built.sql("SELECT count(*) FROM files WHERE extension = 'dat' AND path LIKE '%/cat/%' "
                     "-- mime, description and sha256 in a comment") == [(len([p for p in built.files
                                                                                 if "/cat/" in p]),)]
    assert built.sql("SELECT 'mime' AS description, size AS sha256 FROM files LIMIT 1").columns == [
        "description", "sha256"]  # string literals and aliases name no column
    assert built.where("size > 10 AND class_id = 0").files
    assert magic_calls == []
    assert _content_known(built) == 0  # no file was read for content either


def test_each_libmagic_column_costs_one_call_per_file_when_first_named(built, magic_calls):
    n = len(built.files)
    mimes = built.sql("SELECT mime FROM files ORDER BY file_id")
    assert len(magic_calls) == n and sorted(magic_calls) == sorted(built.files)  # the column named, nothing else
    assert all(m and "/" in m for (m,) in mimes)
    assert all(d for (d,) in built.sql("SELECT description FROM files"))
    assert len(magic_calls) == 2 * n  # the other column: its own call per file
    built.sql("SELECT mime, description FROM files")
    assert len(magic_calls) == 2 * n
    again = Consumer(built.files and os.path.dirname(os.path.dirname(built.files[0])),
                     cache_dir=Path(built.catalog.path).parent, metadata=None, style="concat", seqlen=64)
    assert again.sql("SELECT count(*) FROM files WHERE description IS NULL OR mime IS NULL") == [(0,)]
    assert len(magic_calls) == 2 * n  # the catalog kept both
    again.close()


def test_star_shows_libmagic_columns_and_stored_content(built, magic_calls):
    rows = built.sql("SELECT * FROM files ORDER BY file_id")
    assert rows.columns == FILES_COLUMNS
    assert all(r["mime"] and r["description"] for r in rows.as_dicts())
    assert all(r["sha256"] is None and r["histogram"] is None for r in rows.as_dicts())
    assert _content_known(built) == 0
    inner = built.sql("SELECT count(*) FROM (SELECT * FROM files) WHERE entropy IS NOT NULL")
    assert inner == [(len(built.files),)] and _content_known(built) == len(built.files)


def test_content_columns_when_named(built, magic_calls):
    rows = built.sql("SELECT file_id, sha256, hist_total(histogram), size, hist_entropy(histogram) = entropy "
                     "FROM files ORDER BY file_id")
    for fid, sha, total, size, same in rows:
        import hashlib
        assert sha == hashlib.sha256(Path(built.files[fid]).read_bytes()).hexdigest()
        assert total == size and same
    assert magic_calls == []  # content needs no libmagic


def test_parse_tree_analysis():
    import duckdb
    conn = duckdb.connect()

    def use(sql):
        return analyse(json.loads(conn.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])["statements"][0])

    u = use("SELECT f.mime, \"Entropy\" FROM files f WHERE size > 1 -- sha256")
    assert {"mime", "entropy", "size"} <= u.columns and "sha256" not in u.columns and not u.star
    assert use("SELECT count(*) FROM (SELECT * FROM files)").star
    assert not use("SELECT count(*) FROM files").star
    assert use("SELECT COLUMNS('m.*') FROM files").star
    u = use("WITH w AS (SELECT path FROM files) SELECT * FROM w, range(3)")
    assert u.ctes == {"w"} and sorted(u.tables) == ["files", "w"] and u.table_functions == {"range"}
    assert use("SELECT 'entropy', description AS d FROM files").columns == {"description"}


@pytest.mark.parametrize("statement, names", [
    ("SELECT class, count(*), sum(size) FROM files GROUP BY class", ["class", "count(*)", "sum(size)"]),
    ("SELECT count(*) AS n, max(size) m FROM files", ["n", "m"]),
    ("SELECT f.size, 1 FROM files f", ["size", "1"]),
    ("SELECT * FROM files LIMIT 1", FILES_COLUMNS),
    ("SELECT count(*) FROM files UNION ALL SELECT 1", ["count(*)"]),
])
def test_result_columns_are_named_like_sqlite(built, statement, names):
    assert built.sql(statement).columns == names


def test_output_names_keep_duckdb_names_when_unsure():
    tree = {"node": {"type": "SELECT_NODE", "select_list": [{"class": "STAR"}]}}
    assert output_names(tree, "SELECT *", ["a", "b"]) == ["a", "b"]


def test_parameters(built):
    n_big = sum(os.path.getsize(p) > 100 for p in built.files)
    assert built.sql("SELECT count(*) FROM files WHERE size > ?", (100,)) == [(n_big,)]
    assert built.sql("SELECT count(*) FROM files WHERE size > ?", [np.int64(100)]) == [(n_big,)]
    assert built.sql("SELECT count(*) FROM files WHERE size > $s", {"s": np.uint16(100)}) == [(n_big,)]
    with pytest.raises(QueryError, match="SQL error in 'SELECT"):
        built.sql("SELECT ?, ?", (1,))


def test_timeout_stops_a_runaway_statement(built):
    with pytest.raises(QueryError, match=r"timeout of 0\.3 s") as info:
        built.sql(RUNAWAY, timeout=0.3)
    assert "WITH RECURSIVE c(x)" in str(info.value)
    assert built.sql("SELECT count(*) FROM files", timeout=30) == [(len(built.files),)]


def test_max_rows(built):
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
    with pytest.raises(QueryError, match="returned more than max_rows=25000 rows"):
        built.sql(endless, max_rows=25_000, timeout=60)
    assert len(built.sql("SELECT * FROM files", max_rows=len(built.files))) == len(built.files)
    assert built.sql("SELECT * FROM files WHERE size < 0", max_rows=0) == []


def test_where_on_duckdb_expressions(built):
    sub = built.where("regexp_matches(path, '/(cat|dog)/') AND size BETWEEN 10 AND 10000")
    assert sub.files == [p for p in built.files if ("/cat/" in p or "/dog/" in p)
                         and 10 <= os.path.getsize(p) <= 10000]


def test_dialect_sqlite_runs_the_old_engine(built):
    assert built.sql("SELECT 7 / 2") == [(3.5,)]
    assert built.sql("SELECT 7 / 2", dialect="sqlite") == [(3,)]
    with pytest.raises(QueryError, match="dialect must be 'duckdb' or 'sqlite'"):
        built.sql("SELECT 1", dialect="postgres")


def test_paths_that_are_not_utf8(tmp_path):
    root = tmp_path / "d"
    (root / "a").mkdir(parents=True)
    (root / "a" / "ok.txt").write_bytes(b"hello")
    bad = os.fsencode(str(root / "a")) + b"/caf\xe9.bin"
    with open(bad, "wb") as f:
        f.write(b"bytes")
    ds = Consumer(str(root), cache_dir=False, metadata=None)
    rows = ds.sql("SELECT path, extension, size FROM files ORDER BY file_id")
    assert sorted(r[1] for r in rows) == ["bin", "txt"] and any("\\xe9" in r[0] for r in rows)
    heads = ds.sql("SELECT extension, head(path, 2) FROM files ORDER BY extension")  # byte predicates find it too
    assert list(heads) == [("bin", b"by"), ("txt", b"he")]


_SIGINT_CHILD = textwrap.dedent(
    """
    import signal, sys, threading, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, sys.argv[1])
    from consumer import Consumer
    ds = Consumer(sys.argv[2], cache_dir=False, metadata=None)
    ds.sql("SELECT 1")

    main = threading.main_thread().ident

    def waiting_in_run():  # the main thread waits for the statement's worker inside DuckSQL._run
        frame = sys._current_frames().get(main)
        while frame is not None:
            if frame.f_code.co_name == "_run":
                return True
            frame = frame.f_back
        return False

    def announce():  # "running" once the statement runs in its worker and the main thread waits for it
        while not (waiting_in_run() and any(t.name == "consumer-sql" for t in threading.enumerate())):
            time.sleep(0.005)
        time.sleep(0.2)
        print("running", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    try:
        ds.sql(sys.argv[3])
    except KeyboardInterrupt as e:
        print("KeyboardInterrupt:", e, flush=True)
    print("usable:", ds.sql("SELECT count(*) FROM files")[0][0], flush=True)
    """
)


def test_ctrl_c_interrupts_a_runaway_statement(tmp_path):
    write_corpus(tmp_path / "data")
    out = interrupted_child(_SIGINT_CHILD, str(tmp_path / "data"), RUNAWAY)
    assert out.startswith("KeyboardInterrupt: SQL statement interrupted: 'WITH RECURSIVE"), out
    assert "usable: 17" in out


def test_lazy_columns_are_computed_only_for_the_rows_the_filter_keeps(built, magic_calls):
    cats = [p for p in built.files if "/cat/" in p]
    n = len(built.files)
    rows = built.sql("SELECT path, mime FROM files WHERE class = 'cat' AND mime IS NOT NULL ORDER BY file_id")
    assert [r[0] for r in rows] == cats
    assert sorted(set(magic_calls)) == sorted(cats) and len(magic_calls) == len(cats)  # only the cats, only mime
    # the other files are computed when a statement needs them, the cats are not computed again
    assert built.sql("SELECT count(*) FROM files WHERE mime IS NULL OR description IS NULL") == [(0,)]
    assert len(magic_calls) == 2 * n
    # content: only the small files of the filter are read
    small = [i for i, p in enumerate(built.files) if os.path.getsize(p) < 10]
    got = built.sql("SELECT file_id FROM files WHERE size < ? AND sha256 IS NOT NULL ORDER BY file_id", (10,))
    assert [r[0] for r in got] == small and _content_known(built) == n  # a parameter in the filter: every file
    assert magic_calls and len(magic_calls) == 2 * n


def test_partial_content_pass_reads_only_the_rows_kept(built):
    small = [i for i, p in enumerate(built.files) if os.path.getsize(p) < 10]
    got = built.sql("SELECT file_id, entropy FROM files WHERE size < 10 AND entropy >= 0 ORDER BY file_id")
    assert [r[0] for r in got] == small
    assert _content_known(built) == len(small)  # the other files were not read
    assert built.sql("SELECT count(*) FROM files WHERE entropy IS NULL") == [(0,)]  # now all of them
    assert _content_known(built) == len(built.files)
    # shapes the reduction does not cover compute every file: still right
    assert built.sql("SELECT count(*) FROM files a JOIN files b USING (file_id) WHERE a.zeros >= 0") == [
        (len(built.files),)]
