"""The catalog as partitioned Parquet: written by the workers (one part per task, a manifest last), the same
rows as the SQLite catalog of a local build, read by DuckDB and by dask.dataframe; a 10^6-row catalog answers
a GROUP BY through DuckDB."""

from __future__ import annotations

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import FormatError, InputError
from consumer.scale.parquet import open_parquet_catalog, write_manifest, write_parquet_catalog, write_part

from ..conftest import write_corpus

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

SIZES = {"a": [10, 200, 3000, 0, 1] * 30, "b": [5, 70000, 1, 33] * 20, "c": [7] * 3}


def _sqlite_rows(tmp_path) -> list[tuple]:
    ds = Consumer(str(tmp_path / "data"), cache_dir=str(tmp_path / "cache"), metadata="file")
    ds.catalog.sync(ds.files, ds.documents.doc_size, ds.documents.doc_mtime, want=("description", "mime"))
    ds.catalog.ensure_content(ds.files, ds.documents.doc_size, ds.documents.doc_mtime)
    return [tuple(r[1:]) for r in sorted(ds.catalog.verified_rows())]  # path .. histogram


@pytest.mark.parametrize("on_dask", [True, False])
def test_the_parquet_catalog_holds_the_sqlite_catalog_rows(tmp_path, request, on_dask):
    write_corpus(tmp_path / "data", SIZES)
    engine = request.getfixturevalue("dask_client") if on_dask else None
    manifest = write_parquet_catalog(str(tmp_path / "data"), tmp_path / "pq", engine=engine, content=True)
    cat = open_parquet_catalog(tmp_path / "pq")
    assert cat.rows == manifest["rows"] == 233 and len(cat.parts) == len(manifest["parts"]) >= 1
    got = duckdb.sql(f"SELECT path, size, mtime_ns, extension, description, mime, sha256, entropy, printable, zeros, "
                     f"histogram FROM {cat.sql()} ORDER BY path").fetchall()
    assert got == _sqlite_rows(tmp_path)
    ids = duckdb.sql(f"SELECT file_id, class FROM {cat.sql()}").fetchall()
    assert sorted(i for i, _ in ids) == list(range(233))
    assert duckdb.sql(f"SELECT class, count(*) FROM {cat.sql()} GROUP BY class ORDER BY class").fetchall() == \
        [("a", 150), ("b", 80), ("c", 3)]


def test_dask_dataframe_reads_the_parts(tmp_path, dask_client):
    dd = pytest.importorskip("dask.dataframe")
    write_corpus(tmp_path / "data", SIZES)
    write_parquet_catalog(str(tmp_path / "data"), tmp_path / "pq", engine=dask_client, metadata=None)
    cat = open_parquet_catalog(tmp_path / "pq")
    frame = dd.read_parquet(list(cat.parts))
    sizes = frame.groupby("class")["size"].sum().compute()
    assert sizes.to_dict() == {"a": 30 * 3211, "b": 20 * 70039, "c": 21}
    assert frame["description"].isna().all().compute()


def test_a_million_row_catalog_answers_a_group_by_through_duckdb(tmp_path):
    rng = np.random.default_rng(3)
    parts, n, per = [], 1_000_000, 100_000
    classes = np.array([f"class{k}" for k in range(7)])
    mimes = np.array(["text/plain", "application/octet-stream", "image/png", "application/pdf"])
    all_cls, all_mime, all_size = [], [], []
    for k in range(n // per):
        cls, mime = classes[rng.integers(0, 7, per)], mimes[rng.integers(0, 4, per)]
        size = rng.integers(0, 10**6, per)
        name = f"part-{k:05d}.parquet"
        nbytes = write_part({"file_id": np.arange(k * per, (k + 1) * per), "path": [f"/d/{i}" for i in range(per)],
                             "class": cls.tolist(), "size": size, "mime": mime.tolist()}, str(tmp_path / name))
        parts.append((name, per, nbytes))
        all_cls.append(cls), all_mime.append(mime), all_size.append(size)
    write_manifest(tmp_path, parts)
    cat = open_parquet_catalog(tmp_path)
    assert cat.rows == n
    got = duckdb.sql(f"SELECT class, mime, count(*), sum(size) FROM {cat.sql()} GROUP BY class, mime").fetchall()
    cls, mime, size = np.concatenate(all_cls), np.concatenate(all_mime), np.concatenate(all_size)
    expected = {(c, m): (int(((cls == c) & (mime == m)).sum()), int(size[(cls == c) & (mime == m)].sum()))
                for c in classes for m in mimes}
    assert {(c, m): (k, int(s)) for c, m, k, s in got} == expected
    ds = cat.dataset()  # noqa: F841  (scanned by DuckDB by its name)
    assert duckdb.sql("SELECT count(*), sum(size) FROM ds").fetchall() == [(n, int(size.sum()))]


def test_an_unfinished_or_damaged_catalog_is_refused(tmp_path):
    write_corpus(tmp_path / "data", SIZES)
    (tmp_path / "pq").mkdir()
    (tmp_path / "pq" / "part-00000.parquet").write_bytes(b"half")
    with pytest.raises(FormatError, match="has no _manifest.json"):
        open_parquet_catalog(tmp_path / "pq")
    with pytest.raises(InputError, match="exists and is not empty"):
        write_parquet_catalog(str(tmp_path / "data"), tmp_path / "pq", metadata=None)
    write_parquet_catalog(str(tmp_path / "data"), tmp_path / "ok", metadata=None)
    part = sorted((tmp_path / "ok").glob("part-*.parquet"))[0]
    part.write_bytes(part.read_bytes()[:-10])
    with pytest.raises(FormatError, match="the manifest records"):
        open_parquet_catalog(tmp_path / "ok")


def test_a_failing_file_names_its_path_and_leaves_the_folder_empty(tmp_path, dask_client):
    files = write_corpus(tmp_path / "data", SIZES)
    fps = {"a": files["a"] + [str(tmp_path / "gone.dat")], "b": files["b"]}
    with pytest.raises(InputError, match="gone.dat"):
        write_parquet_catalog(fps, tmp_path / "pq", engine=dask_client, metadata=None)
    assert list((tmp_path / "pq").iterdir()) == []
