"""A build on a real Dask cluster (3 worker processes on 127.0.0.1) equals the local build: catalog rows, index
cache entry and every sample; a failing file is reported with its path as locally."""

from __future__ import annotations

import os

import numpy as np
import pytest

from consumer import Consumer
from consumer.catalog.catalog import Catalog
from consumer.dataset.cache import entry_contents, load_entry
from consumer.errors import InputError

from ..conftest import write_corpus

pytest.importorskip("distributed")

SIZES = {"a": [10, 200, 3000, 0, 1] * 40, "b": [5, 70000, 1, 33] * 30, "c": [7] * 3}


def _same_build(tmp_path, local: Consumer, other: Consumer, c1: str, c2: str) -> None:
    assert Catalog(os.path.join(c1, "catalog.sqlite")).dump() == Catalog(os.path.join(c2, "catalog.sqlite")).dump()
    key = local.build_info["key"]
    assert key and other.build_info["key"] == key
    (a_arrays, a_desc), (b_arrays, b_desc) = load_entry(c1, key), load_entry(c2, key)
    assert a_arrays.keys() == b_arrays.keys() and all(np.array_equal(a_arrays[k], b_arrays[k]) for k in a_arrays)
    assert entry_contents(a_desc) == entry_contents(b_desc)  # all but when and where each was written
    ids = np.arange(len(local))
    a, b = local.fetch_numpy(ids), other.fetch_numpy(ids)
    assert len(other) == len(local) and a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("metadata", ["file", "mime"])
def test_a_dask_build_equals_the_local_build(tmp_path, dask_client, metadata):
    write_corpus(tmp_path / "data", SIZES)
    c1, c2 = str(tmp_path / "c1"), str(tmp_path / "c2")
    local = Consumer(str(tmp_path / "data"), cache_dir=c1, seqlen=64, metadata=metadata)
    other = Consumer(str(tmp_path / "data"), cache_dir=c2, seqlen=64, metadata=metadata, engine=dask_client)
    assert other.build_info["cache"] == "miss" and other.build_info["libmagic_calls"] == 323
    _same_build(tmp_path, local, other, c1, c2)
    again = Consumer(str(tmp_path / "data"), cache_dir=c2, seqlen=64, metadata=metadata, engine="dask")
    assert again.build_info["cache"] == "hit" and again.build_info["libmagic_calls"] == 0


def test_a_dask_build_with_content_dedupe_equals_the_local_build(tmp_path, dask_client):
    files = write_corpus(tmp_path / "data", SIZES)
    (tmp_path / "data" / "c" / "copy.dat").write_bytes(open(files["b"][1], "rb").read())
    c1, c2 = str(tmp_path / "c1"), str(tmp_path / "c2")
    local = Consumer(str(tmp_path / "data"), cache_dir=c1, seqlen=64, dedupe="content")
    other = Consumer(str(tmp_path / "data"), cache_dir=c2, seqlen=64, dedupe="content", engine=dask_client)
    assert local.build_info["dedupe"] == other.build_info["dedupe"] and len(other.files) < 324
    _same_build(tmp_path, local, other, c1, c2)


@pytest.mark.parametrize("fault", ["fifo", "unreadable"])
def test_a_failing_file_is_reported_with_its_path_as_locally(tmp_path, dask_client, fault):
    write_corpus(tmp_path / "data", SIZES)
    bad = tmp_path / "data" / "b" / "b_007.dat"
    if fault == "fifo":  # refused by the stat pass
        bad.unlink()
        os.mkfifo(bad)
    else:  # refused by the probe pass (an open per file)
        bad.chmod(0)
        if os.access(bad, os.R_OK):
            pytest.skip("running as root: permissions are not enforced")
    with pytest.raises(InputError) as local:
        Consumer(str(tmp_path / "data"), cache_dir=False)
    with pytest.raises(InputError) as remote:
        Consumer(str(tmp_path / "data"), cache_dir=False, engine=dask_client)
    assert str(remote.value) == str(local.value) and str(bad) in str(remote.value)


def test_a_missing_file_is_reported_with_its_path_as_locally(tmp_path, dask_client):
    files = write_corpus(tmp_path / "data", SIZES)
    fps = {"a": files["a"] + [str(tmp_path / "gone.dat")], "b": files["b"]}
    with pytest.raises(InputError) as local:
        Consumer(fps, cache_dir=False)
    with pytest.raises(InputError) as remote:
        Consumer(fps, cache_dir=False, engine=dask_client)
    assert str(remote.value) == str(local.value) and "gone.dat" in str(remote.value)


def test_the_test_cluster_listens_on_loopback_only(dask_client):
    psutil = pytest.importorskip("psutil")
    pids = {os.getpid(), *dask_client.run(os.getpid).values()}
    procs = [psutil.Process(pid) for pid in pids]
    connections = [c for p in procs for c in getattr(p, "net_connections", p.connections)(kind="inet")]  # psutil < 6
    listening = [c.laddr for c in connections if c.status == psutil.CONN_LISTEN]
    assert len(listening) >= len(pids)  # the scheduler (and nannies) here, every worker in its process
    assert {a.ip for a in listening} == {"127.0.0.1"}, listening
