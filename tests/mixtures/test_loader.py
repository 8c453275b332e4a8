"""The batch order over a mixture: the loader draws parts by their weights (exact per-epoch counts), with workers as
in process, over ranks with equal batch counts, resumed exactly from a state; the cursor (``create_batches``,
``get_next_batch``, ``m[None]``) walks the same order, and a mixture pickles."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

from consumer import InputError
from consumer.mixtures import Mixture, mix

from ..helpers.batches import same_batches

FORK = {"multiprocessing_context": "fork"}
WEIGHTS = {"raw": 3, "text": 1}
COLUMNS = ["input_array", "class", "sample_id", "labels", "attention_mask"]


@pytest.fixture(scope="module")
def m(parts) -> Mixture:
    return mix(parts, weights=WEIGHTS, seed=5)


def _epoch(loader) -> list[dict]:
    start = loader.epoch
    out = []
    while loader.epoch == start:
        out.extend({k: v.clone() for k, v in b.items()} for b in loader)
    return out


@pytest.mark.parametrize("epoch_size", [None, 400])
def test_the_loader_draws_the_parts_by_their_weights(m, epoch_size):
    loader = m.dataloader(8, query=["input_array", "class", "sample_id"], epoch_size=epoch_size)
    for _ in range(2):
        batches = _epoch(loader)
        cls = torch.cat([b["class"] for b in batches]).numpy()
        n = cls.size
        assert n == len(loader) * 8 >= (epoch_size or len(m))  # full batches: an epoch is ceil(epoch_size / 8) steps
        counts = np.bincount(cls, minlength=3)
        assert counts[0] in (math.floor(n * 0.75), math.ceil(n * 0.75))
        assert counts[1] in (math.floor(n * 0.25), math.ceil(n * 0.25)) and counts[2] == 0
        ids = torch.cat([b["sample_id"] for b in batches]).numpy()
        assert (m.index.sample_class[ids] == cls).all()
        for b in batches:
            rows = m.fetch_numpy(b["sample_id"].numpy())["input_array"]
            assert np.array_equal(b["input_array"].numpy(), rows)


def test_natural_weights_serve_every_sample_once_per_epoch(parts):
    m = mix(parts)  # batches of 1: the epoch's len(m) samples take every part's samples once
    ids = torch.cat([b["sample_id"] for b in _epoch(m.dataloader(1, query=["sample_id"]))]).numpy()
    assert sorted(ids.tolist()) == list(range(len(m)))


def test_two_workers_give_the_batches_of_none(m):
    reference = _epoch(m.dataloader(6, query=COLUMNS))
    same_batches(_epoch(m.dataloader(6, query=COLUMNS, num_workers=2, **FORK)), reference)
    cu = ["causal", "cu_seqlens", "max_seqlen", "class"]
    same_batches(_epoch(m.dataloader(6, query=cu, num_workers=2, **FORK)), _epoch(m.dataloader(6, query=cu)))


@pytest.mark.parametrize("weights", [None, WEIGHTS])
def test_two_ranks_have_equal_batch_counts_and_disjoint_shares(parts, weights):
    m = mix(parts, weights=weights, seed=5)
    loaders = [m.dataloader(4, query=["sample_id", "class"], rank=r, world_size=2) for r in range(2)]
    assert len(loaders[0]) == len(loaders[1])
    epochs = [_epoch(loader) for loader in loaders]
    assert len(epochs[0]) == len(epochs[1]) == len(loaders[0])
    ids = [torch.cat([b["sample_id"] for b in e]).numpy() for e in epochs]
    single = torch.cat([b["sample_id"] for b in _epoch(m.dataloader(8, query=["sample_id"]))]).numpy()
    assert sorted(np.concatenate(ids).tolist()) == sorted(single.tolist())  # the steps of 8, dealt over 2 ranks


def test_a_state_resumes_the_loader_exactly(m):
    full = m.dataloader(4, query=COLUMNS)
    reference = _epoch(full) + _epoch(full)
    first = m.dataloader(4, query=COLUMNS)
    taken = []
    for b in first:
        taken.append({k: v.clone() for k, v in b.items()})
        if len(taken) == 5:
            break
    state = first.state_dict()
    resumed = m.dataloader(4, query=COLUMNS, num_workers=2, **FORK)
    resumed.load_state_dict(state)
    rest = _epoch(resumed) + _epoch(resumed)
    same_batches(taken + rest, reference)
    other = mix({"raw": m.parts["raw"], "text": m.parts["text"]}, weights=WEIGHTS, seed=5).dataloader(4, query=COLUMNS)
    with pytest.raises(InputError, match="does not belong"):
        other.load_state_dict(state)


@pytest.mark.parametrize("weights", [WEIGHTS, [(0, {"raw": 1}), (3, {"text": 1, "code": 2})]])
@pytest.mark.parametrize("ranks", [None, (1, 2)])
def test_the_cursor_serves_the_loaders_order_and_states_cross(parts, weights, ranks):
    where = {} if ranks is None else {"rank": ranks[0], "world_size": ranks[1]}
    a = mix(parts, weights=weights, seed=5)
    a.create_batches(4, epoch_size=24, **where)
    loader = a.dataloader(4, query=["sample_id"], epoch_size=24, **where)
    expected = [b["sample_id"] for b in _epoch(loader) + _epoch(loader)]
    assert [b.tolist() for b in a.batches(0)] == [e.tolist() for e in expected[:len(loader)]]
    served = [a.get_next_batch(["sample_id"])["sample_id"] for _ in range(len(expected))]
    assert [s.tolist() for s in served] == [e.tolist() for e in expected]  # across the epoch boundary too
    state = a.state_dict()
    b = mix(parts, weights=weights, seed=5)
    b.load_state_dict(state)  # a cursor without batches takes the state's plan
    resumed = a.dataloader(4, query=["sample_id"], epoch_size=24, **where)
    resumed.load_state_dict(state)  # the cursor's state resumes a loader
    for got in resumed:
        assert torch.equal(a.get_next_batch(["sample_id"])["sample_id"], got["sample_id"])
        assert torch.equal(b[None, ["sample_id"]]["sample_id"], got["sample_id"])
    loader_state = resumed.state_dict()
    c = mix(parts, weights=weights, seed=5)
    c.load_state_dict(loader_state)  # and a loader's resumes the cursor
    assert torch.equal(c[None, ["sample_id"]]["sample_id"], next(iter(resumed))["sample_id"])
    with pytest.raises(InputError, match="does not belong"):
        mix({"raw": parts["raw"], "text": parts["text"]}, weights=WEIGHTS, seed=5).load_state_dict(state)
    with pytest.raises(InputError, match="batch_size"):
        a.create_batches(5, epoch_size=24, **where)
        a.load_state_dict(state)


def test_the_cursor_ends_where_stop_ends_the_order(parts):
    m = mix(parts, weights={"code": 1}, seed=1)
    m.create_batches(4, exhausted="stop")
    end = m._cursor.plan.plan.end
    assert end == m.samples_per_class()["code"] // 4
    for _ in range(end):
        m.get_next_batch(["class"])
    with pytest.raises(InputError, match=f"ended at step {end}"):
        m.get_next_batch()
    with pytest.raises(InputError, match="balance"):
        m.create_batches(4, balance={"code": 1})


def test_m_none_without_batches_follows_the_weights(parts):
    m = mix(parts, weights={"text": 1}, seed=2)
    got = [m[None, ["class"]]["class"].tolist() for _ in range(10)]
    assert got == [[1]] * 10


def test_a_mixture_pickles_with_its_position(parts):
    m = mix(parts, weights=WEIGHTS, num_samples=30, seed=5)
    m.create_batches(3)
    m.get_next_batch()
    copy = pickle.loads(pickle.dumps(m))
    assert copy.weights == m.weights and copy.num_samples == 30 and copy.classes == m.classes
    for _ in range(3):
        assert torch.equal(copy.get_next_batch("supervised")["input_array"],
                           m.get_next_batch("supervised")["input_array"])
    assert torch.equal(copy[{"code": 2}]["input_array"], m[{"code": 2}]["input_array"])
    assert sum(b.size for b in m.batches(0)) == 30  # num_samples is the epoch's size




def test_a_lambda_schedule_pickles_detached_and_spawn_workers_serve_it(parts):
    m = mix(parts, weights=lambda step: {"raw": 1, "code": 1 + step % 2}, seed=3)
    copy = pickle.loads(pickle.dumps(m))  # a lambda does not pickle: the copy keeps its name and step 0's weights
    assert copy.weights == m.weights
    assert torch.equal(copy[[0, 5, 9]]["input_array"], m[[0, 5, 9]]["input_array"])
    with pytest.raises(InputError, match="lambda.* does not pickle"):
        copy.create_batches(2)
        copy.get_next_batch()
    query = ["sample_id", "input_array"]
    expected = _epoch(m.dataloader(3, query=query, epoch_size=30))
    got = _epoch(m.dataloader(3, query=query, epoch_size=30, num_workers=1, multiprocessing_context="spawn"))
    same_batches(got, expected)
