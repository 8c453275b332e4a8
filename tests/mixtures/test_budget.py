"""Token budgets over a weighted mixture (``m.dataloader(B, max_tokens=T)``, :mod:`consumer.mixtures.budget`): every
batch within ``rows x longest <= T`` and ``B`` rows, rows as wide as their longest sample, the ranks' batches of a
step within one row of each other, every part's count within one sample of its cumulative target after every step,
each part walking its own permutation, and an exact resume, loader and cursor alike."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from consumer import InputError
from consumer.mixtures import mix

WEIGHTS = {"raw": 3, "text": 1, "code": 2}
SCHEDULE = [(0, {"raw": 1, "text": 1}), (4, {"code": 3, "text": 1})]
QUERY = ["sample_id", "input_array", "class"]


def _steps(m, world, **options):
    """Each global step's batches, rank by rank, over one epoch of every rank's loader."""
    batch = options.pop("batch")
    loaders = [m.dataloader(batch, rank=r, world_size=world, query=QUERY, **options) for r in range(world)]
    per_rank = [[{k: v.clone() for k, v in b.items()} for b in loader] for loader in loaders]
    assert len({len(b) for b in per_rank}) == 1 and len(per_rank[0]) == len(loaders[0])  # equal batch counts
    return list(zip(*per_rank, strict=True)), loaders[0]


@pytest.mark.parametrize("weights", [WEIGHTS, SCHEDULE], ids=["dict", "schedule"])
@pytest.mark.parametrize("world, batch, budget", [(1, 4, 40), (2, 3, 64), (3, 8, 33), (8, 2, 200)])
def test_every_batch_keeps_the_budget_and_the_parts_keep_their_weights(parts, weights, world, batch, budget):
    m = mix(parts, weights=weights, seed=9)
    steps, loader = _steps(m, world, batch=batch, max_tokens=budget, epoch_size=120)
    lengths = m.index.sample_tokens()
    plan = loader.plan.plan
    targets = np.zeros(3)
    taken = np.zeros(3, dtype=np.int64)
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
    cut = 0
    for k, batches in enumerate(steps):
        rows = [b["sample_id"].numel() for b in batches]
        cut += sum(rows) < world * batch
        assert max(rows) - min(rows) <= 1 and min(rows) >= 1 and max(rows) <= batch
        for b in batches:
            ids = b["sample_id"].numpy()
            width = int(lengths[ids].max())
            assert b["input_array"].shape == (ids.size, width) and ids.size * width <= budget
            assert np.array_equal(b["input_array"].numpy(), m.fetch_numpy(ids, None, width=width)["input_array"])
        per = [b["sample_id"].numpy() for b in batches]  # draw i went to rank i mod W: back in draw order
        drawn = np.array([per[r][j] for j in range(max(rows)) for r in range(world) if j < rows[r]])
        assert rows == sorted(rows, reverse=True)  # the first ranks hold the extra row of a cut step
        cls = m.index.sample_class[drawn]
        taken += np.bincount(cls, minlength=3)
        targets += drawn.size * plan.schedule.at(k)
        assert np.abs(taken - targets).max() < 1 + 1e-9  # every part within one sample of its target
        for p in range(3):
            seen[p].extend(x for x in drawn.tolist() if m.index.sample_class[x] == p)
    assert (cut > 0) == (budget < batch * int(lengths.max()))  # the budget cut steps where it could
    for p, ids in seen.items():  # each part walks its permutations: no repeat before its epoch is through
        size = m.samples_per_class()[m.classes[p]]
        for start in range(0, len(ids), size):
            chunk = ids[start:start + size]
            assert len(set(chunk)) == len(chunk)


def test_a_resume_continues_exactly_and_the_cursor_serves_the_same(parts):
    m = mix(parts, weights=SCHEDULE, seed=4)
    options = {"max_tokens": 70, "epoch_size": 60, "query": ["sample_id", "input_array"]}
    whole = [b for b in m.dataloader(5, **options)] + [b for b in m.dataloader(5, **options)]
    loader = m.dataloader(5, **options)
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = loader.state_dict()
    assert state["settings"]["max_tokens"] == 70
    resumed = m.dataloader(5, **options)
    resumed.load_state_dict(state)
    rest = [b for b in resumed]
    for got, want in zip(rest, whole[3:], strict=False):
        assert torch.equal(got["sample_id"], want["sample_id"]) and torch.equal(got["input_array"], want["input_array"])
    m.create_batches(5, max_tokens=70, epoch_size=60)
    for want in whole[:len(loader)]:
        got = m.get_next_batch(["sample_id", "input_array"])
        assert torch.equal(got["sample_id"], want["sample_id"]) and torch.equal(got["input_array"], want["input_array"])
    with pytest.raises(InputError, match="settings differ"):
        m.dataloader(5, max_tokens=71, epoch_size=60).load_state_dict(state)


def test_a_sample_longer_than_the_budget_and_no_batch_size_are_refused(parts):
    m = mix(parts, weights=WEIGHTS, seed=1)
    longest = int(m.index.sample_tokens().max())
    with pytest.raises(InputError, match=f"max_tokens={longest - 1} is smaller than sample"):
        list(m.dataloader(4, max_tokens=longest - 1, query=["sample_id"]))
    with pytest.raises(InputError, match="the most rows"):
        m.dataloader(None, max_tokens=500)
    natural = mix(parts)  # natural weights: fairseq's batches of the items, every sample once per epoch
    ids = torch.cat([b["sample_id"] for b in natural.dataloader(None, max_tokens=96, query=["sample_id"])])
    assert sorted(ids.tolist()) == list(range(len(natural)))


def test_workers_serve_the_budget_batches_of_the_process(parts):
    m = mix(parts, weights=WEIGHTS, seed=2)
    options = {"max_tokens": 50, "epoch_size": 40, "query": ["sample_id", "input_array"]}
    alone = [b for b in m.dataloader(4, **options)]
    ring = [b for b in m.dataloader(4, num_workers=2, multiprocessing_context="fork", **options)]
    assert len(ring) == len(alone)
    for a, b in zip(alone, ring, strict=True):
        assert torch.equal(a["sample_id"], b["sample_id"]) and torch.equal(a["input_array"], b["input_array"])
