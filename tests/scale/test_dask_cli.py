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
    for suffix in (".bin", ".idx", ".consumer.npz"):
        assert (tmp_path / f"dask{suffix}").read_bytes() == (tmp_path / f"local{suffix}").read_bytes()


def test_no_scheduler_at_the_address_names_the_option():
    with socket.socket() as s:  # a port on 127.0.0.1 that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match="--scheduler: no Dask scheduler answers at"):
        connect(f"tcp://127.0.0.1:{port}", "--scheduler", timeout=1)
