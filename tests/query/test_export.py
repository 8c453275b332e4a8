"""The files view out as Arrow and Parquet (round trips through pyarrow and DuckDB), and file lists back in."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from consumer import Consumer
from consumer.cli.main import main
from consumer.errors import InputError
from consumer.query.export import FILES_SCHEMA


@pytest.fixture
def ds(corpus_dir, tmp_path):
    out = Consumer(corpus_dir, cache_dir=tmp_path / "cache", style="concat", seqlen=64)
    yield out
    out.close()


def test_to_arrow_is_the_files_view_with_the_documented_schema(ds):
    table = ds.to_arrow()
    assert table.schema.equals(FILES_SCHEMA, check_metadata=True)
    assert table.to_pylist() == ds.sql("SELECT * FROM files ORDER BY file_id").as_dicts()
    assert table.column("path").to_pylist() == ds.files
    assert table.column("sha256").null_count == len(ds.files)  # content columns as stored: never computed here
    full = ds.to_arrow(content=True)
    assert full.column("sha256").to_pylist() == [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in ds.files]


def test_statement_results_as_arrow(ds):
    table = ds.to_arrow("SELECT class, count(*), sum(size) AS bytes FROM files GROUP BY class ORDER BY class")
    assert table.column_names == ["class", "count(*)", "bytes"]
    assert table.to_pylist() == ds.sql("SELECT class, count(*), sum(size) AS bytes FROM files GROUP BY class "
                                       "ORDER BY class").as_dicts()


def test_export_round_trips_through_pyarrow_and_duckdb(ds, tmp_path):
    out = ds.export_catalog(tmp_path / "files.parquet", content=True)
    back = pq.read_table(out)
    assert back.schema.equals(FILES_SCHEMA, check_metadata=True)
    assert back.equals(ds.to_arrow(content=True))
    conn = duckdb.connect()  # a user's own DuckDB, reading the file directly
    got = conn.execute(f"SELECT class, count(*), sum(size), min(entropy) >= 0 FROM read_parquet('{out}') "
                       "GROUP BY class ORDER BY class").fetchall()
    assert got == [(c, n, s, True) for c, n, s in
                   ds.sql("SELECT class, count(*), sum(size) FROM files GROUP BY class ORDER BY class")]
    # a file list filtered elsewhere comes back in: where() and from_catalog()
    picked = conn.sql(f"SELECT file_id, path FROM read_parquet('{out}') WHERE size > 50").to_arrow_table()
    sub = ds.where(picked)
    assert sub.files == [p for p in ds.files if Path(p).stat().st_size > 50]
    assert ds.where(picked.column("path").to_pylist()).files == sub.files
    conn.execute(f"COPY (SELECT path, class FROM read_parquet('{out}') WHERE class = 'dog') "
                 f"TO '{tmp_path / 'dogs.parquet'}' (FORMAT parquet)")
    dogs = Consumer.from_catalog(tmp_path / "dogs.parquet", cache_dir=tmp_path / "cache", style="concat", seqlen=64)
    assert dogs.classes == ["dog"] and dogs.files == [p for p in ds.files if "/dog/" in p]


def test_file_lists_that_do_not_fit_are_refused(ds, tmp_path):
    with pytest.raises(InputError, match="is not a file of this dataset"):
        ds.where(["/nowhere/x.bin"])
    with pytest.raises(InputError, match="the list says"):
        ds.where(pa.table({"file_id": [0], "path": [ds.files[1]]}))
    with pytest.raises(InputError, match="needs a 'path' column"):
        Consumer.from_catalog(pa.table({"x": [1]}))
    with pytest.raises(InputError, match="expected a Parquet file"):
        ds.where(tmp_path / "missing.parquet")


def test_cli_writes_parquet(corpus_dir, tmp_path, capsys):
    out = tmp_path / "out.parquet"
    assert main(["sql", corpus_dir, "SELECT path, size, mime FROM files WHERE size > 5 ORDER BY path",
                 "--format", "parquet", "-o", str(out), "--cache-dir", str(tmp_path / "c"), "--quiet"]) == 0
    table = pq.read_table(out)
    assert f"wrote {table.num_rows} rows to {out}" in capsys.readouterr().out
    assert table.column_names == ["path", "size", "mime"] and table.num_rows == sum(
        Path(p).stat().st_size > 5 for p in table.column("path").to_pylist()) > 0
    assert main(["sql", corpus_dir, "SELECT 1", "--format", "parquet", "--cache-dir", "off", "--quiet"]) == 2
