"""Selections I0–I6 and queries: keys, shapes, dtypes and errors."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import Consumer, InputError, QueryError, SampleIndexError, SelectionError
from consumer.fetch.select import as_sample_ids
from consumer.util.validate import int_vector


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    from ..conftest import write_corpus
    root = tmp_path_factory.mktemp("sel")
    write_corpus(root)
    return Consumer(str(root), style="concat", seqlen=32)


def test_attributes(ds):
    assert ds.classes == ["cat", "dog", "eel"] and ds.n_classes == 3
    assert ds.class_to_id == {"cat": 0, "dog": 1, "eel": 2}
    assert ds.id_to_class == {0: "cat", 1: "dog", 2: "eel"}
    assert ds.seqlen == 32 and len(ds) == sum(ds.samples_per_class().values())
    assert ds.vocab.size == 65542


def _ids(ds, key):
    return ds[key, ["sample_id"]]["sample_id"].tolist()


def test_selection_forms(ds):
    n = len(ds)
    assert _ids(ds, 3) == [3]
    assert _ids(ds, -1) == [n - 1]
    assert _ids(ds, np.int64(2)) == [2]
    assert _ids(ds, np.uint8(2)) == [2]
    assert _ids(ds, torch.tensor(4)) == [4]
    assert _ids(ds, slice(5, 10)) == [5, 6, 7, 8, 9]
    assert _ids(ds, slice(None, None, -3))[:2] == [n - 1, n - 4]
    assert _ids(ds, [1, 4, -1]) == [1, 4, n - 1]
    assert _ids(ds, (1, 4)) == [1, 4]  # a tuple selection inside ds[sel, query]; bare ds[1, 4] is refused
    assert _ids(ds, np.array([0, 2])) == [0, 2]
    assert _ids(ds, torch.tensor([0, 2])) == [0, 2]
    mask = np.zeros(n, dtype=bool)
    mask[[1, 3]] = True
    assert _ids(ds, mask) == [1, 3]
    lo = ds.index.class_ptr
    assert _ids(ds, {"dog": [0, 1], "cat": [-1]}) == [lo[1], lo[1] + 1, lo[1] - 1]
    picked = _ids(ds, {"cat": 3, "dog": 2})
    assert len(picked) == 5 and len(set(picked)) == 5
    assert all(lo[0] <= i < lo[1] for i in picked[:3]) and all(lo[1] <= i < lo[2] for i in picked[3:])
    mixed = _ids(ds, {"cat": 1, "eel": [0]})
    assert mixed[1] == lo[2]


@pytest.mark.parametrize("key", [3, -2, slice(0, 4), [1, 2], {"cat": 2}, {"dog": [0]}, None, []])
@pytest.mark.parametrize("query, keys", [
    (None, {"input_array"}),
    ("supervised", {"input_array", "class"}),
    ("unsupervised", {"input_array", "output_tensor"}),
    ("mlm", {"input_array", "attention_mask", "labels"}),
    (["input_array", "attention_mask", "class", "file_id", "offset", "length", "sample_id"],
     {"input_array", "attention_mask", "class", "file_id", "offset", "length", "sample_id"}),
])
def test_every_form_and_query_shape(ds, key, query, keys):
    out = ds[key, query]
    assert set(out) == keys
    b = out["input_array"].shape[0]
    for name, t in out.items():
        assert t.dtype == torch.int64 and t.device.type == "cpu"
        assert tuple(t.shape) == ((b, ds.seqlen) if name in ("input_array", "attention_mask", "output_tensor",
                                                            "labels") else (b,))
    if key == []:
        assert b == 0 and out["input_array"].shape == (0, ds.seqlen)  # gperc returned shape (0,)
    if isinstance(key, int):
        assert b == 1


def test_bare_selection_is_input_only(ds):
    assert set(ds[0:2]) == {"input_array"}
    assert set(ds[{"cat": 1}]) == {"input_array"}


def test_supervised_class_ids_follow_class_to_id(tmp_path):
    from ..conftest import write_corpus
    write_corpus(tmp_path)
    ds = Consumer(str(tmp_path), class_to_id={"cat": 7, "dog": 3, "eel": 0}, metadata=None)
    out = ds[:, "supervised"]
    expected = [{"cat": 7, "dog": 3, "eel": 0}[ds.classes[c]] for c in ds.documents.doc_class]
    assert out["class"].tolist() == expected


def test_provenance_columns(ds):
    out = ds[:, ["file_id", "offset", "length", "input_array"]]
    for fid, off, length, row in zip(out["file_id"], out["offset"], out["length"], out["input_array"]):
        doc = ds.document_tokens(int(fid))
        n = min(length.item(), doc.size - off.item())
        assert (row[:n].numpy() == doc[off:off + n]).all()


@pytest.mark.parametrize("key, exc, message", [
    (10_000, SampleIndexError, "index 10000 out of range"),
    (-10_000, SampleIndexError, "index -10000 out of range"),
    ([0, 10_000], SampleIndexError, "index 10000 out of range"),
    ({"cat": [99]}, SampleIndexError, "class 'cat': index 99 out of range"),
    ({"bird": 1}, SelectionError, "unknown class 'bird'"),
    ({"cat": 10_000}, SelectionError, "asked for 10000 random samples"),
    ({"cat": -1}, SelectionError, "asked for -1 random samples"),
    ({3: 1}, SelectionError, "unknown class 3"),
    (np.zeros(3, dtype=bool), SampleIndexError, "boolean mask has length 3"),
    (1.5, TypeError, "unsupported selection float"),
    ("cat", TypeError, "unsupported selection str"),
    ([1.5], TypeError, "expected a 1-D list/array of integers"),
    ({"cat": "all"}, TypeError, "value must be a count"),
    ((1, 2, 3), TypeError, "a tuple key must be"),
])
def test_selection_errors(ds, key, exc, message):
    with pytest.raises(exc, match=message):
        ds[key]


def test_error_classes_are_builtin_subclasses(ds):
    with pytest.raises(IndexError):
        ds[10_000]
    with pytest.raises(KeyError):
        ds[{"bird": 1}]


def test_ambiguous_tuple(ds):
    with pytest.raises(TypeError, match=r"use a list, e.g. ds\[\[1, 2\]\]"):
        ds[1, 2]


@pytest.mark.parametrize("query, message", [
    ("semi", "unknown query 'semi'"),
    (["input_array", "pixels"], r"unknown column\(s\) \['pixels'\]"),
    (3, "query must be None, a preset name"),
])
def test_query_errors(ds, query, message):
    with pytest.raises(QueryError, match=message):
        ds[0, query] if not isinstance(query, int) else ds.fetch([0], query)


def test_random_selection_is_reproducible_from_seed(corpus_dir):
    a = Consumer(corpus_dir, seed=11, metadata=None)
    b = Consumer(corpus_dir, seed=11, metadata=None)
    c = Consumer(corpus_dir, seed=12, metadata=None)
    draws_a = [_ids(a, {"cat": 4, "dog": 3}) for _ in range(3)]
    assert draws_a == [_ids(b, {"cat": 4, "dog": 3}) for _ in range(3)]
    assert draws_a != [_ids(c, {"cat": 4, "dog": 3}) for _ in range(3)]
    assert draws_a[0] != draws_a[1]  # a generator, not a constant


def test_whole_class_draw_is_a_permutation(ds):
    size = ds.samples_per_class()["dog"]
    got = _ids(ds, {"dog": size})
    lo = int(ds.index.class_ptr[1])
    assert sorted(got) == list(range(lo, lo + size))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-3, 12) | st.booleans() | st.floats(0, 5) | st.just(2 ** 64 - 1),
                       min_size=0, max_size=10))
def test_a_list_of_sample_ids_is_taken_like_the_same_ids_as_an_array(values):
    """A short list of Python ints takes a fast path: what it returns, and what it refuses with which message,
    is what the general path does with the same values."""
    def outcome(fn):
        try:
            return fn().tolist()
        except InputError as exc:
            return str(exc)

    general = outcome(lambda: int_vector("sample_ids", values, 0, 9))
    got = outcome(lambda: as_sample_ids(values, 10))
    assert got == general
    if not isinstance(got, str):
        assert as_sample_ids(values, 10).dtype == np.int64
