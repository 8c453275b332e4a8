"""The executor seam without a cluster: task sizing, engine resolution, and a build on a plain executor that
equals the local build (the same code path a Dask build takes)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.catalog.catalog import Catalog
from consumer.errors import InputError
from consumer.scale.engines import COSTS, Cost, ExecutorEngine, plan_tasks, resolve_engine

from ..conftest import write_corpus


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 5000), slots=st.integers(1, 64), per_file=st.floats(1e-7, 1e-2),
       per_byte=st.sampled_from([0.0, 1e-9, 1e-6]), max_files=st.integers(1, 3000), seed=st.integers(0, 2**16))
def test_tasks_cover_every_file_once_in_order(n, slots, per_file, per_byte, max_files, seed):
    sizes = np.random.default_rng(seed).integers(0, 10**7, size=n)
    tasks = plan_tasks(n, slots, Cost(per_file, per_byte), sizes, max_files=max_files)
    flat = [i for a, b in tasks for i in range(a, b)]
    assert flat == list(range(n))
    assert all(0 < b - a <= max_files for a, b in tasks)


def test_task_sizing_rule():
    # small work: one task of at least MIN_TASK_SECONDS, not one task per file
    assert plan_tasks(100, 3, COSTS["libmagic"]) == [(0, 100)]
    # large work: about 4 tasks per slot, each near total / (4 * slots)
    tasks = plan_tasks(200_000, 3, COSTS["libmagic"])
    assert len(tasks) == 12 and max(b - a for a, b in tasks) - min(b - a for a, b in tasks) <= 1
    # bytes count: one huge file gets a task of its own
    sizes = np.array([10] * 1000 + [10**12] + [10] * 1000)
    tasks = plan_tasks(len(sizes), 2, COSTS["content"], sizes)
    assert (1000, 1001) in tasks


@pytest.mark.parametrize("bad", ["spark", 3, object()])
def test_an_unknown_engine_names_the_argument(bad):
    with pytest.raises(InputError, match="engine must be None, 'dask'"):
        resolve_engine(bad)


def test_a_build_on_an_executor_equals_the_local_build(tmp_path):
    write_corpus(tmp_path / "data", {"a": [10, 200, 3000, 0] * 30, "b": [5, 70000, 1] * 20})
    local = Consumer(str(tmp_path / "data"), cache_dir=str(tmp_path / "c1"), seqlen=64)
    with ThreadPoolExecutor(2) as pool:
        engine = ExecutorEngine(pool)
        assert resolve_engine(pool).slots == 2
        remote = Consumer(str(tmp_path / "data"), cache_dir=str(tmp_path / "c2"), seqlen=64, engine=engine)
    assert Catalog(str(tmp_path / "c1" / "catalog.sqlite")).dump() == \
        Catalog(str(tmp_path / "c2" / "catalog.sqlite")).dump()
    assert local.build_info["key"] == remote.build_info["key"]
    assert remote.build_info["libmagic_calls"] == local.build_info["libmagic_calls"] == 180
    ids = np.arange(len(local))
    a, b = local.fetch_numpy(ids), remote.fetch_numpy(ids)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("fmt, suffixes", [
    ("megatron", (".bin", ".idx", ".consumer.npz", ".consumer.sums", ".consumer.json")),
    ("modalities", (".pbin", ".consumer.npz", ".consumer.sums", ".consumer.json"))])
def test_a_pack_on_an_executor_is_the_local_pack(tmp_path, fmt, suffixes):
    write_corpus(tmp_path / "data", {"a": [10, 200, 3000, 0] * 30, "b": [5, 70000, 1] * 20})
    ds = Consumer(str(tmp_path / "data"), cache_dir=False, seqlen=64)
    ds.pack(tmp_path / "local" / "p", fmt)
    with ThreadPoolExecutor(3) as pool:
        ds.pack(tmp_path / "pool" / "p", fmt, engine=pool, chunk_tokens=1000)
    for suffix in suffixes:
        a, b = (tmp_path / "local" / f"p{suffix}").read_bytes(), (tmp_path / "pool" / f"p{suffix}").read_bytes()
        assert a == b, suffix  # the sidecar too: it names the files by the prefix's name, "p" in both
    assert sorted(os.listdir(tmp_path / "pool")) == sorted(f"p{s}" for s in suffixes)
