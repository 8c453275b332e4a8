"""style="packed": whole documents placed into rows by best-fit decreasing, per class (consumer/tokens/packing.py).

The vectorised plan is checked against a plain sequential BFD written here; the index against the contract (every
token once, only long documents cut, tiled rows of one class); a real dataset end to end (selections, decoding, the
loader and its resume, JSON round trip) and the refusals (``long_files="crop"``, Megatron sampling).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import Consumer, InputError
from consumer.spec import Spec
from consumer.tokens.index import build_index, padding_share
from consumer.tokens.packing import _stable_order, plan_rows

from ..conftest import write_corpus


def sequential_bfd(lengths: list[int], classes: list[int], seqlen: int) -> tuple[np.ndarray, np.ndarray]:
    """Best-fit decreasing, one item at a time: items by length descending then item order; each into the row of
    its class with the least room that fits it, equal rooms to the row whose last item was placed first; else a new
    row. Rows renumbered by (class, opening order), as :func:`plan_rows` numbers them; then the tie rule: the items
    of each (class, length), in item order, over that group's rows in ascending order."""
    rows: list[list[int]] = []  # [class, room, time of the last placement]
    assign = [0] * len(lengths)
    for t, i in enumerate(sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))):
        fits = [r for r, (c, room, _) in enumerate(rows) if c == classes[i] and room >= lengths[i]]
        if fits:
            best = min(fits, key=lambda r: (rows[r][1], rows[r][2]))
        else:
            rows.append([classes[i], seqlen, t])
            best = len(rows) - 1
        rows[best][1] -= lengths[i]
        rows[best][2] = t
        assign[i] = best
    row_class = np.array([r[0] for r in rows], dtype=np.int64)
    by_class = np.argsort(row_class, kind="stable")
    rank = np.empty(len(rows), dtype=np.int64)
    rank[by_class] = np.arange(len(rows))
    row = rank[np.array(assign, dtype=np.int64)]
    groups: dict[tuple[int, int], list[int]] = {}
    for i in range(len(lengths)):
        groups.setdefault((classes[i], lengths[i]), []).append(i)
    for members in groups.values():  # members in item order
        row[members] = sorted(row[members].tolist())
    return row, row_class[by_class]


@st.composite
def items(draw, max_seqlen: int = 24, max_items: int = 60):
    seqlen = draw(st.integers(1, max_seqlen))
    n = draw(st.integers(1, max_items))
    lengths = draw(st.lists(st.integers(1, seqlen), min_size=n, max_size=n))
    classes = sorted(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    return lengths, classes, seqlen


@settings(max_examples=400, deadline=None)
@given(items())
def test_the_plan_is_sequential_best_fit_decreasing(case):
    lengths, classes, seqlen = case
    row, row_class = plan_rows(np.array(lengths), np.array(classes), seqlen)
    want_row, want_class = sequential_bfd(lengths, classes, seqlen)
    assert row.tolist() == want_row.tolist()  # every item in the same row, the same number of rows
    assert row_class.tolist() == want_class.tolist()


@pytest.mark.parametrize("shape", ["uniform", "lognormal", "few_lengths"])
def test_the_plan_is_sequential_bfd_on_larger_corpora(shape):
    """Thousands of items: rows wait and rejoin many times, their runs and layers merge."""
    rng = np.random.default_rng(len(shape))
    seqlen, n = 97, 2500
    lengths = {"uniform": rng.integers(1, seqlen + 1, n),
               "lognormal": np.clip(rng.lognormal(np.log(seqlen / 6), 1.0, n).astype(int), 1, seqlen),
               "few_lengths": rng.choice([1, 2, 32, 49, seqlen], n)}[shape]
    classes = np.sort(rng.integers(0, 3, n))
    row, row_class = plan_rows(lengths, classes, seqlen)
    want_row, want_class = sequential_bfd(lengths.tolist(), classes.tolist(), seqlen)
    assert np.array_equal(row, want_row) and np.array_equal(row_class, want_class)


@pytest.mark.parametrize("bound", [1, 7, 2**16, 2**16 + 1, 2**40])
def test_the_radix_order_is_a_stable_argsort(bound):
    key = np.random.default_rng(bound).integers(0, bound, 5000, dtype=np.int64)
    assert np.array_equal(_stable_order(key, bound), np.argsort(key, kind="stable"))


def test_an_empty_corpus_has_no_rows():
    ix = build_index("packed", np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 2, 8)
    assert len(ix) == 0 and ix.class_ptr.tolist() == [0, 0, 0] and ix.tiled


def _segments_by_doc(ix) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for d, a, n in zip(ix.seg_doc.tolist(), ix.seg_start.tolist(), ix.seg_len.tolist()):
        out.setdefault(d, []).append((a, n))
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.lists(st.tuples(st.integers(1, 130), st.integers(0, 2)), min_size=1, max_size=50),
       st.sampled_from(["windows", "truncate"]))
def test_every_token_once_only_long_documents_cut_rows_tiled_and_of_one_class(seqlen, docs, long_files):
    docs = sorted(docs, key=lambda d: d[1])
    doc_len, doc_class = np.array([d[0] for d in docs]), np.array([d[1] for d in docs])
    ix = build_index("packed", doc_len, doc_class, 3, seqlen, long_files=long_files)
    assert ix.tiled and (ix.sample_tokens() <= seqlen).all() and (ix.sample_tokens() > 0).all()
    assert ix.seg_len.dtype == np.int32 and ix.seg_col.dtype == np.int32 and ix.seg_start.dtype == np.int64
    rows = np.repeat(np.arange(len(ix)), np.diff(ix.seg_ptr))
    assert (doc_class[ix.seg_doc] == ix.sample_class[rows]).all()  # a row's class is every document's class
    assert np.array_equal(ix.class_ptr, np.concatenate(([0], np.cumsum(np.bincount(ix.sample_class, minlength=3)))))
    assert (np.diff(ix.sample_class) >= 0).all()
    key = (ix.seg_start == 0) * 10**12 + ix.seg_doc.astype(np.int64) * 10**6 + ix.seg_start
    assert all((np.diff(key[a:b]) > 0).all() for a, b in zip(ix.seg_ptr[:-1], ix.seg_ptr[1:]))  # a last piece first
    by_doc = _segments_by_doc(ix)
    assert sorted(by_doc) == list(range(doc_len.size))
    for d, parts in by_doc.items():
        parts.sort()
        keep = doc_len[d] if long_files == "windows" else min(doc_len[d], seqlen)
        assert [a for a, _ in parts] == list(range(0, keep, seqlen))  # pieces start at k * seqlen, none twice
        assert sum(n for _, n in parts) == keep
    cut = sum(len(p) > 1 for p in by_doc.values())
    assert cut == (int((doc_len > seqlen).sum()) if long_files == "windows" else 0)
    full = ix.sample_tokens() == seqlen
    assert int(full.sum()) >= int((doc_len // seqlen).sum() if long_files == "windows" else (doc_len >= seqlen).sum())


def test_padding_is_under_one_percent_on_many_short_documents():
    rng = np.random.default_rng(0)
    seqlen = 1024
    doc_len = rng.integers(1, seqlen // 4 + 1, 20_000)
    doc_class = np.sort(rng.integers(0, 4, doc_len.size))
    ix = build_index("packed", doc_len, doc_class, 4, seqlen)
    assert padding_share(ix) <= 0.01
    assert int(ix.sample_tokens().sum()) == int(doc_len.sum())


# ---------------------------------------------------------------------------------------------- a real dataset

SIZES = {"a": [0, 1, 5, 30, 62, 63, 64, 150, 9, 17, 40], "b": [10, 20, 40, 3, 200], "c": [128, 7, 44]}
SEQLEN = 64


@pytest.fixture(scope="module")
def fps(tmp_path_factory) -> dict[str, list[str]]:
    return write_corpus(tmp_path_factory.mktemp("packed") / "data", SIZES)


@pytest.fixture(scope="module")
def ds(fps) -> Consumer:
    return Consumer(fps, style="packed", seqlen=SEQLEN, n_bytes=1, metadata=None, seed=3)


def test_a_class_selection_gives_rows_of_that_class_only(ds):
    out = ds[{"a": 3}, ["input_array", "class", "sample_id"]]
    a = ds.class_to_id["a"]
    assert out["class"].tolist() == [a] * 3
    lo, hi = ds.index.class_ptr[a], ds.index.class_ptr[a + 1]
    assert all(lo <= s < hi for s in out["sample_id"].tolist())
    assert out["input_array"].shape == (3, SEQLEN)


def test_supervised_rows_by_id(ds):
    out = ds[[0, 1], "supervised"]
    assert set(out) == {"input_array", "class"}
    assert out["class"].tolist() == ds.index.sample_class[[0, 1]].tolist()


def test_rows_decode_back_to_the_documents_tokens(ds):
    ix, pad = ds.index, ds.vocab.pad
    rows = ds[list(range(len(ds))), ["input_array"]]["input_array"].numpy()
    seen = {}
    for s in range(len(ds)):
        end = 0
        for g in range(ix.seg_ptr[s], ix.seg_ptr[s + 1]):
            d, a, n, c = (int(x[g]) for x in (ix.seg_doc, ix.seg_start, ix.seg_len, ix.seg_col))
            assert rows[s, c:c + n].tolist() == ds.document_tokens(d)[a:a + n].tolist()
            seen.setdefault(d, []).append((a, n))
            end = c + n
        assert (rows[s, end:] == pad).all()
    for d in range(len(ds.files)):  # windows (the packed default): every token of every file once
        n_tokens = len(ds.document_tokens(d))
        assert sorted(seen[d]) == [(a, min(SEQLEN, n_tokens - a)) for a in range(0, n_tokens, SEQLEN)]
    assert ds.long_files == "windows" and "long_files" not in repr(ds)


def test_the_loader_with_balance_and_ranks_resumes(ds):
    kw = {"batch_size": 4, "balance": "uniform", "world_size": 2, "query": ["sample_id", "class"]}
    for rank in (0, 1):
        reference = ds.dataloader(rank=rank, **kw)
        whole = [b["sample_id"].tolist() for _ in range(2) for b in reference]  # two epochs
        first = ds.dataloader(rank=rank, **kw)
        it = iter(first)
        head = [next(it)["sample_id"].tolist()]  # one batch of the two of an epoch
        state = json.loads(json.dumps(first.state_dict()))
        again = ds.dataloader(rank=rank, **kw)
        again.load_state_dict(state)
        rest = [b["sample_id"].tolist() for _ in range(2) for b in again]  # the rest of epoch 0, then epoch 1
        assert head + rest == whole and len(head) < len(whole) // 2
        assert all(0 <= s < len(ds) for b in whole for s in b)


def test_get_dict_and_json_round_trip(ds, tmp_path):
    d = ds.get_dict(include_files=True)
    assert (d["style"], d["long_files"]) == ("packed", "windows")
    again = Consumer.from_json(ds.to_json(include_files=True), cache_dir=tmp_path)
    assert again.spec.key_dict() == ds.spec.key_dict()
    for name in ("seg_ptr", "seg_doc", "seg_start", "seg_len", "seg_col", "sample_class", "class_ptr"):
        assert np.array_equal(getattr(again.index, name), getattr(ds.index, name)), name
    assert Spec.from_dict(d).long_files == "windows"


def test_truncate_keeps_the_first_seqlen_tokens(fps):
    short = Consumer(fps, style="packed", seqlen=SEQLEN, n_bytes=1, metadata=None, long_files="truncate")
    assert int(short.index.sample_tokens().sum()) == int(np.minimum(short.documents.doc_len, SEQLEN).sum())
    assert "long_files='truncate'" in repr(short)


def test_a_store_served_packed_gives_the_same_rows(ds, tmp_path):
    ds.pack(str(tmp_path / "store"))
    store = Consumer.from_packed(str(tmp_path / "store"), style="packed", seqlen=SEQLEN, seed=3)
    assert store.long_files == "windows" and len(store) == len(ds)
    ids = np.arange(len(ds))
    for name, column in ds.fetch_numpy(ids, ["input_array", "class", "length"]).items():
        assert np.array_equal(store.fetch_numpy(ids, ["input_array", "class", "length"])[name], column), name


# ------------------------------------------------------------------------------------------ refusals, defaults

def test_crop_is_refused_with_the_accepted_values(ds):
    with pytest.raises(InputError, match=r"long_files with style='packed' must be one of \['windows', 'truncate'\], "
                                         r"got 'crop'"):
        Consumer(ds.files, style="packed", seqlen=SEQLEN, long_files="crop")
    with pytest.raises(InputError, match="long_files"):
        build_index("packed", np.array([3]), np.array([0]), 1, 4, long_files="crop")


def test_megatron_sampling_refuses_packed():
    with pytest.raises(InputError, match=r"sampling='megatron' needs style='concat'.*got style='packed'"):
        Spec(style="packed", seqlen=64, sampling="megatron")


def test_the_default_long_files_is_the_styles():
    assert Spec(style="packed").long_files == "windows"
    for style in ("diff", "concat"):
        assert Spec(style=style).key_dict()["long_files"] == "truncate"
        assert Spec(style=style).to_dict()["long_files"] == "truncate"
    assert Spec(style="diff", long_files="crop").long_files == "crop"
