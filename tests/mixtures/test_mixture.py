"""A mixture's selections, columns and checks: rows equal the parts' own, the part is the class, the variable-length
and scalar columns combine as if the parts' results were concatenated, and bad parts or weights are refused."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import consumer
from consumer import Consumer, InputError, SelectionError
from consumer.mixtures import Mixture, mix
from consumer.mixtures.gather import join_pieces, join_rows

from .conftest import SEQLEN

ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="module")
def m(parts) -> Mixture:
    return mix(parts, seed=11)


def _np(batch: dict) -> dict:
    return {k: v.numpy() for k, v in batch.items()}


def _equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and np.array_equal(a[k], b[k]), k


def test_what_a_mixture_is(m, parts):
    sizes = [len(p) for p in parts.values()]
    assert len(m) == sum(sizes) and m.classes == ["raw", "text", "code"] == list(m.parts)
    assert m.class_to_id == {"raw": 0, "text": 1, "code": 2}
    assert m.seed == 11 and mix(parts).seed == parts["raw"].seed
    assert m.seqlen == SEQLEN and m.n_bytes == 1 and m.vocab == parts["raw"].vocab
    assert m.index.class_ptr.tolist() == [0, *np.cumsum(sizes).tolist()]
    assert m.index.sample_class.dtype == np.int32
    assert m.index.sample_class.tolist() == sum(([i] * n for i, n in enumerate(sizes)), [])
    expected = np.concatenate([p.index.sample_tokens() for p in parts.values()])
    assert np.array_equal(m.index.sample_tokens(), expected)
    assert m.weights == pytest.approx({c: n / len(m) for c, n in zip(m.classes, sizes)})  # natural
    assert m.samples_per_class() == dict(zip(m.classes, sizes))


def test_selections_equal_the_parts_rows(m, parts):
    off = dict(zip(m.classes, m.index.class_ptr.tolist()))
    for name, part in parts.items():
        for i in (0, len(part) - 1):
            _equal(_np(m[off[name] + i]), _np(part[i, None]))
        _equal(_np(m[{name: [0, -1]}]), _np(part[[0, len(part) - 1], None]))
    ids = [off["code"] + 2, 0, off["text"] + 5, off["raw"] + 3, off["code"]]
    want = np.stack([_np(parts[n][i, None])["input_array"][0]
                     for n, i in (("code", 2), ("raw", 0), ("text", 5), ("raw", 3), ("code", 0))])
    assert np.array_equal(_np(m[ids])["input_array"], want)
    assert np.array_equal(_np(m[ids[0]:ids[0] + 1])["input_array"], want[:1])
    whole = _np(m[:])["input_array"]
    assert np.array_equal(whole, np.concatenate([_np(p[:, None])["input_array"] for p in parts.values()]))
    assert np.array_equal(_np(m[-1])["input_array"], _np(parts["code"][-1, None])["input_array"])


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_store_parts_write_their_rows_into_the_batch_in_order(parts, tmp_path, dtype):
    parts["raw"].pack(str(tmp_path / "raw"))
    stores = {"code": parts["code"], "raw": Consumer.from_packed(str(tmp_path / "raw"), style="diff", seqlen=SEQLEN),
              "files": parts["raw"]}
    mixed = mix(stores)
    rng = np.random.default_rng(0)
    for size in (2, 9, len(mixed)):
        ids = rng.choice(len(mixed), size, replace=False)
        owner = mixed.index.part_of(ids)
        local = mixed.index.local_of(ids, owner)
        width = int(mixed.index.sample_tokens()[ids].max())
        for w in (None, width):
            got = mixed.fetch_numpy(ids, None, out_dtype=dtype, width=w)["input_array"]
            assert got.dtype == np.dtype(dtype) and got.shape == (size, w or SEQLEN)
            for row, p, i in zip(got, owner.tolist(), local.tolist()):
                part = list(stores.values())[p]
                assert np.array_equal(row, part.fetch_numpy(np.array([i]), None, out_dtype=dtype, width=w)
                                      ["input_array"][0])


def test_a_part_selection_draws_from_that_part_reproducibly(m, parts):
    lo, hi = m.index.class_ptr[2], m.index.class_ptr[3]
    got = _np(m[{"code": 3}, ["input_array", "sample_id", "class"]])
    assert got["class"].tolist() == [2, 2, 2]
    assert ((got["sample_id"] >= lo) & (got["sample_id"] < hi)).all() and len(set(got["sample_id"].tolist())) == 3
    own = parts["code"].fetch_numpy(got["sample_id"] - lo)["input_array"]
    assert np.array_equal(got["input_array"], own)
    a, b = mix(parts, seed=3), mix(parts, seed=3)
    assert [_np(a[{"code": 3, "raw": 2}, ["sample_id"]])["sample_id"].tolist() for _ in range(3)] == \
        [_np(b[{"code": 3, "raw": 2}, ["sample_id"]])["sample_id"].tolist() for _ in range(3)]
    with pytest.raises(SelectionError, match="web"):
        m[{"web": 1}]


def test_the_class_column_is_the_part(m, parts):
    got = _np(m[{"raw": [1], "text": [0, 2], "code": [4]}, "supervised"])
    assert got["class"].tolist() == [0, 1, 1, 2]
    off = m.index.class_ptr
    sid = _np(m[[off[2] + 1, 3], ["sample_id", "file_id", "class"]])
    assert sid["sample_id"].tolist() == [off[2] + 1, 3] and sid["class"].tolist() == [2, 0]
    assert sid["file_id"].tolist() == [_np(parts["code"][1, ["file_id"]])["file_id"][0],
                                       _np(parts["raw"][3, ["file_id"]])["file_id"][0]]


QUERY = ["causal", "cu_seqlens", "max_seqlen", "document_ids", "position_ids", "loss_mask", "length"]


@pytest.mark.parametrize("query", [QUERY, ["causal", "cu_seqlens", "max_seqlen"], ["input_array", "cu_seqlens"]])
def test_causal_with_cu_seqlens_equals_the_parts_results_concatenated(m, parts, query):
    off = m.index.class_ptr
    picks = [("code", 1), ("raw", 0), ("code", 0), ("text", 7), ("text", 2), ("raw", 11), ("code", 3)]
    ids = np.array([off[m.class_to_id[n]] + i for n, i in picks])
    got = m.fetch_numpy(ids, query)
    assert "document_ids" in got or "document_ids" not in query
    singles = [parts[n].fetch_numpy(np.array([i]), query) for n, i in picks]
    lengths = np.concatenate([np.diff(s["cu_seqlens"]) for s in singles])
    assert got["cu_seqlens"].tolist() == [0, *np.cumsum(lengths).tolist()]
    assert got["cu_seqlens"].dtype == singles[0]["cu_seqlens"].dtype
    if "document_ids" in got:  # the pieces cover the batch's non-PAD tokens
        assert got["cu_seqlens"][-1] == (got["document_ids"] >= 0).sum()
    if "max_seqlen" in got:
        assert got["max_seqlen"].shape == () and int(got["max_seqlen"]) == max(int(s["max_seqlen"]) for s in singles)
    for k in got:
        if k not in ("cu_seqlens", "max_seqlen"):
            assert np.array_equal(got[k], np.concatenate([s[k] for s in singles])), k
    assert got["cu_seqlens"][1:].size > len(picks)  # the packed part has rows of several documents


def test_masked_queries_are_the_parts_own(m, parts):
    off = m.index.class_ptr
    for p, part in enumerate(parts.values()):
        n = min(5, len(part))
        _equal(m.fetch_numpy(np.arange(off[p], off[p] + n), "mlm", epoch=2),
               part.fetch_numpy(np.arange(n), "mlm", epoch=2))
    mixed = m.fetch_numpy(np.array([off[2], 0]), "mlm", epoch=1)
    assert np.array_equal(mixed["labels"][1], parts["raw"].fetch_numpy(np.array([0]), "mlm", epoch=1)["labels"][0])


def test_span_and_empty_and_one_part_batches(m, parts):
    got = m.fetch_numpy(np.array([0, m.index.class_ptr[2]]), "span")
    ref = [parts["raw"].fetch_numpy(np.array([0]), "span"), parts["code"].fetch_numpy(np.array([0]), "span")]
    assert ref[0]["input_array"].shape != ref[1]["input_array"].shape  # the parts' span widths differ: padded
    for k, fill in (("input_array", m.vocab.pad), ("labels", -100)):
        width = max(r[k].shape[1] for r in ref)
        assert got[k].shape == (2, width)
        for row, r in enumerate(ref):
            w = r[k].shape[1]
            assert np.array_equal(got[k][row, :w], r[k][0]) and (got[k][row, w:] == fill).all(), k
    empty = m.fetch_numpy(np.zeros(0, dtype=np.int64), ["causal", "cu_seqlens", "max_seqlen"])
    assert empty["input_array"].shape == (0, SEQLEN) and empty["cu_seqlens"].tolist() == [0]
    assert m.fetch(np.array([1, 2]), "supervised")["class"].tolist() == [0, 0]
    with pytest.raises(InputError, match="sample_ids"):
        m.fetch_numpy(np.array([len(m)]))


def test_rows_of_different_widths_are_padded_and_pieces_laid_in_row_order():
    a = np.array([[1, 2, 3], [4, 5, 6]])
    b = np.array([[7, 8]])
    out = join_rows([(np.array([0, 2]), a), (np.array([1]), b)], 3, -100)
    assert out.tolist() == [[1, 2, 3], [7, 8, -100], [4, 5, 6]]
    cu_a, doc_a = np.array([0, 2, 3, 6], dtype=np.int32), np.array([[0, 0, 1], [0, 0, 0]])
    cu_b, doc_b = np.array([0, 1], dtype=np.int32), np.array([[0, -1, -1]])
    got = join_pieces([(np.array([0, 2]), cu_a, doc_a), (np.array([1]), cu_b, doc_b)], 3)
    assert got.dtype == np.int32 and got.tolist() == [0, 2, 3, 4, 7]


def test_parts_that_do_not_agree_are_refused_naming_both(parts, tmp_path):
    files = [str(p) for p in parts["raw"].files]
    wide = Consumer(files, n_bytes=1, seqlen=16, cache_dir=False)
    with pytest.raises(InputError, match=r"parts 'raw' and 'short' disagree on seqlen: 'raw' has 32, 'short' has 16"):
        mix({"raw": parts["raw"], "short": wide})
    two = Consumer(files, n_bytes=2, seqlen=SEQLEN, cache_dir=False)
    with pytest.raises(InputError, match=r"parts 'text' and 'b2' disagree on n_bytes: 'text' has 1, 'b2' has 2"):
        mix({"text": parts["text"], "b2": two})
    with pytest.raises(InputError, match="at least one"):
        mix({})
    with pytest.raises(InputError, match=r"parts\['x'\] must be a consumer.Consumer"):
        mix({"raw": parts["raw"], "x": [1, 2]})
    with pytest.raises(InputError, match="non-empty string"):
        mix({"": parts["raw"]})
    with pytest.raises(InputError, match="must be a dict"):
        mix([parts["raw"]])


@pytest.mark.parametrize("weights, message", [
    ({"raw": -1}, r"weights\['raw'\] must be a finite number >= 0, got -1"),
    ({"raw": 1, "text": math.nan}, r"weights\['text'\] .* got nan"),
    ({"code": math.inf}, r"weights\['code'\] .* got inf"),
    ({"raw": 0, "text": 0}, "every part weight 0"),
    ({"raw": 1, "web": 2}, r"part 'web' \(weight 2\), which does not exist"),
    ({"raw": "1"}, r"weights\['raw'\] must be a finite number"),
    ({"raw": True}, r"weights\['raw'\]"),
    (lambda step: {"raw": -1}, r"weights at step 0: weights\['raw'\] must be a finite number >= 0, got -1"),
    ([(0, {"raw": 1}), (10, {"web": 1})], r"weights at step 10: weights name part 'web'"),
    ("uniform", "must be None or a dict"),
])
def test_bad_weights_are_refused_naming_the_part(parts, weights, message):
    with pytest.raises(InputError, match=message):
        mix(parts, weights=weights)


def test_weights_are_normalised_and_missing_parts_get_zero(parts):
    m = mix(parts, weights={"raw": 3, "text": 1})
    assert m.weights == {"raw": 0.75, "text": 0.25, "code": 0.0}
    assert m.get_dict()["weights"] == m.weights


def test_other_arguments_are_checked(parts):
    with pytest.raises(InputError, match="part 'raw' has sampling"):  # Megatron's blend: tests/mixtures/test_blend.py
        mix(parts, weights={"raw": 1}, sampling="megatron", num_samples=10)
    with pytest.raises(InputError, match="sampling"):
        mix(parts, sampling="other")
    with pytest.raises(InputError, match="num_samples"):
        mix(parts, num_samples=0)
    with pytest.raises(InputError, match="seed"):
        mix(parts, seed=-1)


def test_consumer_mix_is_the_function_and_import_consumer_stays_light(parts):
    assert isinstance(consumer.mix(parts), Mixture)
    assert consumer.Mixture is Mixture
    code = ("import sys, consumer; print('consumer.mixtures' in sys.modules); import consumer.mixtures.mixture; "
            "print(consumer.mix.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["False", "consumer.mixtures.mixture"]


def test_repr_and_get_dict(m, parts):
    assert repr(m) == "Mixture(parts={'raw': 12, 'text': 20, 'code': 11}, weights=None, n_bytes=1, seqlen=32)"
    d = m.get_dict()
    assert list(d["mixture"]) == m.classes and d["mode"] is None and d["mask"] == parts["raw"].get_dict()["mask"]
    assert d["total_samples"] == len(m) and d["classes"] == m.classes and d["seed"] == 11
