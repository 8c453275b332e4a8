"""Documents inside containers indexed on a loopback Dask cluster: the same dataset as the local build (documents,
samples, classes, paths), and the workers' persistent entries reused by a later local build."""

from __future__ import annotations

import numpy as np

from consumer import Consumer
from tests.records.writers import write_jsonl, write_tar


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
