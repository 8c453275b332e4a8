"""Properties of the loader's epoch plans (pure numpy, no torch): cover, equal ranks, balance, purity."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.errors import InputError
from consumer.training.plan import EpochPlan, class_shares

CLASSES = ["a", "b", "c", "d"]


def _sample_class(counts: list[int]) -> np.ndarray:
    return np.repeat(np.arange(len(counts)), counts).astype(np.int64)


def _ranks(world_size: int, **kw) -> list[EpochPlan]:
    return [EpochPlan(rank=r, world_size=world_size, **kw) for r in range(world_size)]


balances = st.one_of(st.none(), st.just("uniform"), st.sampled_from([0.0, 0.5, 1.0, -0.5]),
                     st.fixed_dictionaries({"a": st.sampled_from([1.0, 3.0]), "b": st.sampled_from([0.0, 1.0])}))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(counts=st.lists(st.integers(1, 60), min_size=1, max_size=4), batch_size=st.integers(1, 17),
       world_size=st.sampled_from([1, 2, 3]), drop_last=st.booleans(), shuffle=st.booleans(),
       epoch=st.integers(0, 5), seed=st.integers(0, 2**32 - 1))
def test_ranks_cover_the_epoch_once_with_equal_batches(counts, batch_size, world_size, drop_last, shuffle, epoch, seed):
    sc = _sample_class(counts)
    n = sc.size
    kw = {"sample_class": sc, "classes": CLASSES[:len(counts)], "batch_size": batch_size, "seed": seed,
          "shuffle": shuffle, "drop_last": drop_last}
    if drop_last and n < batch_size * world_size:
        with pytest.raises(InputError, match="gives no batch"):
            EpochPlan(rank=0, world_size=world_size, **kw)
        return
    plans = _ranks(world_size, **kw)
    per_rank = [p.batches(epoch) for p in plans]
    # every rank the same number of batches, of the same sizes, all but the last full
    assert len({len(b) for b in per_rank}) == 1
    assert all(len(b) == plans[0].batches_per_epoch for b in per_rank)
    sizes = [[x.size for x in b] for b in per_rank]
    assert all(s == sizes[0] for s in sizes)
    assert all(s == batch_size for s in sizes[0][:-1]) and 0 < sizes[0][-1] <= batch_size
    if drop_last:
        assert sizes[0][-1] == batch_size
    everything = np.concatenate([np.concatenate(b) for b in per_rank])
    order = plans[0].epoch_order(epoch)
    assert sorted(order.tolist()) == list(range(n))  # natural sampling: a permutation of all samples
    if drop_last:
        steps = n // (batch_size * world_size)
        assert everything.size == steps * batch_size * world_size
        assert np.unique(everything).size == everything.size  # disjoint, no repeats
        assert n - everything.size < batch_size * world_size
    else:
        padded = -(-n // world_size) * world_size
        assert everything.size == padded and padded - n < world_size
        # exactly the epoch plus `padded - n` repeats taken cyclically from the start of the epoch's order
        assert Counter(everything.tolist()) == Counter(np.resize(order, padded).tolist())
        assert set(everything.tolist()) == set(range(n))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(20, 300), batch_size=st.integers(1, 9), seed=st.integers(0, 2**32 - 1), epoch=st.integers(0, 50))
def test_order_is_pure_and_changes_with_epoch_and_seed(n, batch_size, seed, epoch):
    sc = np.zeros(n, dtype=np.int64)
    p = EpochPlan(sample_class=sc, classes=["x"], batch_size=batch_size, seed=seed)
    again = EpochPlan(sample_class=sc.copy(), classes=["x"], batch_size=batch_size, seed=seed)
    a = p.rank_ids(epoch)
    assert np.array_equal(a, again.rank_ids(epoch))  # a pure function of the settings
    assert not np.array_equal(a, p.rank_ids(epoch + 1))  # 1/n! chance of a false failure with n >= 20
    other = EpochPlan(sample_class=sc, classes=["x"], batch_size=batch_size, seed=(seed + 1) % 2**32)
    assert not np.array_equal(a, other.rank_ids(epoch))
    # world_size 1: batches are consecutive slices of the epoch's order
    assert np.array_equal(np.concatenate(p.batches(epoch)), p.epoch_order(epoch))


def test_no_shuffle_keeps_sample_order():
    p = EpochPlan(sample_class=np.zeros(10, dtype=np.int64), classes=["x"], batch_size=4, seed=1, shuffle=False)
    assert [b.tolist() for b in p.batches(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    r1 = EpochPlan(sample_class=np.zeros(10, dtype=np.int64), classes=["x"], batch_size=2, seed=1, shuffle=False,
                   rank=1, world_size=2)
    # steps of 4: rank 1 gets ids 2,3 then 6,7; the last step (8, 9) is split one each
    assert [b.tolist() for b in r1.batches(0)] == [[2, 3], [6, 7], [9]]


@settings(max_examples=100, deadline=None)
@given(counts=st.lists(st.integers(1, 80), min_size=2, max_size=4), balance=balances,
       epoch_size=st.integers(500, 4000), seed=st.integers(0, 2**32 - 1), epoch=st.integers(0, 9),
       world_size=st.sampled_from([1, 2, 3]), shuffle=st.booleans())
def test_balanced_epochs_hit_their_target_shares(counts, balance, epoch_size, seed, epoch, world_size, shuffle):
    classes = CLASSES[:len(counts)]
    sc = _sample_class(counts)
    plans = _ranks(world_size, sample_class=sc, classes=classes, batch_size=7, seed=seed, balance=balance,
                   epoch_size=epoch_size, shuffle=shuffle)
    order = plans[0].epoch_order(epoch)
    assert order.size == epoch_size
    target = class_shares(plans[0].balance, np.array(counts), classes)
    realised = np.bincount(sc[order], minlength=len(counts))
    uses = np.bincount(order, minlength=sc.size)
    if balance is None:  # natural: chained permutations of all samples, each used evenly
        assert uses.max() - uses.min() <= 1
        assert np.all(np.abs(realised - epoch_size * target) <= np.array(counts))
        return
    # systematic sampling: each class count is floor or ceil of its expectation
    assert np.all(np.abs(realised - epoch_size * target) < 1.0 + 1e-9), (realised, epoch_size * target)
    # inside a class, samples are used evenly (no sample twice before every sample once)
    for c in range(len(counts)):
        u = uses[sc == c]
        if realised[c]:
            assert u.max() - u.min() <= 1
    # ranks deal the balanced epoch like any other: cover it with equal counts
    everything = np.concatenate([p.rank_ids(epoch) for p in plans])
    assert Counter(everything.tolist()) == Counter(np.resize(order, -(-epoch_size // world_size) * world_size).tolist())


def test_balance_targets_by_kind():
    counts = np.array([10, 40, 0, 50])
    assert np.allclose(class_shares("uniform", counts, CLASSES), [1 / 3, 1 / 3, 0, 1 / 3])
    assert np.allclose(class_shares(1.0, counts, CLASSES), counts / 100)
    assert np.allclose(class_shares(None, counts, CLASSES), counts / 100)
    assert np.allclose(class_shares(0.5, counts, CLASSES), np.sqrt(counts) / np.sqrt(counts).sum())
    assert np.allclose(class_shares({"a": 0.7, "b": 0.3}, counts, CLASSES), [0.7, 0.3, 0, 0])
    assert np.allclose(class_shares(1000.0, counts, CLASSES), [0, 0, 0, 1])  # extreme alphas do not overflow
    assert np.allclose(class_shares(-1000.0, counts, CLASSES), [1, 0, 0, 0])


def test_balanced_shares_over_many_epochs_match_binomial_error():
    """Shares realised over random epochs with a small epoch_size stay within 4 binomial sd of the target."""
    counts = [5, 200, 30]
    sc = _sample_class(counts)
    p = EpochPlan(sample_class=sc, classes=CLASSES[:3], batch_size=8, seed=11, balance={"a": 0.5, "b": 0.2, "c": 0.3},
                  epoch_size=37)
    draws = np.concatenate([sc[p.epoch_order(e)] for e in range(300)])
    share = np.bincount(draws, minlength=3) / draws.size
    sd = np.sqrt(np.array([0.5, 0.2, 0.3]) * (1 - np.array([0.5, 0.2, 0.3])) / draws.size)
    assert np.all(np.abs(share - [0.5, 0.2, 0.3]) < 4 * sd)


def test_natural_epoch_size_chains_permutations():
    p = EpochPlan(sample_class=np.zeros(10, dtype=np.int64), classes=["x"], batch_size=4, seed=3, epoch_size=25)
    order = p.epoch_order(0)
    assert order.size == 25 and len(p.batches(0)) == 7
    assert sorted(order[:10].tolist()) == list(range(10)) and sorted(order[10:20].tolist()) == list(range(10))
    small = EpochPlan(sample_class=np.zeros(10, dtype=np.int64), classes=["x"], batch_size=4, seed=3, epoch_size=4)
    assert np.unique(small.epoch_order(0)).size == 4


def test_settings_are_json_and_errors_name_the_argument():
    p = EpochPlan(sample_class=np.array([0, 1, 1]), classes=["a", "b"], batch_size=2, seed=0, balance={"b": 1, "a": 2})
    assert json.loads(json.dumps(p.settings()))["balance"] == {"a": 2.0, "b": 1.0}
    sc, cls = np.array([0, 1, 1]), ["a", "b"]
    bad = [
        ({"balance": "equal"}, "balance must be"),
        ({"balance": {"zebra": 1.0}}, "unknown class"),
        ({"balance": {"a": -1.0}}, r"balance\['a'\]"),
        ({"balance": {"a": 0.0}}, "weight 0"),
        ({"balance": float("nan")}, "finite"),
        ({"balance": True}, "balance must be"),
        ({"batch_size": 0}, "batch_size must be"),
        ({"rank": 2, "world_size": 2}, "rank must be in"),
        ({"world_size": 0}, "world_size must be"),
        ({"epoch_size": 0}, "epoch_size must be"),
        ({"drop_last": 1}, "drop_last must be a bool"),
        ({"seed": -1}, "seed must be"),
    ]
    for kw, msg in bad:
        args = {"sample_class": sc, "classes": cls, "batch_size": 2, "seed": 0}
        args.update(kw)
        with pytest.raises(InputError, match=msg):
            EpochPlan(**args)
    with pytest.raises(InputError, match="no samples"):
        EpochPlan(sample_class=np.array([1, 1]), classes=["a", "b"], batch_size=1, seed=0, balance={"a": 1.0})
    with pytest.raises(InputError, match="no samples"):
        EpochPlan(sample_class=np.zeros(0, dtype=np.int64), classes=["a"], batch_size=1, seed=0)
