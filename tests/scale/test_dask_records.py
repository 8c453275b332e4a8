"""Documents inside containers indexed on a loopback Dask cluster: the same dataset as the local build (documents,
samples, classes, paths), and the workers' persistent entries reused by a later local build; Parquet and gzip
objects on a moto S3 server (127.0.0.1) read by the workers the same way."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from consumer import Consumer
from tests.helpers.remote_servers import s3_with_files
from tests.records.writers import write_jsonl, write_parquet, write_tar


def test_records_on_dask_equal_the_local_build(tmp_path, dask_client):
    for k in range(6):
        write_jsonl(tmp_path / "data" / f"s{k}.jsonl", [f"shard {k} doc {i} " * (i % 4) for i in range(40 + k)],
                    extra={"label": "ab"[k % 2]}) if (tmp_path / "data").mkdir(exist_ok=True) is None else None
    fps = str(tmp_path / "data" / "*.jsonl")
    opts = dict(documents="jsonl", class_field="label", seqlen=32, style="concat")
    local = Consumer(fps, cache_dir=tmp_path / "local", **opts)
    remote = Consumer(fps, cache_dir=tmp_path / "dask", engine=dask_client, **opts)
    assert remote.build_info["records"]["reused"] == 0 and remote.classes == local.classes
    prefixes = dask_client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert any(p.startswith("consumer-records-index") for p in prefixes), prefixes  # indexed on the workers
    assert list(remote.files) == list(local.files)
    ids = np.arange(len(local))
    assert np.array_equal(remote.fetch_numpy(ids, "supervised")["input_array"],
                          local.fetch_numpy(ids, "supervised")["input_array"])
    again = Consumer(fps, cache_dir=tmp_path / "dask", **opts)  # the workers' entries, reused here
    assert again.build_info["records"]["reused"] == 6
    in_memory = Consumer(fps, cache_dir=False, engine=dask_client, **opts)
    assert np.array_equal(in_memory.fetch_numpy(ids)["input_array"], local.fetch_numpy(ids)["input_array"])


def test_tar_on_dask(tmp_path, dask_client):
    (tmp_path / "t").mkdir()
    for k in range(3):
        write_tar(tmp_path / "t" / f"{k}.tar", [bytes([65 + k]) * (i + 1) for i in range(5)])
    local = Consumer(str(tmp_path / "t"), documents="tar", cache_dir=False, metadata=None)
    remote = Consumer(str(tmp_path / "t"), documents="tar", cache_dir=False, metadata=None, engine=dask_client)
    assert list(remote.files) == list(local.files)
    assert [remote.decode(remote.document_tokens(i)) for i in range(15)] == \
        [local.decode(local.document_tokens(i)) for i in range(15)]


def test_parquet_and_compressed_objects_on_dask(tmp_path, dask_client):
    pytest.importorskip("moto")
    local = tmp_path / "corpus"
    for k in range(3):
        (local / "pq").mkdir(parents=True, exist_ok=True)
        (local / "gz").mkdir(parents=True, exist_ok=True)
        docs = [f"shard {k} doc {i} " * (i % 5) for i in range(9 + k)]
        write_parquet(local / "pq" / f"{k}.parquet", [d.encode() for d in docs], row_group_size=4)
        write_jsonl(local / "plain.jsonl", docs)
        (local / "gz" / f"{k}.jsonl.gz").write_bytes(gzip.compress((local / "plain.jsonl").read_bytes()))
    with s3_with_files(local) as (so, _):
        for kind, folder in (("parquet", "pq"), ("jsonl", "gz")):
            opts = dict(documents=kind, seqlen=16, metadata=None)
            here = Consumer(str(local / folder), cache_dir=False, **opts)
            there = Consumer(f"s3://data/corpus/{folder}/", storage_options=so, cache_dir=tmp_path / kind,
                             engine=dask_client, **opts)
            assert there.build_info["records"]["documents"] == len(here.files) == 9 + 10 + 11
            assert [there.decode(there.document_tokens(i)) for i in range(len(there.files))] == \
                [here.decode(here.document_tokens(i)) for i in range(len(here.files))]
            again = Consumer(f"s3://data/corpus/{folder}/", storage_options=so, cache_dir=tmp_path / kind, **opts)
            assert again.build_info["records"]["reused"] == 3  # the workers' entries, keyed by ETag
