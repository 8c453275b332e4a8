"""Faults on a real cluster (3 worker processes on 127.0.0.1): a worker process killed (SIGKILL) while it runs
a task of a build or of a pack of a 20,000-file corpus; the scheduler reruns its tasks and the output is the
local one, with no partial artefact; the same when a worker leaves the cluster for good (it shrinks to 2) while
pack tasks run. Ctrl-C while results are consumed cancels the futures."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from consumer import Consumer
from consumer.catalog.catalog import Catalog
from consumer.dataset.cache import load_entry
from consumer.scale.engines import DaskEngine

pytest.importorskip("distributed")

N_FILES = 20_000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """20,000 small files in 4 classes (text-like and binary), its local build (cached) and local packs."""
    root = tmp_path_factory.mktemp("faults")
    rng = np.random.default_rng(7)
    sizes = rng.integers(0, 600, size=N_FILES)
    for i, n in enumerate(sizes.tolist()):
        folder = root / "data" / f"class{i % 4}" / f"d{i // 1000:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        data = rng.integers(32, 127, size=n, dtype=np.uint8) if i % 3 else rng.integers(0, 256, size=n, dtype=np.uint8)
        (folder / f"f{i:05d}.txt").write_bytes(data.tobytes())
    local = Consumer(str(root / "data"), cache_dir=str(root / "local"), seqlen=128)
    local.pack(root / "packed" / "local")
    local.pack(root / "packed" / "local_pbin", "modalities")
    return root, local


def _kill_a_worker_running(client, label: str, done: threading.Event, killed: list) -> None:
    """Wait until a worker runs a task whose key starts with ``consumer-<label>``, then SIGKILL its process."""
    pids = client.run(os.getpid)
    while not done.is_set():
        for worker, keys in client.processing().items():
            if any(str(k).startswith(f"consumer-{label}-") for k in keys) and worker in pids:
                time.sleep(0.05)  # well inside the task (each runs for ~0.5 s)
                os.kill(pids[worker], signal.SIGKILL)
                killed.append(pids[worker])
                return
        time.sleep(0.005)


def _while_killing(client, label: str, work):
    done, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_a_worker_running, args=(client, label, done, killed), daemon=True)
    killer.start()
    try:
        result = work()
    finally:
        done.set()
        killer.join(30)
    assert len(killed) == 1, f"no worker was running a {label} task to kill"
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)  # the process is gone
    return result


def test_a_worker_killed_during_a_build_changes_nothing(corpus, full_cluster, tmp_path):
    root, local = corpus
    cache = str(tmp_path / "cache")
    other = _while_killing(full_cluster, "libmagic", lambda: Consumer(str(root / "data"), cache_dir=cache, seqlen=128,
                                                                      engine=full_cluster))
    assert other.build_info["libmagic_calls"] == N_FILES == len(other.files)
    assert Catalog(os.path.join(cache, "catalog.sqlite")).dump() == \
        Catalog(str(root / "local" / "catalog.sqlite")).dump()
    key = local.build_info["key"]
    assert other.build_info["key"] == key
    (a, _), (b, _) = load_entry(str(root / "local"), key), load_entry(cache, key)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    ids = np.arange(len(local))
    x, y = local.fetch_numpy(ids), other.fetch_numpy(ids)
    assert all(np.array_equal(x[k], y[k]) for k in x)


@pytest.mark.parametrize("fmt, name, suffixes", [
    ("megatron", "local", (".bin", ".idx", ".consumer.npz", ".consumer.sums")),
    ("modalities", "local_pbin", (".pbin", ".consumer.npz", ".consumer.sums"))])
def test_a_worker_killed_during_a_pack_changes_nothing(corpus, full_cluster, tmp_path, fmt, name, suffixes):
    root, local = corpus
    # small chunks: many reads per task, so the tasks run long enough to be caught running
    _while_killing(full_cluster, "pack", lambda: local.pack(tmp_path / "dask", fmt, engine=full_cluster,
                                                            chunk_tokens=4096))
    for suffix in suffixes:
        assert (tmp_path / f"dask{suffix}").read_bytes() == (root / "packed" / f"{name}{suffix}").read_bytes(), suffix
    assert sorted(os.listdir(tmp_path)) == sorted(f"dask{s}" for s in (*suffixes, ".consumer.json"))


def test_ctrl_c_while_consuming_results_cancels_the_futures(full_cluster):
    engine = DaskEngine(full_cluster)
    results = engine.map(time.sleep, [(0.0,)] + [(2.0,)] * 6, label="sleep")
    assert next(results) is None
    with pytest.raises(KeyboardInterrupt):
        results.throw(KeyboardInterrupt)
    deadline = time.monotonic() + 10
    while any(str(k).startswith("consumer-sleep-") for keys in full_cluster.processing().values() for k in keys):
        assert time.monotonic() < deadline, "the tasks still run after Ctrl-C"
        time.sleep(0.05)
    while [k for k in full_cluster.who_has() if str(k).startswith("consumer-sleep-")]:  # releases are messages
        assert time.monotonic() < deadline, "results of the cancelled tasks are still held"
        time.sleep(0.05)


def test_a_worker_lost_for_good_during_a_pack_changes_nothing(corpus, full_cluster, tmp_path):
    """The cluster shrinks to 2 workers (one closed with its nanny, not restarted) while pack tasks run."""
    root, local = corpus
    cluster = full_cluster.cluster
    done, shrunk = threading.Event(), []

    def shrink() -> None:
        while not done.is_set():
            if any(str(k).startswith("consumer-pack-") for keys in full_cluster.processing().values() for k in keys):
                cluster.scale(2)
                shrunk.append(len(full_cluster.nthreads()))
                return
            time.sleep(0.005)

    shrinker = threading.Thread(target=shrink, daemon=True)
    shrinker.start()
    try:
        local.pack(tmp_path / "dask", "modalities", engine=full_cluster, chunk_tokens=4096)
        deadline = time.monotonic() + 30
        while len(full_cluster.nthreads()) != 2 and time.monotonic() < deadline:  # the worker really went
            time.sleep(0.05)
        workers_after = len(full_cluster.nthreads())
    finally:
        done.set()
        shrinker.join(30)
        cluster.scale(3)  # the next tests get their 3 workers back
        full_cluster.wait_for_workers(3, timeout=60)
    assert shrunk and workers_after == 2, "the cluster did not lose a worker while pack tasks ran"
    for suffix in (".pbin", ".consumer.npz", ".consumer.sums"):
        assert (tmp_path / f"dask{suffix}").read_bytes() == (root / "packed" / f"local_pbin{suffix}").read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["dask.consumer.json", "dask.consumer.npz", "dask.consumer.sums",
                                            "dask.pbin"]
