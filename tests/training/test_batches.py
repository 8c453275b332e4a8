"""create_batches / get_next_batch / ds[None]: epochs, wrap, determinism, resumption, no global RNG."""

import random

import numpy as np
import pytest
import torch

from consumer import Consumer, InputError


@pytest.fixture
def ds(corpus_dir):
    return Consumer(corpus_dir, metadata=None, seqlen=16)


def _ids(batch):
    return batch["sample_id"].tolist()


def test_epoch_covers_every_sample_once_then_wraps(ds):
    n = len(ds)
    ds.create_batches(4, seed=9)
    per_epoch = -(-n // 4)
    epoch0 = [i for _ in range(per_epoch) for i in _ids(ds.get_next_batch(["sample_id"]))]
    epoch1 = [i for _ in range(per_epoch) for i in _ids(ds.get_next_batch(["sample_id"]))]
    assert sorted(epoch0) == list(range(n)) and sorted(epoch1) == list(range(n))
    assert epoch0 != epoch1  # a new deterministic shuffle per epoch
    ds.create_batches(4, seed=9)
    assert [i for _ in range(per_epoch) for i in _ids(ds.get_next_batch(["sample_id"]))] == epoch0


def test_none_selection_follows_the_batches(ds):
    ds.create_batches(5, seed=1)
    via_none = [_ids(ds[None, ["sample_id"]]) for _ in range(3)]
    ds.create_batches(5, seed=1)
    via_next = [_ids(ds.get_next_batch(["sample_id"])) for _ in range(3)]
    assert via_none == via_next and all(len(b) == 5 for b in via_none)


def test_none_without_create_batches_serves_one_sample_at_a_time(ds):
    seen = [ds[None, ["sample_id"]]["sample_id"].tolist() for _ in range(len(ds) + 1)]
    assert all(len(s) == 1 for s in seen)
    assert sorted(s[0] for s in seen[:len(ds)]) == list(range(len(ds)))  # then wraps, no IndexError


def test_drop_last(ds):
    n = len(ds)
    ds.create_batches(n - 1, drop_last=True, seed=0)
    for _ in range(3):
        assert len(_ids(ds.get_next_batch(["sample_id"]))) == n - 1
    ds.create_batches(n - 1, drop_last=False, seed=0)
    assert [len(_ids(ds.get_next_batch(["sample_id"]))) for _ in range(2)] == [n - 1, 1]


def test_drop_last_with_too_few_samples_is_a_clear_error(ds):
    with pytest.raises(InputError, match=r"batch_size=1000 with drop_last=True gives no batch"):
        ds.create_batches(1000, drop_last=True)


@pytest.mark.parametrize("kwargs, message", [
    ({"batch_size": 0}, "batch_size must be an int >= 1"),
    ({"batch_size": 2.5}, "batch_size must be an int >= 1"),
    ({"batch_size": 2, "seed": -1}, "seed must be an int >= 0"),
    ({"batch_size": 2, "drop_last": "yes"}, "drop_last must be a bool"),
])
def test_bad_batch_arguments(ds, kwargs, message):
    with pytest.raises(InputError, match=message):
        ds.create_batches(**kwargs)


def test_no_global_rng_is_touched(ds):
    np_state, py_state, torch_state = np.random.get_state(), random.getstate(), torch.get_rng_state()
    ds.create_batches(3, seed=123)
    ds.set_unsupervised_mode()
    for _ in range(5):
        ds.get_next_batch()
    ds[{"cat": 2}]
    assert random.getstate() == py_state
    assert torch.equal(torch.get_rng_state(), torch_state)
    new = np.random.get_state()
    assert new[0] == np_state[0] and (new[1] == np_state[1]).all() and new[2:] == np_state[2:]


def test_resume_continues_exactly(ds):
    ds.create_batches(3, seed=5)
    ds.set_unsupervised_mode()
    for _ in range(4):
        ds.get_next_batch()
    state = ds.state_dict()
    rest = [ds.get_next_batch(["sample_id", "labels"]) for _ in range(6)]  # crosses an epoch boundary
    fresh = Consumer(ds.corpus, metadata=None, seqlen=16)
    fresh.set_unsupervised_mode()
    fresh.load_state_dict(state)
    again = [fresh.get_next_batch(["sample_id", "labels"]) for _ in range(6)]
    for x, y in zip(rest, again):
        assert torch.equal(x["sample_id"], y["sample_id"]) and torch.equal(x["labels"], y["labels"])


def test_bad_state(ds):
    with pytest.raises(InputError, match="no batches yet"):
        ds.state_dict()
    with pytest.raises(InputError, match=r"state must be a dict made by state_dict\(\) \(kind 'consumer.order', "
                       r"version 2, or a state saved by 0.2\), got kind=None"):
        ds.load_state_dict({"epoch": 3})
    ds.create_batches(2)
    state = ds.state_dict()
    assert state["kind"] == "consumer.order" and state["version"] == 2
    with pytest.raises(InputError, match=r"state\['position'\] must be an int >= 0, got -1"):
        ds.load_state_dict({**state, "position": -1})
    with pytest.raises(InputError, match="state does not belong to this dataset: the dataset differs"):
        ds.load_state_dict({**state, "dataset": "0" * 64})
    old = {"version": 1, "kind": "samples", "n_samples": len(ds) + 1, "batch_size": 2, "drop_last": False,
           "seed": 4, "shuffle": True, "epoch": 0, "position": 0}
    with pytest.raises(InputError, match=r"state\['n_samples'\]=18 does not match this dataset \(17 samples\)"):
        ds.load_state_dict(old)


def test_unshuffled_batches_follow_sample_order(ds):
    ds.create_batches(3, shuffle=False)
    n = len(ds)
    seen = [i for _ in range(-(-n // 3)) for i in _ids(ds.get_next_batch(["sample_id"]))]
    assert seen == list(range(n))
    assert ds.state_dict()["settings"]["shuffle"] is False
    with pytest.raises(InputError, match="shuffle must be a bool"):
        ds.create_batches(3, shuffle="no")


def test_token_budget_batches(corpus_dir):
    from consumer.formats import batch_by_size
    ds = Consumer(corpus_dir, metadata=None, seqlen=600, long_files="windows", cache_dir=False)
    lengths = ds.index.sample_tokens()
    ds.create_token_batches(max_tokens=1200, seed=3)
    n_batches = len(ds.batches(0))
    seen = []
    for _ in range(n_batches):
        out = ds.get_next_batch(["input_array", "sample_id", "length"])
        ids = out["sample_id"].numpy()
        width = out["input_array"].shape[1]
        assert width == lengths[ids].max() <= ds.seqlen  # rows only as wide as the longest sample
        assert len(ids) * width <= 1200  # the padding-aware budget
        assert (out["length"].numpy() == lengths[ids]).all()
        seen.extend(ids.tolist())
    assert sorted(seen) == list(range(len(ds)))  # every sample once per epoch
    # the same batches as fairseq's batch_by_size over the length-sorted order
    unshuffled = Consumer(corpus_dir, metadata=None, seqlen=600, long_files="windows", cache_dir=False)
    unshuffled.create_token_batches(max_tokens=1200, seed=3, shuffle=False)
    frozen = unshuffled.batches(0)
    order = np.argsort(lengths, kind="stable")
    reference = batch_by_size(order, lengths[order], max_tokens=1200)
    assert [lengths[b].tolist() for b in frozen] == [lengths[b].tolist() for b in reference]
    # resumable
    state = ds.state_dict()
    nxt = ds.get_next_batch(["sample_id"])["sample_id"].tolist()
    ds.load_state_dict(state)
    assert ds.get_next_batch(["sample_id"])["sample_id"].tolist() == nxt
    assert ds.get_dict()["batches"]["settings"]["max_tokens"] == 1200


def test_token_budget_errors(corpus_dir):
    ds = Consumer(corpus_dir, metadata=None, cache_dir=False)
    with pytest.raises(InputError, match="max_tokens"):
        ds.create_token_batches(max_tokens=10)  # a sample longer than the budget
    with pytest.raises(InputError, match="max_tokens must be an int >= 1"):
        ds.create_token_batches(max_tokens=0)
    with pytest.raises(InputError, match="narrower than the longest selected sample"):
        ds.fetch_numpy(np.arange(len(ds)), width=3)
