"""Masked-LM queries: only content tokens are touched, BERT's rule, CLS, reproducibility, modes."""

import numpy as np
import pytest
import torch

from consumer import Consumer, QueryError


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    from ..conftest import write_corpus
    root = tmp_path_factory.mktemp("mask")
    write_corpus(root, {"a": [3000, 17, 4, 900], "b": [2048, 1, 555]})
    return Consumer(str(root), style="concat", seqlen=256, n_bytes=2)


def _content_positions(ds, ids):
    tokens = ds.fetch_numpy(np.asarray(ids), ["input_array"])["input_array"]
    from consumer.fetch.reader import read_rows
    _, content = read_rows(ds.index, ds.documents, np.asarray(ids), content_mask=True)
    return tokens, content


def test_content_mask_is_exactly_the_file_bytes(ds):
    ids = np.arange(len(ds))
    tokens, content = _content_positions(ds, ids)
    v = ds.vocab
    assert not content[tokens >= v.n_data].any()  # no special is content
    real = tokens != v.pad
    stream, cstream = tokens[real], content[real]  # concat rows in order = the class streams
    ends = np.flatnonzero(stream == v.eof) + 1
    for doc, cdoc in zip(np.split(stream, ends)[:-1], np.split(cstream, ends)[:-1]):
        sep = int(np.flatnonzero(doc == v.sep)[0])
        assert not cdoc[:sep + 1].any()  # header and SEP
        expected = (doc[sep + 1:] < v.n_data)  # content: every data id after SEP (TAIL marker, EOF excluded)
        assert (cdoc[sep + 1:] == expected).all()
    size = ds.documents.doc_size
    assert int(content.sum()) == int((size // 2).sum() + (size % 2).sum())


def test_mlm_only_touches_content(ds):
    ds.set_unsupervised_mode(mask_frequency=0.5)
    ids = np.arange(len(ds))
    tokens, content = _content_positions(ds, ids)
    out = ds.fetch_numpy(ids, "mlm")
    chosen = out["labels"] != -100
    assert chosen.any()
    assert not chosen[~content].any()
    assert (out["labels"][chosen] == tokens[chosen]).all()
    changed = out["input_array"] != tokens
    assert not changed[~content].any()
    assert (out["attention_mask"] == (tokens != ds.vocab.pad)).all()
    frac = chosen.sum() / content.sum()
    assert 0.45 < frac < 0.55


def test_bert_rule_proportions(ds):
    ds.set_unsupervised_mode(mask_frequency=1.0, mask_rule="bert")
    ids = np.arange(len(ds))
    tokens, content = _content_positions(ds, ids)
    out = ds.fetch_numpy(ids, "mlm")
    chosen = out["labels"] != -100
    assert (chosen == content).all()
    inp = out["input_array"][chosen]
    orig = tokens[chosen]
    masked = (inp == ds.vocab.mask).mean()
    same = (inp == orig).mean()
    assert 0.77 < masked < 0.83 and 0.08 < same < 0.13  # 10% kept (+ random draws equal by chance)
    assert (inp[inp != ds.vocab.mask] < ds.vocab.n_data).all()  # random replacements are data ids


def test_mask_rule_always_mask(ds):
    ds.set_unsupervised_mode(mask_frequency=0.3, mask_rule="mask")
    out = ds.fetch_numpy(np.arange(len(ds)), "mlm")
    chosen = out["labels"] != -100
    assert (out["input_array"][chosen] == ds.vocab.mask).all()


def test_unsupervised_output_is_unmasked_original(ds):
    ds.set_unsupervised_mode(mask_frequency=0.2)
    ids = [0, 3, 5]
    out = ds[ids, "unsupervised"]
    plain = ds[ids, None]["input_array"]
    assert torch.equal(out["output_tensor"], plain)
    assert not torch.equal(out["input_array"], plain)
    assert ((out["input_array"] == ds.vocab.mask) <= (out["input_array"] != plain)).all()


def test_masks_reproducible_and_vary_by_epoch(ds):
    ds.set_unsupervised_mode(mask_frequency=0.15)
    a = ds.fetch([1, 2], "mlm")
    b = ds.fetch([1, 2], "mlm")
    c = ds.fetch([1, 2], "mlm", epoch=1)
    assert torch.equal(a["labels"], b["labels"]) and not torch.equal(a["labels"], c["labels"])
    other = Consumer(ds.corpus, style="concat", seqlen=256, n_bytes=2)
    other.set_unsupervised_mode(mask_frequency=0.15)
    assert torch.equal(other.fetch([1, 2], "mlm")["input_array"], a["input_array"])


def test_add_cls_prepends(ds):
    ds.set_unsupervised_mode(mask_frequency=0.15, add_cls=True)
    out = ds[[0, 1], "mlm"]
    assert out["input_array"].shape == (2, ds.seqlen + 1)
    assert (out["input_array"][:, 0] == ds.vocab.cls).all()
    assert (out["labels"][:, 0] == -100).all() and (out["attention_mask"][:, 0] == 1).all()
    plain = ds[[0, 1], ["output_tensor"]]["output_tensor"]
    assert torch.equal(plain[:, 1:], ds.fetch([0, 1], ["output_tensor"])["output_tensor"][:, 1:])
    ds.set_unsupervised_mode()


def test_queries_never_fail_because_of_the_mode(ds):
    ds.set_supervised_mode()
    assert set(ds[0:2]) == {"input_array", "class"}           # the mode is the default
    assert set(ds[0:2, None]) == {"input_array"}              # explicit None forces input only
    assert set(ds[0:2, "unsupervised"]) == {"input_array", "output_tensor"}
    ds.set_unsupervised_mode()
    assert set(ds[0:2, "supervised"]) == {"input_array", "class"}
    assert set(ds[0:2]) == {"input_array", "output_tensor"}
    ds.set_mlm_mode()
    assert set(ds[0:2]) == {"input_array", "attention_mask", "labels"}
    ds.set_unsupervised_mode()


@pytest.mark.parametrize("kwargs, message", [
    ({"mask_frequency": 1.5}, "mask_frequency must be a number in"),
    ({"mask_frequency": "lots"}, "mask_frequency must be a number in"),
    ({"mask_rule": "random"}, "mask_rule must be one of"),
    ({"add_cls": 1}, "add_cls must be a bool"),
])
def test_bad_mask_settings(ds, kwargs, message):
    with pytest.raises(QueryError, match=message):
        ds.set_unsupervised_mode(**kwargs)
