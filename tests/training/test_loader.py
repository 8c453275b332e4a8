"""The training loader: same dicts as ds[...], exact resumption, epoch semantics, masks, ranks, torch.distributed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from consumer import Consumer, InputError
from consumer.training.loader import ConsumerLoader, make_loader

from ..conftest import write_corpus

FORK = {"multiprocessing_context": "fork"}  # datasets built on a cache miss hold a catalog connection
SIZES = {"cat": [0, 1, 2, 3, 4, 5, 7, 100, 301], "dog": [6, 8, 9, 31, 64, 200], "eel": [900, 11]}


@pytest.fixture(scope="module")
def ds(tmp_path_factory) -> Consumer:
    """A concat dataset of 131 samples over three classes of unequal size."""
    fps = write_corpus(tmp_path_factory.mktemp("loader") / "data", SIZES)
    d = Consumer(fps, style="concat", n_bytes=1, seqlen=16, seed=7)
    assert len(d) == 131
    return d


def _ids(batches) -> list[list[int]]:
    return [b["sample_id"].tolist() for b in batches]


def _stream(loader: ConsumerLoader, n_batches: int) -> list[list[int]]:
    """The next ``n_batches`` sample-id batches, crossing epochs as a training loop would."""
    out: list[list[int]] = []
    while len(out) < n_batches:
        for b in loader:
            out.append(b["sample_id"].tolist())
            if len(out) == n_batches:
                break
    return out


def _make(ds, workers: int, **kw) -> ConsumerLoader:
    extra = FORK if workers else {}
    return make_loader(ds, kw.pop("batch_size", 7), query=kw.pop("query", ["sample_id"]), num_workers=workers,
                       **extra, **kw)


def test_batches_are_the_dicts_of_ds_getitem(ds):
    loader = _make(ds, 0, query=["input_array", "class", "sample_id", "length"], batch_size=5)
    batches = list(loader)
    assert len(batches) == len(loader) == -(-len(ds) // 5)
    for b in batches:
        ref = ds[b["sample_id"].tolist(), ["input_array", "class", "sample_id", "length"]]
        assert b.keys() == ref.keys()
        for k in ref:
            assert b[k].dtype == torch.int64 and b[k].shape == ref[k].shape
            assert torch.equal(b[k], ref[k])
    assert batches[0]["input_array"].shape == (5, ds.seqlen)  # [B, L], never [B, 1, L]
    assert sorted(np.concatenate([b["sample_id"].numpy() for b in batches]).tolist()) == list(range(len(ds)))


def test_query_none_follows_the_mode_and_seed_none_is_ds_seed(ds, tmp_path):
    sub = Consumer(write_corpus(tmp_path / "d", {"a": [50, 60], "b": [70]}), style="concat", n_bytes=1, seqlen=8,
                   seed=3)
    sub.set_supervised_mode()
    b = next(iter(make_loader(sub, 4)))
    assert set(b) == {"input_array", "class"}
    first = _ids(make_loader(ds, 5, query=["sample_id"]))
    assert first == _ids(make_loader(ds, 5, query=["sample_id"], seed=ds.seed))
    assert first != _ids(make_loader(ds, 5, query=["sample_id"], seed=ds.seed + 1))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("drop_last", [False, True])
def test_epoch_semantics_and_exact_len(ds, workers, drop_last):
    loader = _make(ds, workers, batch_size=10, drop_last=drop_last)
    n = len(loader)
    assert n == (len(ds) // 10 if drop_last else -(-len(ds) // 10))
    epochs = []
    while loader.epoch < 3:
        assert loader.position == 0
        e = loader.epoch
        got = _ids(loader)
        assert len(got) == n and loader.epoch == e + 1
        epochs.append(got)
    assert epochs[0] != epochs[1] != epochs[2]
    flat = [i for b in epochs[0] for i in b]
    assert len(set(flat)) == len(flat) == (n * 10 if drop_last else len(ds))
    # set_epoch: the current epoch is a no-op; another epoch restarts from its beginning
    loader.set_epoch(1)
    assert _ids(loader) == epochs[1]
    loader.set_epoch(0)
    it = iter(loader)
    next(it)
    loader.set_epoch(0)  # no rewind
    assert loader.position == 1
    assert [b["sample_id"].tolist() for b in it] == epochs[0][1:]


def _resumed(ds, stops: list[int], workers: list[int], total: int, **kw) -> list[list[int]]:
    """Run ``total`` batches in segments ending at ``stops``; each segment is a new loader (maybe another
    num_workers) loaded from the JSON of the previous state."""
    out: list[list[int]] = []
    state = None
    for stop, w in zip([*stops, total], workers):
        loader = _make(ds, w, **kw)
        if state is not None:
            loader.load_state_dict(json.loads(json.dumps(state)))
            loader.set_epoch(loader.epoch)  # the usual call after a resume must not rewind
        out += _stream(loader, stop - len(out))
        state = loader.state_dict()
    return out


@pytest.mark.parametrize("workers", [(0, 2, 0), (2, 0, 2)])
def test_resume_with_workers_at_boundaries_and_twice_in_a_row(ds, workers):
    kw = {"batch_size": 9, "balance": None}
    n = len(_make(ds, 0, **kw))
    total = 3 * n
    reference = _stream(_make(ds, 0, **kw), total)
    for stops in ([n, n + 1], [3, 2 * n], [n - 1, n + 5]):  # on a boundary, mid-epoch, one batch before the end
        assert _resumed(ds, stops, list(workers), total, **kw) == reference, stops


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(batch_size=st.integers(1, 40), data=st.data(), drop_last=st.booleans(),
       balance=st.sampled_from([None, "uniform", 0.5, {"cat": 1.0, "eel": 2.0}]),
       world_size=st.sampled_from([1, 2, 3]), epoch_size=st.one_of(st.none(), st.integers(1, 300)),
       workers=st.lists(st.sampled_from([0, 0, 2]), min_size=3, max_size=3))
@pytest.mark.filterwarnings("ignore:num_workers=2 but an epoch has only")  # tiny epochs are drawn on purpose
def test_resume_property(ds, batch_size, data, drop_last, balance, world_size, epoch_size, workers):
    """Two stops (anywhere: mid-epoch, on a boundary, at 0, at the end) with JSON states in between,
    workers or not in each segment: the same stream as one uninterrupted run."""
    assume(not drop_last or (epoch_size or len(ds)) >= batch_size * world_size)
    rank = data.draw(st.integers(0, world_size - 1))
    kw = {"batch_size": batch_size, "drop_last": drop_last, "balance": balance, "rank": rank,
          "world_size": world_size, "epoch_size": epoch_size}
    n = len(_make(ds, 0, **kw))
    total = 2 * n + data.draw(st.integers(0, n))
    a = data.draw(st.sampled_from([0, n, 2 * n, total]) | st.integers(0, total))
    b = data.draw(st.sampled_from([x for x in (a, n, 2 * n, total) if x >= a]) | st.integers(a, total))
    reference = _stream(_make(ds, 0, **kw), total)
    assert _resumed(ds, [a, b], workers, total, **kw) == reference


def test_prefetched_batches_are_not_counted(ds):
    loader = _make(ds, 2, batch_size=4, prefetch_factor=4, persistent_workers=True)
    it = iter(loader)
    first = [next(it)["sample_id"].tolist() for _ in range(3)]
    state = loader.state_dict()
    assert (state["epoch"], state["position"]) == (0, 3)
    rest = _ids(it)
    again = _make(ds, 0, batch_size=4)
    again.load_state_dict(state)
    assert _ids(again) == rest
    assert first + rest == _ids(_make(ds, 0, batch_size=4))
    # persistent workers: a new pass after an abandoned one still starts at the next undelivered batch
    loader.set_epoch(5)
    it = iter(loader)
    head = [next(it)["sample_id"].tolist() for _ in range(2)]
    del it
    assert loader.position == 2
    assert head + _ids(loader) == _ids(_epoch(ds, 5, batch_size=4))


def _epoch(ds, e: int, **kw) -> ConsumerLoader:
    loader = _make(ds, 0, **kw)
    loader.set_epoch(e)
    return loader


def test_mlm_masks_per_epoch_and_bit_identical_after_resume(tmp_path):
    d = Consumer(write_corpus(tmp_path / "m", SIZES), style="concat", n_bytes=1, seqlen=32, seed=5)
    d.set_mlm_mode(mask_frequency=0.3)
    q = ["input_array", "labels", "sample_id"]
    full = []
    loader = make_loader(d, 6, query=q, shuffle=False)
    while loader.epoch < 2:
        full += list(loader)
    n = len(loader)
    # same samples in the same place each epoch (shuffle=False), different masks
    assert torch.equal(full[0]["sample_id"], full[n]["sample_id"])
    assert not torch.equal(full[0]["labels"], full[n]["labels"])
    # resumed runs (one with workers) give bit-identical masks
    first = make_loader(d, 6, query=q, shuffle=False)
    part = [b for _, b in zip(range(n + 2), _chain(first))]
    second = make_loader(d, 6, query=q, shuffle=False, num_workers=2, **FORK)
    second.load_state_dict(first.state_dict())
    part += [b for _, b in zip(range(2 * n - len(part)), _chain(second))]
    assert len(part) == len(full)
    for x, y in zip(full, part):
        for k in q:
            assert torch.equal(x[k], y[k])


def _chain(loader: ConsumerLoader):
    while True:
        yield from loader


def test_state_refuses_other_datasets_and_settings(ds, tmp_path):
    loader = _make(ds, 0, batch_size=8)
    next(iter(loader))
    state = loader.state_dict()
    assert json.loads(json.dumps(state)) == state and len(json.dumps(state)) < 2000
    with pytest.raises(ValueError, match="batch_size"):
        _make(ds, 0, batch_size=9).load_state_dict(state)
    with pytest.raises(InputError, match="balance"):
        _make(ds, 0, batch_size=8, balance="uniform").load_state_dict(state)
    with pytest.raises(InputError, match="query"):
        _make(ds, 0, batch_size=8, query=["sample_id", "class"]).load_state_dict(state)
    other = Consumer(write_corpus(tmp_path / "o", SIZES, seed=1), style="concat", n_bytes=1, seqlen=16, seed=7)
    with pytest.raises(InputError, match="does not belong to this loader"):
        _make(other, 0, batch_size=8).load_state_dict(state)
    # same files and loader settings, another dataset seed (other masks): refused too
    reseeded = Consumer(str(Path(ds.files[0]).parent.parent), style="concat", n_bytes=1, seqlen=16, seed=8)
    assert len(reseeded) == len(ds)
    with pytest.raises(InputError, match="dataset differs"):
        _make(reseeded, 0, batch_size=8, seed=ds.seed).load_state_dict(state)
    _make(ds, 0, batch_size=8, seed=ds.seed).load_state_dict(state)
    for bad in (None, {"kind": "other"}, {**state, "version": 9}, {**state, "position": 10**6},
                {**state, "epoch": -1}, {k: v for k, v in state.items() if k != "dataset"}):
        with pytest.raises(InputError):
            _make(ds, 0, batch_size=8).load_state_dict(bad)
    # more workers is not another setting
    _make(ds, 2, batch_size=8).load_state_dict(state)


def test_argument_errors(ds):
    with pytest.raises(InputError, match="shuffle"):
        make_loader(ds, 4, sampler=None, shuffle=True, batch_sampler=None)
    with pytest.raises(InputError, match="num_workers"):
        make_loader(ds, 4, num_workers=-1)
    with pytest.raises(InputError, match="rank and world_size"):
        make_loader(ds, 4, rank=1)
    with pytest.raises(InputError, match="rank must be in"):
        make_loader(ds, 4, rank=3, world_size=3)
    with pytest.raises(ValueError, match="unknown column"):
        make_loader(ds, 4, query=["nope"])
    with pytest.raises(InputError, match="epoch must be"):
        make_loader(ds, 4).set_epoch(-2)
    with pytest.warns(UserWarning, match="1 worker"):  # 131 samples: 1 batch for 2 workers
        make_loader(ds, 131, num_workers=2, **FORK)


def test_one_state_resumes_every_rank(ds):
    kw = {"batch_size": 4, "world_size": 3, "balance": "uniform"}
    r0 = _make(ds, 0, rank=0, **kw)
    _stream(r0, len(r0) + 2)
    state = r0.state_dict()
    r2 = _make(ds, 0, rank=2, **kw)
    r2.load_state_dict(state)
    reference = _make(ds, 0, rank=2, **kw)
    assert _stream(r2, 5) == _stream(reference, len(reference) + 7)[-5:]
    with pytest.raises(InputError, match="world_size"):
        _make(ds, 0, rank=0, batch_size=4, world_size=2, balance="uniform").load_state_dict(state)


@pytest.mark.parametrize("world_size", [2, 3])
def test_explicit_ranks_are_disjoint_and_cover(ds, world_size):
    per_rank = [[i for b in _ids(make_loader(ds, 6, query=["sample_id"], rank=r, world_size=world_size,
                                             balance=0.5, epoch_size=200)) for i in b]
                for r in range(world_size)]
    assert len({len(r) for r in per_rank}) == 1
    loaders = [make_loader(ds, 6, query=["sample_id"], rank=r, world_size=world_size, balance=0.5, epoch_size=200)
               for r in range(world_size)]
    order = loaders[0].plan.epoch_order(0)
    padded = np.resize(order, -(-200 // world_size) * world_size)
    assert sorted(i for r in per_rank for i in r) == sorted(padded.tolist())


_DDP_SCRIPT = textwrap.dedent("""
    import json, sys
    import torch.distributed as dist
    from consumer import Consumer
    from consumer.training.loader import make_loader
    rank, world, init, corpus, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    ds = Consumer(corpus, style="concat", n_bytes=1, seqlen=16, seed=7)
    loader = make_loader(ds, 5, query=["sample_id"], num_workers=1, multiprocessing_context="fork")
    epochs = []
    while loader.epoch < 2:
        epochs.append([b["sample_id"].tolist() for b in loader])
    import torch
    count = torch.tensor([len(epochs[0])])
    dist.all_reduce(count)  # would hang if the ranks disagreed on the number of batches
    with open(out, "w") as f:
        json.dump({"rank": dist.get_rank(), "world": dist.get_world_size(), "epochs": epochs,
                   "total": int(count), "len": len(loader)}, f)
    dist.destroy_process_group()
""")


def test_two_processes_with_torch_distributed(ds, tmp_path):
    corpus = str(Path(ds.files[0]).parent.parent)
    script = tmp_path / "ddp.py"
    script.write_text(_DDP_SCRIPT)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    init = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", init, corpus, str(tmp_path / f"r{r}.json")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in range(2)]
    for p in procs:
        _out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-3000:]
    res = [json.loads((tmp_path / f"r{r}.json").read_text()) for r in range(2)]
    assert [r["rank"] for r in res] == [0, 1] and all(r["world"] == 2 for r in res)
    for e in range(2):
        a, b = ([i for batch in r["epochs"][e] for i in batch] for r in res)
        assert len(res[0]["epochs"][e]) == len(res[1]["epochs"][e]) == res[0]["len"]
        assert res[0]["total"] == 2 * res[0]["len"]
        pad = 2 * len(a) - len(ds)
        assert len(a) == len(b) and 0 <= pad < 2
        assert set(a) | set(b) == set(range(len(ds)))  # together the ranks cover the epoch
        assert len(set(a) & set(b)) == pad  # disjoint except the one padding repeat
    assert res[0]["epochs"][0] != res[0]["epochs"][1]


@pytest.mark.parametrize("workers", [0, 2])
def test_only_the_latest_iterator_is_live(ds, workers):
    extra = {"persistent_workers": True} if workers else {"pin_memory": True}
    loader = _make(ds, workers, batch_size=10, **extra)
    reference = _ids(_make(ds, 0, batch_size=10))
    old = iter(loader)
    assert next(old)["sample_id"].tolist() == reference[0]
    new = iter(loader)  # continues after the delivered batch; the old iterator is finished
    assert next(new)["sample_id"].tolist() == reference[1]
    assert list(old) == []
    assert [b["sample_id"].tolist() for b in new] == reference[2:]
    assert (loader.epoch, loader.position) == (1, 0)


def test_spawn_workers_on_a_cached_dataset(ds):
    """The loader's own parts (dataset view, batch requests, collate) pickle: spawn workers give the same stream."""
    again = Consumer(str(Path(ds.files[0]).parent.parent), style="concat", n_bytes=1, seqlen=16, seed=7)
    assert again.build_info["cache"] == "hit"  # a dataset on a cache hit pickles (no catalog connection)
    q = ["sample_id", "input_array", "labels"]
    spawned = make_loader(again, 16, query=q, num_workers=1, multiprocessing_context="spawn")
    inline = make_loader(ds, 16, query=q)
    for x, y in zip(spawned, inline, strict=True):
        for k in q:
            assert torch.equal(x[k], y[k])


def test_importing_consumer_does_not_import_torch(tmp_path):
    """torch loads when a loader is made, not when consumer (or its loader and plan modules) is imported."""
    code = ("import sys, consumer, consumer.training.loader, consumer.training.plan; "
            "assert 'torch' not in sys.modules, 'torch imported'; print('ok')")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize("threads", [0, 1, 3])
def test_prefetch_threads_keep_the_stream_and_count_only_delivered_batches(ds, threads):
    """Background read-ahead (the default in process) changes nothing a training loop can see: the same
    batches, and a state taken mid-epoch that resumes at the next batch handed over, not at the last one read."""
    reference = [b["sample_id"].tolist() for b in make_loader(ds, 5, query=["sample_id"], prefetch_threads=0)]
    loader = make_loader(ds, 5, query=["sample_id"], prefetch_threads=threads)
    got = []
    for batch in loader:
        got.append(batch["sample_id"].tolist())
        if len(got) == 2:
            state = loader.state_dict()
            break
    again = make_loader(ds, 5, query=["sample_id"], prefetch_threads=threads)
    again.load_state_dict(state)
    got += [b["sample_id"].tolist() for b in again]
    assert got == reference and state["position"] == 2
