"""A build over object-storage URLs on a Dask cluster: the client lists the bucket once, the workers read the
byte ranges libmagic needs (moto's S3 API on 127.0.0.1); catalog rows and samples equal the local build's."""

from __future__ import annotations

import os

import numpy as np
import pytest

from consumer import Consumer
from consumer.catalog.catalog import Catalog

from ..conftest import write_corpus
from ..helpers.remote_servers import s3_with_files

pytest.importorskip("distributed")
pytest.importorskip("moto")

SIZES = {"cat": [0, 3, 40, 900, 5000] * 6, "dog": [7, 64, 2500] * 8}


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server holding a corpus under s3://data/corpus/<class>/..."""
    local = tmp_path_factory.mktemp("local") / "corpus"
    write_corpus(local, SIZES, seed=5)
    with s3_with_files(local) as (so, _):
        yield so


@pytest.mark.parametrize("metadata", ["file", "mime"])
def test_a_dask_build_over_s3_equals_the_local_build(s3, tmp_path, dask_client, metadata):
    here = Consumer("s3://data/corpus/", storage_options=s3, metadata=metadata, seqlen=128,
                    cache_dir=tmp_path / "c1")
    from distributed import get_task_stream

    with get_task_stream(dask_client) as stream:
        there = Consumer("s3://data/corpus/", storage_options=s3, metadata=metadata, seqlen=128,
                         cache_dir=tmp_path / "c2", engine=dask_client)
    assert any(str(t["key"]).startswith("consumer-libmagic-") for t in stream.data)  # the workers read the ranges
    assert there.build_info["libmagic_calls"] == here.build_info["libmagic_calls"] == 54
    assert there.build_info["key"] == here.build_info["key"]
    assert Catalog(os.path.join(tmp_path, "c1", "catalog.sqlite")).dump() == \
        Catalog(os.path.join(tmp_path, "c2", "catalog.sqlite")).dump()
    ids = np.arange(len(here))
    a, b = here.fetch_numpy(ids), there.fetch_numpy(ids)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_a_dask_pack_over_s3_is_the_pack_without_the_engine_byte_for_byte(s3, tmp_path, dask_client):
    """The workers read the objects by ranges (each task a part of the dataset's source) and write their parts;
    the store equals the one packed in this process from the same bucket."""
    ds = Consumer("s3://data/corpus/", storage_options=s3, seqlen=128, cache_dir=False, metadata=None)
    ds.pack(tmp_path / "here")
    from distributed import get_task_stream

    with get_task_stream(dask_client) as stream:
        ds.pack(tmp_path / "there", engine=dask_client)
    assert any(str(t["key"]).startswith("consumer-pack-") for t in stream.data)
    for suffix in (".bin", ".idx", ".consumer.npz", ".consumer.sums"):
        assert (tmp_path / f"there{suffix}").read_bytes() == (tmp_path / f"here{suffix}").read_bytes(), suffix
    back = Consumer.from_packed(tmp_path / "there", seqlen=128)
    ids = np.arange(len(back))
    assert np.array_equal(back.fetch_numpy(ids)["input_array"], ds.fetch_numpy(ids)["input_array"])
