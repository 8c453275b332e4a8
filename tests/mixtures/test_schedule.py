"""Weights as a schedule and the mixture's step plan (issue #37, slice 3): per-step counts within one sample per part
of the cumulative targets, schedule switches, per-part epochs, exhausted=, equal ranks, exact resume (also with other
weights), proportions, and bad schedules refused naming the step and part."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
import torch

from consumer import InputError
from consumer.mixtures import mix
from consumer.mixtures.plan import MixturePlan, PlanState
from consumer.mixtures.schedule import WeightSchedule

FORK = {"multiprocessing_context": "fork"}
SIZES = {"raw": 12, "text": 20, "code": 11}
POINTS = [(0, {"raw": 3, "text": 1}), (10, {"code": 1, "text": 2}), (17, {"raw": 1, "text": 1, "code": 1})]


def _plan(weights, batch_size=4, world_size=1, **kw) -> MixturePlan:
    names, sizes = list(SIZES), list(SIZES.values())
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    return MixturePlan(names, sizes, offsets, WeightSchedule(weights, SIZES), batch_size=batch_size,
                       world_size=world_size, seed=3, **kw)


def _wild(step: int) -> dict[str, float]:
    return {"raw": 1 + math.sin(step), "text": 0.1 + (step % 7), "code": (step % 3) / 3}


@pytest.mark.parametrize("weights", [{"raw": 1, "text": 1, "code": 1}, {"raw": 0.7, "text": 0.2, "code": 0.1}, POINTS,
                                     _wild, None])
@pytest.mark.parametrize("batch_size, world_size", [(1, 1), (3, 1), (5, 2), (7, 8)])
def test_every_prefix_is_within_one_sample_per_part_of_the_targets(weights, batch_size, world_size):
    plan = _plan(weights, batch_size, world_size)
    steps = 60
    counts = plan.counts(0, steps)
    size = batch_size * world_size
    assert (counts.sum(axis=1) == size).all() and (counts >= 0).all()
    w = np.array([plan.schedule.at(k) for k in range(steps)])
    targets = np.cumsum(size * w, axis=0)
    taken = np.cumsum(counts, axis=0)
    assert np.abs(taken - targets).max() <= 1 + 1e-9
    assert (counts[w == 0] == 0).all()  # a part of weight 0 is never drawn


def test_a_schedule_switch_changes_the_proportions_from_that_step_on():
    counts = _plan(POINTS, batch_size=8).counts(0, 25)
    assert (counts[:10, 2] == 0).all() and (counts[10:17, 0] == 0).all()  # code only from 10, raw none in 10..16
    assert counts[:10, 0].sum() == 60 and counts[:10, 1].sum() == 20  # 3:1 over 10 steps of 8
    assert counts[10:17, 2].sum() in (18, 19) and counts[10:17, 1].sum() in (37, 38)  # 1:2 over 56
    assert (counts[17:].sum(axis=0) == 8 * 8 // 3).all() or abs(np.ptp(counts[17:].sum(axis=0))) <= 1


def _local(plan: MixturePlan, ids: np.ndarray, part: int) -> np.ndarray:
    mine = ids[(ids >= plan.offsets[part]) & (ids < plan.offsets[part] + plan.sizes[part])]
    return mine - plan.offsets[part]


def _check_part_epochs(plan: MixturePlan, ids: np.ndarray) -> None:
    """Every part's served samples are its epochs in turn: each full epoch a permutation, the last one no repeats."""
    for p, size in enumerate(plan.sizes.tolist()):
        local = _local(plan, ids, p)
        for start in range(0, local.size, size):
            chunk = local[start:start + size]
            assert np.unique(chunk).size == chunk.size
            if chunk.size == size:
                assert sorted(chunk.tolist()) == list(range(size))


def test_each_part_walks_its_own_epochs_in_order():
    plan = _plan({"raw": 5, "text": 1, "code": 1}, batch_size=6)
    ids = np.concatenate([plan.step_ids(k) for k in range(40)])
    _check_part_epochs(plan, ids)
    first = plan.part_samples(0, 0, 12) - plan.offsets[0]
    assert not np.array_equal(first, np.arange(12))  # shuffled
    assert not np.array_equal(first, plan.part_samples(0, 12, 12) - plan.offsets[0])  # another order next epoch


def test_a_state_resumes_the_plan_exactly_even_with_other_weights():
    full = _plan(POINTS, batch_size=5)
    state = full.state_at(13)
    again = _plan(POINTS, batch_size=5, start=state)
    assert all(np.array_equal(full.step_ids(k), again.step_ids(k)) for k in range(13, 40))
    other = _plan({"text": 1}, batch_size=5, start=state)
    assert (other.counts(13, 20)[:, 1] == 5).all()
    assert np.array_equal(other.step_ids(13), full.part_samples(1, int(state.taken[1]), 5))


@pytest.mark.parametrize("world_size", [1, 2, 8])
def test_ranks_have_equal_batches_and_proportions(parts, world_size):
    m = mix(parts, weights={"raw": 0.5, "text": 0.3, "code": 0.2}, seed=1)
    loaders = [m.dataloader(5, query=["sample_id", "class"], rank=r, world_size=world_size)
               for r in range(world_size)]
    assert len({len(loader) for loader in loaders}) == 1
    served = [[b for _ in range(2) for b in loader] for loader in loaders]  # two epochs
    assert len({len(s) for s in served}) == 1 and len(served[0]) == 2 * len(loaders[0])
    plan = loaders[0].plan.plan
    for k in range(len(served[0])):
        batches = [s[k] for s in served]
        assert all(b["sample_id"].numel() == 5 for b in batches)
        per_rank = np.array([np.bincount(b["class"].numpy(), minlength=3) for b in batches])
        assert (per_rank.max(axis=0) - per_rank.min(axis=0) <= 1).all()
        together = np.sort(np.concatenate([b["sample_id"].numpy() for b in batches]))
        assert np.array_equal(together, np.sort(plan.step_ids(k)))


def _ids(batches) -> list[list[int]]:
    return [b["sample_id"].tolist() for b in batches]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_state_resumes_the_loader_exactly(parts, num_workers):
    m = mix(parts, weights=POINTS, seed=4)
    query = ["sample_id", "input_array"]
    full = m.dataloader(4, query=query, epoch_size=40)
    reference = [b for _ in range(3) for b in full]
    first = m.dataloader(4, query=query, epoch_size=40)
    taken = []
    for b in first:
        taken.append(b)
        if len(taken) == 7:
            break
    state = json.loads(json.dumps(first.state_dict()))
    assert state["step"] == 7 and state["parts"]["raw"] == {"epoch": 1, "position": 9}
    resumed = mix(parts, weights=POINTS, seed=4).dataloader(4, query=query, epoch_size=40, num_workers=num_workers,
                                                           **(FORK if num_workers else {}))
    resumed.load_state_dict(state)
    rest = [b for _ in range(3) for b in resumed][:len(reference) - 7]
    got = taken + rest
    assert _ids(got) == _ids(reference)
    assert all(torch.equal(a["input_array"], b["input_array"]) for a, b in zip(got, reference))


def test_resuming_with_other_weights_continues_every_parts_positions(parts):
    a = mix(parts, weights={"raw": 3, "text": 1}, seed=2)
    loader = a.dataloader(6, query=["sample_id"])
    before = []
    for b in loader:
        before.append(b)
        if len(before) == 5:
            break
    state = json.loads(json.dumps(loader.state_dict()))
    b = mix(parts, weights={"text": 1, "code": 3}, seed=2)
    other = b.dataloader(6, query=["sample_id"])
    other.load_state_dict(state)
    after = [x for _ in range(2) for x in other]
    plan = other.plan.plan
    counts = plan.counts(5, 5 + len(after))
    assert (counts[:, 0] == 0).all() and counts[:, 2].sum() == 3 * counts[:, 1].sum() // 1 or \
        abs(counts[:, 2].sum() - 3 * counts[:, 1].sum()) <= 4
    ids = np.array(sum(_ids(before + after), []))
    _check_part_epochs(plan, ids)  # nothing of a part replayed or skipped within its epoch
    for p, name in enumerate(plan.names):  # the parts' sequences continue where the state left them
        served = _local(plan, ids, p)
        assert np.array_equal(served + plan.offsets[p], plan.part_samples(p, 0, served.size))
        assert served.size >= state["taken"][name]


def test_exhausted_stop_ends_at_the_first_part_that_runs_out(parts):
    m = mix(parts, weights={"raw": 1, "text": 1}, seed=0)
    loader = m.dataloader(4, query=["sample_id", "class"], exhausted="stop", epoch_size=1000)
    got = [b for _ in range(3) for b in loader]
    plan = loader.plan.plan
    assert len(got) == plan.end and plan.end > 0
    cls = torch.cat([b["class"] for b in got]).numpy()
    counts = np.bincount(cls, minlength=3)
    assert counts[0] <= 12 and counts[1] <= 20 and counts[2] == 0
    assert (plan.state_at(plan.end + 1).taken > plan.sizes).any()  # the next step would need a second epoch
    ids = torch.cat([b["sample_id"] for b in got]).numpy()
    assert np.unique(ids).size == ids.size
    repeat = m.dataloader(4, query=["class"], epoch_size=1000)
    assert len(list(repeat)) == len(repeat) == 250  # repeat: parts start new epochs, the order goes on


def test_proportions_report_the_last_window_and_can_be_logged(parts, caplog):
    m = mix(parts, weights=POINTS, seed=4)
    with pytest.raises(InputError, match="make one with m.dataloader"):
        mix(parts).proportions(3)
    loader = m.dataloader(4, query=["class"], epoch_size=200, log_proportions_every=5)
    with caplog.at_level(logging.INFO, logger="consumer.mixtures"):
        got = [b for b in loader][:12]
    assert sum("proportions over the last 5 steps" in r.message for r in caplog.records) == 10
    served = [b["class"] for b in [b for b in m.dataloader(4, query=["class"], epoch_size=200)][:12]]
    assert [g["class"].tolist() for g in got] == [s.tolist() for s in served]
    fresh = m.dataloader(4, query=["class"], epoch_size=200)
    for i, _ in enumerate(fresh):
        if i == 11:
            break
    window = np.bincount(torch.cat(served[8:12]).numpy(), minlength=3) / 16
    assert m.proportions(4) == pytest.approx(dict(zip(m.classes, window.tolist())))


def test_a_state_of_another_mixture_is_refused_naming_what_differs(parts):
    m = mix(parts, weights={"raw": 1}, seed=1)
    state = m.dataloader(4).state_dict()
    fewer = mix({"raw": parts["raw"], "text": parts["text"]}, weights={"raw": 1}, seed=1)
    with pytest.raises(InputError, match=r"missing here: \['code'\]"):
        fewer.dataloader(4).load_state_dict(state)
    swapped = mix({"raw": parts["raw"], "text": parts["code"], "code": parts["text"]}, weights={"raw": 1}, seed=1)
    with pytest.raises(InputError, match=r"part\(s\) \['text', 'code'\] differ"):
        swapped.dataloader(4).load_state_dict(state)
    with pytest.raises(InputError, match="batch_size"):
        m.dataloader(5).load_state_dict(state)
    with pytest.raises(InputError, match="takes a state of kind"):
        m.dataloader(4).load_state_dict({"kind": "consumer.order"})


@pytest.mark.parametrize("weights, message", [
    ([(1, {"raw": 1})], r"first point must be at step 0, got step 1"),
    ([(0, {"raw": 1}), (5, {"raw": -1})], r"weights at step 5: weights\['raw'\] .* got -1"),
    ([(0, {"raw": 1}), (5, {"text": math.nan})], r"step 5: weights\['text'\] .* got nan"),
    ([(0, {"raw": 1}), (5, {"text": math.inf})], r"step 5: weights\['text'\] .* got inf"),
    ([(0, {"raw": 1}), (5, {"web": 1})], r"step 5: weights name part 'web'"),
    ([(0, {"raw": 1}), (5, {"raw": 0})], r"step 5: weights give every part weight 0"),
    ([(0, {"raw": 1}), (0, {"raw": 2})], r"steps must increase"),
    ([], "at least one point"),
    (lambda step: {"raw": -2}, r"weights at step 0: weights\['raw'\] .* got -2"),
    (lambda step: 3, r"weights at step 0 must be a dict"),
    ("raw", "weights must be None or a dict"),
])
def test_bad_schedules_are_refused_naming_the_step_and_part(parts, weights, message):
    with pytest.raises(InputError, match=message):
        mix(parts, weights=weights)


def test_a_callable_is_checked_at_the_step_it_goes_bad(parts):
    m = mix(parts, weights=lambda step: {"raw": 1.0 if step < 3 else math.nan}, seed=0)
    loader = m.dataloader(2)
    with pytest.raises(InputError, match=r"weights at step 3: weights\['raw'\] .* got nan"):
        list(loader)
    m.create_batches(2)  # the cursor walks the same plan, and fails at the same step
    for _ in range(3):
        m.get_next_batch()
    with pytest.raises(InputError, match=r"weights at step 3"):
        m.get_next_batch()


def test_plan_state_is_the_start_of_a_new_plan():
    plan = _plan({"raw": 1, "code": 1})
    s = plan.state_at(9)
    assert isinstance(s, PlanState) and s.step == 9 and int(s.taken.sum()) == 36
    assert plan.part_position(s)["raw"] == {"epoch": 1, "position": 6}
