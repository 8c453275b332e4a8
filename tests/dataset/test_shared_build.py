"""Ranks of a torch.distributed job (real processes, gloo on 127.0.0.1) share one index: rank 0 lists the
bucket and builds, the other ranks open what it cached. Requests are counted by a proxy in front of moto's
S3 server, one proxy per rank."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import warnings
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer
from consumer.dataset.shared import build_once, fingerprint

from ..conftest import write_corpus
from ..helpers.remote_servers import faulty_proxy, moto_server

SIZES = {"cat": [0, 1, 5, 100, 3001], "dog": [6, 31, 64, 777], "eel": [2500, 11]}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's S3 server holding a corpus under s3://data/corpus/<class>/..., and the local copy."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    from consumer.sources.urls import open_filesystem

    local = tmp_path_factory.mktemp("local") / "corpus"
    write_corpus(local, SIZES, seed=9)
    with moto_server() as endpoint:
        fs, _ = open_filesystem("s3://data", {"endpoint_url": endpoint, "key": "test", "secret": "test"})
        fs.mkdir("data")
        for f in sorted(local.rglob("*")):
            if f.is_file():
                fs.pipe(f"data/corpus/{f.relative_to(local)}", f.read_bytes())
        yield endpoint, local


def _run_ranks(tmp_path: Path, endpoints: list[str], fps: str, cache_dirs: list[str], *extra: str) -> list[dict]:
    """Start one process per rank (gloo, file:// rendezvous), wait for all, return what each pickled."""
    init = f"file://{tmp_path / 'rendezvous'}"
    outs = [tmp_path / f"rank{r}.pkl" for r in range(len(endpoints))]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.helpers.rank_worker", str(r), str(len(endpoints)), init,
                               ep, fps, cache_dirs[r], str(outs[r]), *extra], cwd=ROOT, env=env,
                              stderr=subprocess.PIPE, text=True)
             for r, ep in enumerate(endpoints)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    (tmp_path / "rendezvous").unlink(missing_ok=True)
    return [pickle.loads(o.read_bytes()) for o in outs]


def _tokens(ds: Consumer) -> dict:
    return ds.fetch_numpy(np.arange(len(ds)), ["input_array", "class", "file_id", "offset"])


def _same(a: Consumer, b: Consumer, same_paths: bool = True) -> None:
    assert (a.files == b.files or not same_paths) and a.classes == b.classes and len(a) == len(b)
    x, y = _tokens(a), _tokens(b)
    assert all(np.array_equal(x[k], y[k]) for k in x)


def test_rank0_lists_and_builds_the_others_open_its_cache(s3, tmp_path):
    endpoint, local = s3
    with ExitStack() as stack:
        proxies = [stack.enter_context(faulty_proxy(endpoint)) for _ in range(2)]  # one per rank: requests per rank
        results = _run_ranks(tmp_path, [url for url, _ in proxies], "s3://data/corpus/",
                             [str(tmp_path / "shared")] * 2)
        counts = [(f.gets, f.gets_by_path.get("/data", 0)) for _, f in proxies]
        assert [r["error"] for r in results] == [None, None], results
        assert results[0]["info"]["cache"] == "miss" and results[0]["info"]["libmagic_calls"] == 11
        assert results[1]["info"]["cache"] == "shared" and results[1]["info"]["libmagic_calls"] == 0
        assert counts[0][1] >= 1 and counts[0][0] >= 12  # rank 0: the listing and every object's header range
        assert counts[1] == (0, 0)                        # rank 1: not one request to build its dataset
        assert not results[0]["warnings"] and not results[1]["warnings"]
        assert not list((tmp_path / "shared" / "ranks").iterdir())  # the hand-off file is removed
        first, second = results[0]["ds"], results[1]["ds"]      # unpickled here: they read through their proxies
        _same(first, second)
        _same(second, Consumer(str(local), style="concat", seqlen=64, cache_dir=False), same_paths=False)
        assert [second.documents.header_text(i) for i in range(len(second.files))] == \
            [first.documents.header_text(i) for i in range(len(first.files))]


def test_unshared_cache_dirs_are_detected_and_each_rank_builds(s3, tmp_path):
    endpoint, local = s3
    with ExitStack() as stack:
        proxies = [stack.enter_context(faulty_proxy(endpoint)) for _ in range(2)]
        results = _run_ranks(tmp_path, [url for url, _ in proxies], "s3://data/corpus/",
                             [str(tmp_path / "disk0"), str(tmp_path / "disk1")])  # as two machines' local disks
        assert [r["info"]["cache"] for r in results] == ["miss", "miss"]
        assert all(f.gets_by_path.get("/data", 0) >= 1 for _, f in proxies)  # each rank listed the bucket
        assert not results[0]["warnings"]
        assert len(results[1]["warnings"]) == 1 and "is not the one rank 0 wrote to" in results[1]["warnings"][0]
        _same(results[0]["ds"], results[1]["ds"])


def test_local_files_opt_out_and_errors_reach_every_rank(s3, tmp_path):
    _, local = s3
    shared = str(tmp_path / "cache")
    results = _run_ranks(tmp_path, ["-", "-"], str(local), [shared, shared])
    assert [r["info"]["cache"] for r in results] == ["miss", "shared"]
    assert results[1]["info"]["libmagic_calls"] == 0
    _same(results[0]["ds"], results[1]["ds"])
    again = _run_ranks(tmp_path, ["-", "-"], str(local), [shared, shared], "--no-share")  # each opens it itself
    assert [r["info"]["cache"] for r in again] == ["hit", "hit"]
    failed = _run_ranks(tmp_path, ["-", "-"], str(tmp_path / "missing"), [shared, shared])
    assert failed[0]["error"].startswith("InputError") and failed[1]["error"].startswith("ConsumerError")
    assert "rank 0 could not build" in failed[1]["error"] and "missing" in failed[1]["error"]


class _Group:
    """A one-process stand-in for a rank of a two-rank group: the broadcasts it would receive are scripted."""

    def __init__(self, rank: int, received: list) -> None:
        self.rank, self.size, self.received, self.barriers = rank, 2, list(received), 0

    def broadcast(self, obj):
        return obj if self.rank == 0 else self.received.pop(0)

    def barrier(self) -> None:
        self.barriers += 1


def test_build_once_protocol_without_torch(tmp_path):
    root = str(tmp_path)
    request = fingerprint({"cat": ["a"]}, {"style": "diff"})
    assert request == fingerprint({"cat": ["a"]}, {"style": "diff"}) != fingerprint({"cat": ["b"]}, {"style": "diff"})
    built = []
    zero = _Group(0, [])
    assert build_once(zero, request, root, lambda: built.append(0) or "made", lambda b: {"key": b},
                      lambda h: None) == "made"
    assert built == [0] and zero.barriers == 1 and not os.listdir(tmp_path / "ranks")
    # rank 1 asking for another dataset builds its own, concurrently with rank 0, and opens nothing
    other = _Group(1, ["another request", {"file": None}])
    assert build_once(other, request, root, lambda: "own", lambda b: None, lambda h: "opened") == "own"
    # rank 1 given a hand-off file that is not in its cache_dir: warns, builds its own
    lost = _Group(1, [request, {"file": "0123.json"}])
    with pytest.warns(Warning, match="rank 1: cache_dir .* is not the one rank 0 wrote to"):
        assert build_once(lost, request, root, lambda: "own", lambda b: None, lambda h: "opened") == "own"


class _ThreadGroup:
    """Two ranks over threads: broadcast hands rank 0's object to both, waits bounded (a hang fails the test)."""

    def __init__(self, rank: int, box: list, gate: threading.Barrier) -> None:
        self.rank, self.size, self.box, self.gate = rank, 2, box, gate

    def broadcast(self, obj):
        if self.rank == 0:
            self.box[0] = obj
        self.gate.wait()
        value = self.box[0]
        self.gate.wait()
        return value

    def barrier(self) -> None:
        self.gate.wait()


@pytest.mark.parametrize("where", ["handoff", "open"])
def test_a_failed_handoff_or_open_never_leaves_a_rank_waiting(tmp_path, where):
    """Rank 0 cannot write the hand-off file (a file where its folder goes), or rank 1 cannot open what it
    names: both ranks finish, each with a dataset, the one that could not share or open warning."""
    if where == "handoff":
        (tmp_path / "ranks").write_text("not a folder")
    box, gate, results = [None], threading.Barrier(2, timeout=20), {}

    def opener(handoff):
        raise OSError("the cache entry vanished")

    def run(rank):
        try:
            results[rank] = build_once(_ThreadGroup(rank, box, gate), "req", str(tmp_path),
                                       lambda: f"built by {rank}", lambda b: {"key": "k"},
                                       opener if where == "open" else (lambda h: "opened"))
        except BaseException as e:  # noqa: BLE001
            results[rank] = e

    with warnings.catch_warnings(record=True) as caught:  # process-wide (catch_warnings is not per thread)
        warnings.simplefilter("always")
        threads = [threading.Thread(target=run, args=(r,)) for r in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results[0] == "built by 0" and results[1] == "built by 1"
    why = "could not share its index" if where == "handoff" else "could not be opened"
    messages = [str(w.message) for w in caught]
    assert any(m.startswith("rank 1: ") and why in m for m in messages), messages
