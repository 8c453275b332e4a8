"""``consumer index|pack DIR --scheduler ADDR``: the same catalog and store as without it."""

from __future__ import annotations

import socket

import pytest

from consumer.catalog.catalog import Catalog
from consumer.cli.main import main
from consumer.errors import InputError
from consumer.scale.engines import connect

from ..conftest import write_corpus

pytest.importorskip("distributed")


def test_index_and_pack_with_a_scheduler_equal_the_local_commands(tmp_path, dask_client, capsys):
    root = tmp_path / "data"
    write_corpus(root, {"a": [10, 200, 3000, 0] * 20, "b": [5, 7000, 1] * 10})
    address = dask_client.scheduler.address
    opts = ["--seqlen", "64", "--quiet"]
    assert main(["index", str(root), "--cache-dir", str(tmp_path / "c1"), *opts]) == 0
    assert main(["index", str(root), "--cache-dir", str(tmp_path / "c2"), "--scheduler", address, *opts]) == 0
    out = capsys.readouterr().out
    assert out.count("index cache miss") == 2 and "libmagic calls 110" in out
    assert Catalog(str(tmp_path / "c1" / "catalog.sqlite")).dump() == \
        Catalog(str(tmp_path / "c2" / "catalog.sqlite")).dump()
    assert main(["pack", str(root), str(tmp_path / "local"), "--cache-dir", "off", *opts]) == 0
    assert main(["pack", str(root), str(tmp_path / "dask"), "--cache-dir", "off", "--scheduler", address, *opts]) == 0
    for suffix in (".bin", ".idx", ".consumer.npz", ".consumer.sums"):
        assert (tmp_path / f"dask{suffix}").read_bytes() == (tmp_path / f"local{suffix}").read_bytes()


def test_no_scheduler_at_the_address_names_the_option():
    with socket.socket() as s:  # a port on 127.0.0.1 that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match="--scheduler: no Dask scheduler answers at"):
        connect(f"tcp://127.0.0.1:{port}", "--scheduler", timeout=1)


def test_sql_and_info_with_a_scheduler_compute_the_columns_on_the_cluster(tmp_path, dask_client, capsys):
    root = tmp_path / "data"
    write_corpus(root, {"a": [10, 200, 3000, 0] * 20, "b": [5, 7000, 1] * 10})
    statement = "SELECT path, mime, description, sha256, entropy FROM files ORDER BY path"
    address = dask_client.scheduler.address
    outs = []
    for extra, cache in (([], "c1"), (["--scheduler", address], "c2")):
        assert main(["sql", str(root), statement, "--format", "json", "--quiet", "--cache-dir", str(tmp_path / cache),
                     *extra]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and '"sha256": null' not in outs[1] and '"mime": null' not in outs[1]
    assert Catalog(str(tmp_path / "c1" / "catalog.sqlite")).dump() == \
        Catalog(str(tmp_path / "c2" / "catalog.sqlite")).dump()
    assert main(["info", str(root), "--cache-dir", str(tmp_path / "c3"), "--scheduler", address]) == 0
    captured = capsys.readouterr()
    assert "content (entropy in bits/byte" in captured.out and "libmagic calls 220" in captured.err  # build + info


def test_complete_catalog_leaves_nothing_for_sql_to_compute(tmp_path, dask_client):
    from consumer import Consumer
    from consumer.scale.engines import resolve_engine
    from consumer.scale.scan import complete_catalog

    write_corpus(tmp_path / "data", {"a": [10, 200, 3000, 0] * 20, "b": [5, 7000, 1] * 10})
    ds = Consumer(str(tmp_path / "data"), cache_dir=str(tmp_path / "c"), metadata=None)
    assert complete_catalog(ds.catalog, ds.documents, resolve_engine(dask_client)) == {"libmagic": 220, "content": 110}
    calls = ds.catalog.magic_calls
    rows = ds.sql("SELECT count(*) FROM files WHERE mime IS NULL OR sha256 IS NULL OR entropy IS NULL")
    assert list(rows) == [(0,)] and ds.catalog.magic_calls == calls
    assert complete_catalog(ds.catalog, ds.documents, resolve_engine(dask_client)) == {"libmagic": 0, "content": 0}
