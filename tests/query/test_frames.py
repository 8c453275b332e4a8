"""ds.sql(...) results as pandas / pyarrow / polars dataframes, and the files view as a DataFrame."""

from __future__ import annotations

import sys

import pytest

from consumer import Consumer
from consumer.errors import MissingDependencyError, QueryError
from consumer.query.frames import files_table

FILES_COLUMNS = ["file_id", "path", "class", "class_id", "size", "mtime_ns", "extension", "description", "mime",
                 "header", "sha256", "tokens", "samples", "entropy", "printable", "zeros", "histogram"]
QUERY = "SELECT file_id, class, size, x'00ff' AS blob, NULL AS missing FROM files ORDER BY file_id"


@pytest.fixture
def ds(corpus_dir, tmp_path):
    out = Consumer(corpus_dir, style="concat", seqlen=64, cache_dir=tmp_path / "cache")
    yield out
    out.close()


def test_to_pandas(ds):
    pd = pytest.importorskip("pandas")
    rows = ds.sql(QUERY)
    df = rows.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == ["file_id", "class", "size", "blob", "missing"]
    assert len(df) == 17 and df["file_id"].tolist() == list(range(17))
    assert str(df["size"].dtype) == "int64" and df["size"].tolist() == [r[2] for r in rows]
    assert df["class"].tolist() == [r[1] for r in rows] and df["blob"].iloc[0] == b"\x00\xff"
    assert df["missing"].isna().all()
    empty = ds.sql("SELECT file_id, path FROM files WHERE size < 0").to_pandas()
    assert empty.shape == (0, 2) and list(empty.columns) == ["file_id", "path"]
    assert ds.sql("SELECT 1 AS v UNION ALL SELECT 'a'", dialect="sqlite").to_pandas()["v"].tolist() == [1, "a"]
    dup = ds.sql("SELECT 1 AS a, 2 AS a").to_pandas()
    assert dup.shape == (1, 2) and dup.values.tolist() == [[1, 2]]


def test_to_arrow(ds):
    pa = pytest.importorskip("pyarrow")
    rows = ds.sql(QUERY)
    table = rows.to_arrow()
    assert isinstance(table, pa.Table) and table.column_names == rows.columns and table.num_rows == 17
    assert table.schema.field("size").type == pa.int64() and table.schema.field("class").type == pa.string()
    assert table.schema.field("blob").type == pa.binary() and table.schema.field("missing").type == pa.null()
    assert table.to_pylist() == rows.as_dicts()
    empty = ds.sql("SELECT file_id FROM files WHERE size < 0").to_arrow()
    assert empty.num_rows == 0 and empty.column_names == ["file_id"]
    with pytest.raises(QueryError, match=r"to_arrow\(\): column 'v' mixes value types .*CAST\(v AS TEXT\)"):
        ds.sql("SELECT 1 AS v UNION ALL SELECT 'a'", dialect="sqlite").to_arrow()
    assert ds.sql("SELECT CAST(v AS TEXT) AS v FROM (SELECT 1 AS v UNION ALL SELECT 'a')").to_arrow()[
        "v"].to_pylist() == ["1", "a"]


def test_to_polars(ds):
    pl = pytest.importorskip("polars")
    rows = ds.sql(QUERY)
    df = rows.to_polars()
    assert isinstance(df, pl.DataFrame) and df.columns == rows.columns and df.height == 17
    assert df["size"].dtype == pl.Int64 and df["size"].to_list() == [r[2] for r in rows]
    assert df.rows() == list(rows)
    assert ds.sql("SELECT file_id FROM files WHERE size < 0").to_polars().shape == (0, 1)
    assert ds.sql("SELECT 1 AS v UNION ALL SELECT 'a'").to_polars()["v"].to_list() == ["1", "a"]
    with pytest.raises(QueryError, match=r"column names must be unique, got duplicate\(s\) \['a'\]; name them with AS"):
        ds.sql("SELECT 1 AS a, 2 AS a").to_polars()


def test_files_table(ds):
    pytest.importorskip("pandas")
    df = files_table(ds)
    assert list(df.columns) == FILES_COLUMNS and len(df) == len(ds.files)
    assert df["file_id"].tolist() == list(range(len(ds.files))) and df["path"].tolist() == ds.files
    assert df["class"].tolist() == [ds.classes[c] for c in ds.documents.doc_class]
    assert df["tokens"].tolist() == ds.documents.doc_len.tolist()
    assert df["samples"].sum() >= len(ds)  # concat windows may hold several files
    if hasattr(ds, "files_table"):  # the facade method, once wired
        assert ds.files_table().equals(df)


@pytest.mark.parametrize("method, package", [("to_pandas", "pandas"), ("to_arrow", "pyarrow"),
                                             ("to_polars", "polars")])
def test_missing_library_names_the_package(ds, monkeypatch, method, package):
    rows = ds.sql("SELECT file_id FROM files")
    monkeypatch.setitem(sys.modules, package, None)  # what an environment without the package looks like
    with pytest.raises(MissingDependencyError, match=rf"{method}\(\) needs the optional package '{package}'.*"
                                                     rf"pip install {package}") as e:
        getattr(rows, method)()
    assert isinstance(e.value, ImportError) and "consumer[dataframes]" in str(e.value)
    if package == "pandas":
        with pytest.raises(MissingDependencyError, match=r"files_table\(\) needs the optional package 'pandas'"):
            files_table(ds)
