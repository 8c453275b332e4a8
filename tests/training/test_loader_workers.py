"""The loader's worker transport (a shared-memory ring): same batches as in process, batches that stay valid,
worker errors and deaths re-raised, and nothing left in /dev/shm after exceptions, Ctrl-C or kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from consumer import Consumer, FileChangedError, InputError, WorkerError
from consumer.training.loader import make_loader

from ..conftest import write_corpus
from ..helpers.batches import same_batches

FORK = {"multiprocessing_context": "fork"}
SIZES = {"cat": [0, 1, 2, 3, 4, 5, 7, 100, 301], "dog": [6, 8, 9, 31, 64, 200], "eel": [900, 11]}
COLUMNS = ["input_array", "labels", "attention_mask", "class", "sample_id"]
ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="module")
def ds(tmp_path_factory) -> Consumer:
    fps = write_corpus(tmp_path_factory.mktemp("ring") / "data", SIZES)
    return Consumer(fps, style="concat", n_bytes=1, seqlen=16, seed=7)


def _epochs(loader, epochs: int) -> list[dict]:
    out = []
    while loader.epoch < epochs:
        out.extend({k: v.clone() for k, v in b.items()} for b in loader)
    return out


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("query", [COLUMNS, "mlm"])
def test_ring_gives_the_batches_of_the_in_process_loader(ds, workers, query):
    reference = _epochs(make_loader(ds, 9, query=query, balance=0.5), 3)
    loader = make_loader(ds, 9, query=query, balance=0.5, num_workers=workers, **FORK)
    assert loader.transport == "ring"
    same_batches(_epochs(loader, 3), reference)
    torch_side = make_loader(ds, 9, query=query, balance=0.5, num_workers=workers, transport="torch", **FORK)
    same_batches(_epochs(torch_side, 3), reference)


def test_batches_kept_by_the_caller_are_never_overwritten(ds):
    """list(loader) holds every slot: the ring must not reuse one (it reads the rest in process)."""
    reference = [{k: v.clone() for k, v in b.items()} for b in make_loader(ds, 5, query=COLUMNS)]
    kept = list(make_loader(ds, 5, query=COLUMNS, num_workers=2, prefetch_factor=1, **FORK))
    same_batches(kept, reference)
    views = [b["input_array"][:, :4] for b in make_loader(ds, 5, query=COLUMNS, num_workers=1, **FORK)]
    assert all(torch.equal(v, r["input_array"][:, :4]) for v, r in zip(views, reference, strict=True))


def test_persistent_ring_resumes_and_follows_set_epoch(ds):
    loader = make_loader(ds, 6, query=COLUMNS, num_workers=2, persistent_workers=True, **FORK)
    it = iter(loader)
    head = [{k: v.clone() for k, v in next(it).items()} for _ in range(4)]
    state = loader.state_dict()
    pool = loader._pool
    loader.set_epoch(3)
    third = _epochs(loader, 4)
    assert loader._pool is pool and not pool.closed  # one pool for the loader's life
    again = make_loader(ds, 6, query=COLUMNS, num_workers=1, **FORK)
    again.load_state_dict(state)
    rest = [{k: v.clone() for k, v in b.items()} for b in again]
    same_batches(head + rest, [{k: v.clone() for k, v in b.items()} for b in make_loader(ds, 6, query=COLUMNS)])
    reference = make_loader(ds, 6, query=COLUMNS)
    reference.set_epoch(3)
    same_batches(third, _epochs(reference, 4))


def _init(wid: int) -> None:
    Path(os.environ["CONSUMER_TEST_INIT_DIR"], f"w{wid}").write_text(str(os.getpid()))


def test_worker_init_fn_runs_once_per_worker(ds, tmp_path, monkeypatch):
    monkeypatch.setenv("CONSUMER_TEST_INIT_DIR", str(tmp_path))
    loader = make_loader(ds, 8, query=COLUMNS, num_workers=2, worker_init_fn=_init, **FORK)
    n = sum(1 for _ in loader)
    assert n == len(loader)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w0", "w1"]
    assert len({p.read_text() for p in tmp_path.iterdir()}) == 2


def test_options_and_transport_errors(ds):
    with pytest.raises(InputError, match="transport"):
        make_loader(ds, 4, num_workers=1, transport="pipes")
    with pytest.raises(InputError, match=r"transport='ring'.*generator"):
        make_loader(ds, 4, num_workers=1, transport="ring", generator=torch.Generator())
    assert make_loader(ds, 4, num_workers=1, generator=torch.Generator()).transport == "torch"


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm on this platform")
def test_a_ring_larger_than_dev_shm_is_refused_before_any_worker_starts(ds):
    """The ring's segment is sparse: too big for /dev/shm, a worker would die of SIGBUS at its first write."""
    st = os.statvfs("/dev/shm")
    prefetch = st.f_bavail * st.f_frsize // (9 * 16) + 1  # 9 x 16 tokens a batch: at least 144 bytes a slot
    loader = make_loader(ds, 9, num_workers=1, prefetch_factor=prefetch, **FORK)
    with pytest.raises(InputError, match=r"prefetch_factor=\d+: the loader's ring of \d+ batches needs \d+ bytes of "
                                         r"shared memory, but /dev/shm has \d+ bytes free"):
        next(iter(loader))


def test_a_worker_exception_is_reraised_naming_the_worker(tmp_path):
    fps = write_corpus(tmp_path / "data", {"a": [50] * 12, "b": [60] * 12})
    d = Consumer(fps, style="diff", n_bytes=1, seqlen=64, seed=1)
    Path(fps["a"][3]).write_bytes(b"x" * 10)  # changed after the build: reading it must fail
    loader = make_loader(d, 4, query=COLUMNS, shuffle=False, num_workers=2, **FORK)
    with pytest.raises(FileChangedError, match=r"loader worker [01] \(pid \d+\) raised FileChangedError") as info:
        list(loader)
    assert "worker traceback" in str(info.value)
    assert loader._pool.closed  # the pool of the failed pass is shut down


def test_a_killed_worker_is_reported(ds):
    loader = make_loader(ds, 4, query=COLUMNS, num_workers=2, **FORK)
    it = iter(loader)
    next(it)
    pool = loader._pool
    os.kill(pool.procs[1].pid, signal.SIGKILL)
    pool.procs[1].join()
    with pytest.raises(WorkerError, match=r"loader worker 1 \(pid \d+\) exited unexpectedly with code -9"):
        for _ in it:
            pass
    assert pool.closed and not any(p.is_alive() for p in pool.procs)


_CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from consumer import Consumer
    from consumer.training.loader import make_loader


    def main():
        corpus, how, context = sys.argv[1], sys.argv[2], sys.argv[3]
        ds = Consumer(corpus, style="concat", n_bytes=1, seqlen=16, seed=7)
        loader = make_loader(ds, 4, query=["input_array", "class"], num_workers=2, multiprocessing_context=context,
                             epoch_size=10 ** 6)
        it = iter(loader)
        next(it)
        pool = loader._pool
        print(pool.shm.name, *[p.pid for p in pool.procs], flush=True)
        if how == "raise":
            try:
                for i, batch in enumerate(it):
                    if i == 3:
                        raise RuntimeError("the training step failed")
            except RuntimeError:
                pass
            del it, batch
            print("done", flush=True)
        elif how == "sigint":
            os.kill(os.getpid(), signal.SIGINT)
            for batch in it:
                pass
        else:  # wait to be killed
            for batch in it:
                time.sleep(0.001)



    if __name__ == "__main__":
        main()
""")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") >= 0


@pytest.mark.parametrize("how, context", [("raise", "fork"), ("sigint", "fork"), ("kill", "fork"),
                                          ("kill", "spawn")])
def test_nothing_left_in_dev_shm_and_no_orphan_workers(ds, tmp_path, how, context):
    corpus = str(Path(ds.files[0]).parent.parent)
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    env = {**os.environ, "PYTHONPATH": ROOT}
    p = subprocess.Popen([sys.executable, str(script), corpus, how, context], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    first = p.stdout.readline().split()
    assert len(first) == 3, p.stderr.read() if p.stderr else ""
    name, pids = first[0], [int(x) for x in first[1:]]
    if how == "kill":
        p.kill()
    out, err = p.communicate(timeout=120)
    if how == "raise":
        assert p.returncode == 0 and "done" in out, err
    elif how == "sigint":
        assert p.returncode != 0 and "KeyboardInterrupt" in err
    assert not os.path.exists(f"/dev/shm/{name}")
    for pid in pids:  # the workers see their pipe close and exit (polled for up to a minute)
        for _ in range(1200):
            if _gone(pid):
                break
            time.sleep(0.05)
        assert _gone(pid), f"worker {pid} outlived its parent ({how})"


def test_ring_layout_of_rows_and_one_dimensional_columns():
    from consumer.training.workers import ring_layout

    probe = {"input_array": np.zeros((1, 16), np.int64), "class": np.zeros(1, np.int64),
             "mask": np.zeros((1, 16), np.int32)}
    layout, slot = ring_layout(probe, 5)
    assert [(n, o, c) for n, _, o, c in layout] == [("input_array", 0, 640), ("mask", 640, 320)]
    assert slot == 640 + 320
