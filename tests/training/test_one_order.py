"""One batch order: the cursor (create_batches + get_next_batch / ds[None]) and the loader (ds.dataloader, in
process and with worker processes) serve the same samples in the same order, for every batch shape, balance and
rank; one versioned state resumes either route exactly; states saved by 0.2 still resume in their 0.2 order."""

from __future__ import annotations

import hashlib
import json
import pickle

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, InputError
from consumer.formats import batch_by_size
from consumer.training.plan import EpochPlan
from consumer.util.seeds import STREAMS, generator

from ..conftest import write_corpus

FORK = {"multiprocessing_context": "fork"}
SIZES = {"cat": [0, 1, 2, 3, 4, 5, 7, 100, 301, 57], "dog": [6, 8, 9, 31, 64, 200, 17], "eel": [900, 11, 250]}
QUERY = ["sample_id", "input_array"]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Consumer]:
    """One dataset per style over a small corpus of three unequal classes (lengths from 0 to 900 bytes)."""
    fps = write_corpus(tmp_path_factory.mktemp("one_order") / "data", SIZES)
    return {"concat": Consumer(fps, style="concat", n_bytes=1, seqlen=24, seed=3, cache_dir=False),
            "diff": Consumer(fps, style="diff", n_bytes=1, seqlen=48, long_files="windows", seed=3, cache_dir=False)}


def _cursor(ds: Consumer, n_batches: int, **options) -> list[list[int]]:
    """The next ``n_batches`` batches of the cursor made by ``create_batches(**options)``."""
    ds.create_batches(options.pop("batch_size"), **options)
    return [ds.get_next_batch(["sample_id"])["sample_id"].tolist() for _ in range(n_batches)]


def _loader(ds: Consumer, n_batches: int, workers: int = 0, **options) -> list[list[int]]:
    """The next ``n_batches`` batches of ``ds.dataloader(**options)``, crossing epochs as a training loop does."""
    loader = ds.dataloader(options.pop("batch_size"), query=["sample_id"], num_workers=workers,
                           **(FORK if workers else {}), **options)
    out: list[list[int]] = []
    while len(out) < n_batches:
        for batch in loader:
            out.append(batch["sample_id"].tolist())
            if len(out) == n_batches:
                break
    return out


shapes = st.one_of(
    st.fixed_dictionaries({"batch_size": st.integers(1, 9), "drop_last": st.booleans()}),
    st.fixed_dictionaries({"batch_size": st.one_of(st.none(), st.integers(1, 6)),
                           "max_tokens": st.sampled_from([48, 60, 100, 200]),
                           "required_batch_size_multiple": st.sampled_from([1, 2])}))
balances = st.sampled_from([None, "uniform", 0.5, {"cat": 1.0, "eel": 2.0}])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(style=st.sampled_from(["concat", "diff"]), shape=shapes, seed=st.integers(0, 2**32 - 1),
       shuffle=st.booleans(), balance=balances, world=st.sampled_from([(0, 1), (0, 2), (1, 2), (2, 3)]),
       epoch_size=st.sampled_from([None, 40]))
def test_the_cursor_and_the_loader_serve_one_order(datasets, style, shape, seed, shuffle, balance, world,
                                                   epoch_size):
    ds = datasets[style]
    options = {**shape, "seed": seed, "shuffle": shuffle, "rank": world[0], "world_size": world[1]}
    if "max_tokens" not in shape:
        options.update(balance=balance, epoch_size=epoch_size)
    n = 2 * len(ds.dataloader(options["batch_size"], **{k: v for k, v in options.items() if k != "batch_size"})) + 1
    via_cursor = _cursor(ds, n, **options)
    assert via_cursor == _loader(ds, n, **options)  # two epochs and one batch into the third
    plan_batches = ds.batches(0) + ds.batches(1)
    assert via_cursor[:len(plan_batches)] == [b.tolist() for b in plan_batches]


@pytest.mark.parametrize("options", [
    {"batch_size": 5},
    {"batch_size": 4, "balance": "uniform", "rank": 1, "world_size": 2, "drop_last": True},
    {"batch_size": None, "max_tokens": 100},
    {"batch_size": 3, "max_tokens": 150, "rank": 0, "world_size": 2},
])
def test_worker_processes_serve_the_same_order_and_tokens(datasets, options):
    ds = datasets["diff"]
    n = 2 * len(ds.dataloader(options["batch_size"], **{k: v for k, v in options.items() if k != "batch_size"})) + 1
    reference = _cursor(ds, n, **dict(options))
    assert _loader(ds, n, workers=2, **dict(options)) == reference
    # the rows too: a token-budget batch is only as wide as its longest sample, through the shared-memory ring
    ds.create_batches(options["batch_size"], **{k: v for k, v in options.items() if k != "batch_size"})
    loader = ds.dataloader(options["batch_size"], query=QUERY, num_workers=2, **FORK,
                           **{k: v for k, v in options.items() if k != "batch_size"})
    for batch in loader:
        mine = ds.get_next_batch(QUERY)
        assert batch["sample_id"].tolist() == mine["sample_id"].tolist()
        assert torch.equal(batch["input_array"], mine["input_array"])
        if "max_tokens" in options:
            width = int(ds.index.sample_tokens()[mine["sample_id"].numpy()].max())
            assert batch["input_array"].shape == (len(mine["sample_id"]), width)
            assert batch["input_array"].numel() <= options["max_tokens"]


@pytest.mark.parametrize("options", [{"batch_size": 4}, {"batch_size": None, "max_tokens": 120},
                                     {"batch_size": 3, "balance": 0.0, "epoch_size": 50}])
def test_a_saved_state_resumes_either_route_exactly(datasets, options, tmp_path):
    ds = pickle.loads(pickle.dumps(datasets["concat"]))  # its own copy: the masks are set below
    rest = {k: v for k, v in options.items() if k != "batch_size"}
    ds.create_batches(options["batch_size"], seed=11, **rest)
    ds.set_mlm_mode(0.3)
    per_epoch = len(ds.batches(0))
    uninterrupted = [ds.get_next_batch(["sample_id", "input_array", "labels"]) for _ in range(2 * per_epoch + 2)]
    stop = per_epoch + per_epoch // 2  # mid-epoch
    ds.create_batches(options["batch_size"], seed=11, **rest)
    for _ in range(stop):
        ds.get_next_batch(["sample_id"])
    saved = json.loads(json.dumps(ds.state_dict()))  # JSON-able, as a checkpoint keeps it
    assert saved["kind"] == "consumer.order" and saved["version"] == 2
    assert (saved["epoch"], saved["position"]) == (1, stop - per_epoch)
    again = pickle.loads(pickle.dumps(ds))  # a new dataset object (what another process would build)
    again.load_state_dict(saved)
    for expected in uninterrupted[stop:]:
        got = again.get_next_batch(["sample_id", "input_array", "labels"])
        assert all(torch.equal(got[k], expected[k]) for k in expected)
    # the loader takes the cursor's state, and the cursor takes the loader's
    loader = again.dataloader(options["batch_size"], seed=11, query=["sample_id"], **rest)
    loader.load_state_dict(saved)
    assert next(iter(loader))["sample_id"].tolist() == uninterrupted[stop]["sample_id"].tolist()
    fresh = pickle.loads(pickle.dumps(ds))
    fresh.load_state_dict(loader.state_dict())
    assert fresh.get_next_batch(["sample_id"])["sample_id"].tolist() == uninterrupted[stop + 1]["sample_id"].tolist()
    with pytest.raises(InputError, match=r"loader settings differ \(state, this loader\): \{'seed': \(11, 12\)"):
        again.dataloader(options["batch_size"], seed=12, query=["sample_id"], **rest).load_state_dict(saved)


def test_the_plan_draws_from_the_listed_order_stream(datasets):
    ds = datasets["diff"]
    plan = EpochPlan(sample_class=ds.index.sample_class, classes=ds.classes, batch_size=4, seed=9)
    for epoch in range(3):
        assert plan.epoch_order(epoch).tolist() == generator(9, "order", epoch).permutation(len(ds)).tolist()
    assert set(STREAMS) >= {"order", "epoch", "ties", "mask", "select"}
    with pytest.raises(InputError, match=r"stream must be one of \['order', 'epoch'\], got 'mask'"):
        EpochPlan(sample_class=ds.index.sample_class, classes=ds.classes, batch_size=4, seed=9, stream="mask")


def _batches_of_0_2(lengths: np.ndarray, seed: int, epoch: int, max_tokens: int) -> list[list[int]]:
    """Release 0.2's token-budget cursor, written out: length order with ties drawn once, batch_by_size, and
    the batches of epoch ``e`` in the order of ``SeedSequence([seed, e])``."""
    tie_break = generator(seed, "ties").permutation(lengths.size)
    order = tie_break[np.argsort(lengths[tie_break], kind="stable")]
    frozen = batch_by_size(order, lengths[order], max_tokens=max_tokens)
    perm = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch]))).permutation(len(frozen))
    return [frozen[i].tolist() for i in perm]


def test_states_saved_by_0_2_resume_in_their_own_order(datasets):
    ds = datasets["diff"]
    n, lengths = len(ds), ds.index.sample_tokens()
    samples = {"version": 1, "kind": "samples", "n_samples": n, "batch_size": 4, "drop_last": False, "seed": 5,
               "shuffle": True, "epoch": 1, "position": 2}
    ds.load_state_dict(samples)
    order_0_2 = np.random.Generator(np.random.PCG64(np.random.SeedSequence([5, 1]))).permutation(n)
    assert ds.get_next_batch(["sample_id"])["sample_id"].tolist() == order_0_2[8:12].tolist()
    tokens = {"version": 1, "kind": "tokens", "n_samples": n, "max_tokens": 150, "max_sentences": None,
              "required_batch_size_multiple": 1, "seed": 6, "shuffle": True, "epoch": 2, "position": 1}
    ds.load_state_dict(tokens)
    expected = _batches_of_0_2(lengths, 6, 2, 150)
    assert [ds.get_next_batch(["sample_id"])["sample_id"].tolist() for _ in range(len(expected) - 1)] == expected[1:]
    with pytest.raises(InputError, match="saved by a 0.2 batch cursor: load it with ds.load_state_dict"):
        ds.dataloader(4, seed=5).load_state_dict(samples)


def test_a_loader_state_saved_by_0_2_still_loads(datasets):
    ds = datasets["concat"]
    loader = ds.dataloader(6, query=["sample_id"], balance="uniform")
    settings_0_2 = {**loader.plan.settings(), "query": ["sample_id"]}
    del settings_0_2["rank"]
    described = ds.get_dict()
    dataset = {k: described[k] for k in ("data_mode", "style", "n_bytes", "seqlen", "long_files", "sampling",
                                         "metadata", "max_header_bytes", "seed", "mask", "classes", "class_to_id",
                                         "per_class", "total_files", "total_samples", "files_sha256")}
    fingerprint = hashlib.sha256(json.dumps({"dataset": dataset, "loader": settings_0_2}, sort_keys=True,
                                            default=str).encode()).hexdigest()
    state_0_2 = {"kind": "consumer.loader", "version": 1, "epoch": 2, "position": 3,
                 "batches_per_epoch": len(loader), "fingerprint": fingerprint, "settings": settings_0_2}
    loader.load_state_dict(state_0_2)
    assert next(iter(loader))["sample_id"].tolist() == loader.plan.batches(2)[3].tolist()
    with pytest.raises(InputError, match="state does not belong to this loader"):
        ds.dataloader(7, query=["sample_id"], balance="uniform").load_state_dict(state_0_2)


def test_token_budgets_refuse_balance_and_name_it(datasets):
    with pytest.raises(InputError, match=r"max_tokens=100 serves every sample once per epoch: it does not take "
                                         r"balance='uniform' or epoch_size=None"):
        datasets["diff"].dataloader(None, max_tokens=100, balance="uniform")
    with pytest.raises(InputError, match=r"batch_size must be an int >= 1, got None"):
        datasets["diff"].create_batches(None)


def test_a_dataset_with_a_cursor_is_freed_at_once(corpus_dir):
    """The cursor holds no reference back to its dataset: dropping the dataset closes its catalog at once, without
    waiting for the cyclic garbage collector."""
    import gc
    import weakref

    ds = Consumer(corpus_dir, metadata=None, seqlen=16, cache_dir=False)
    ds.create_batches(3)
    ds.state_dict()
    ref = weakref.ref(ds)
    gc.disable()
    try:
        del ds
        assert ref() is None
    finally:
        gc.enable()
