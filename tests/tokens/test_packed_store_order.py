"""``pack`` of a ``style="packed"`` dataset writes its documents in the store order of its rows
(consumer/tokens/packing.py ``store_order``, consumer/packed/write.py ``pack_order``), so the store served packed
gives the dataset's rows, id for id, each row one contiguous store range unless it holds the last pieces of two long
documents; other styles keep corpus order.

The index-level claim (plan, renumber the documents in store order, plan again: the same index, every row with at
most one last piece contiguous) is a hypothesis property; the real-file tests pack and reopen stores.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.fetch.reader import packed_runs
from consumer.packed.verify import verify_packed
from consumer.packed.write import pack_order
from consumer.tokens.index import build_index
from consumer.tokens.packing import store_order

from ..conftest import write_corpus

SEQLEN = 32
# with metadata=None a document is its bytes and EOF (n_bytes=1): many equal lengths, long ones with tails of
# equal and different lengths (two tails can share a row), some exact multiples of SEQLEN (no tail)
SIZES = {"a": [4] * 7 + [9] * 6 + [15] * 4 + [31] * 3 + [40, 40, 45, 63, 70, 95, 127, 3, 20, 27, 11],
         "b": [2] * 5 + [30, 31, 36, 37, 38, 63, 100, 14, 14, 17, 6, 6, 6],
         "c": [50, 9, 9, 9, 1, 22]}
COLUMNS = ["input_array", "class", "length"]


def _tails_per_row(ix) -> np.ndarray:
    """Per row: how many last pieces of long documents (start > 0, shorter than a row) it holds."""
    tail = (ix.seg_start > 0) & (ix.seg_len < ix.seqlen)
    counts = np.diff(ix.seg_ptr)
    out = np.zeros(counts.size, dtype=np.int64)
    nonempty = counts > 0
    out[nonempty] = np.add.reduceat(tail.astype(np.int64), ix.seg_ptr[:-1][nonempty])
    return out


def _contiguous(ix, doc_len: np.ndarray) -> np.ndarray:
    """Per row: its segments one range of a store holding the documents back to back in id order."""
    ptr = np.concatenate(([0], np.cumsum(doc_len)))
    src = ptr[ix.seg_doc] + ix.seg_start
    follows = np.ones(src.size, dtype=bool)
    follows[1:] = src[1:] == src[:-1] + ix.seg_len[:-1]
    follows[ix.seg_ptr[:-1]] = True
    return np.add.reduceat(~follows, ix.seg_ptr[:-1]) == 0


@pytest.fixture(scope="module", params=[None, "file"], ids=["no-header", "headers"])
def packed_pair(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("order")
    write_corpus(root / "data", SIZES, seed=5)
    ds = Consumer(str(root / "data"), style="packed", n_bytes=1, seqlen=SEQLEN, metadata=request.param,
                  cache_dir=False, seed=7)
    ds.pack(str(root / "store"))
    store = Consumer.from_packed(str(root / "store"), style="packed", seqlen=SEQLEN, cache_dir=False, seed=7)
    return ds, store, str(root / "store")


def test_the_store_serves_the_datasets_rows_id_for_id(packed_pair):
    ds, store, _ = packed_pair
    assert len(store) == len(ds) and int((ds.documents.doc_len > SEQLEN).sum()) >= 8
    ids = np.arange(len(ds))
    want, got = ds.fetch_numpy(ids, COLUMNS), store.fetch_numpy(ids, COLUMNS)
    for name in COLUMNS:
        assert np.array_equal(got[name], want[name]), name
    assert sorted(map(tuple, got["input_array"].tolist())) == sorted(map(tuple, want["input_array"].tolist()))


def test_the_file_table_follows_the_store_order_and_verifies(packed_pair):
    ds, store, prefix = packed_pair
    order = store_order(ds.index.seg_doc, ds.index.seg_start, len(ds.documents), SEQLEN)
    assert not np.array_equal(order, np.arange(order.size))  # the corpus order was changed
    assert list(store.documents.paths) == [ds.documents.paths[i] for i in order.tolist()]
    assert np.array_equal(store.documents.doc_class, ds.documents.doc_class[order])  # classes still grouped
    assert np.array_equal(store.documents.doc_len, ds.documents.doc_len[order])
    for d in range(0, len(store.documents), 7):
        assert np.array_equal(store.document_tokens(d), ds.document_tokens(int(order[d])))
    assert verify_packed(prefix)["ok"]
    assert pack_order(store.documents, store.spec, store.index) is None  # a fixed point: repacked as it is


def test_every_row_with_at_most_one_last_piece_is_one_store_range(packed_pair):
    _, store, _ = packed_pair
    runs = packed_runs(store.index, store.documents)
    tails = _tails_per_row(store.index)
    assert np.array_equal(runs >= 0, tails <= 1)  # two last pieces in a row: never one range
    assert (tails >= 2).any() and (runs >= 0).mean() >= 0.8
    mixed = np.diff(store.index.seg_ptr) > 1
    assert (runs[mixed & (tails <= 1)] >= 0).all() and mixed.sum() >= 10


def _replan(doc_len: np.ndarray, doc_class: np.ndarray, seqlen: int, long_files: str) -> float:
    """Plan, renumber the documents in store order, plan again: asserts the claim, returns the contiguous share."""
    first = build_index("packed", doc_len, doc_class, 3, seqlen, long_files=long_files)
    order = store_order(first.seg_doc, first.seg_start, doc_len.size, seqlen)
    assert sorted(order.tolist()) == list(range(doc_len.size))
    assert (np.diff(doc_class[order]) >= 0).all()
    renumber = np.empty_like(order)
    renumber[order] = np.arange(order.size)
    again = build_index("packed", doc_len[order], doc_class[order], 3, seqlen, long_files=long_files)
    for name in ("seg_ptr", "seg_start", "seg_len", "seg_col", "sample_class", "class_ptr"):
        assert np.array_equal(getattr(again, name), getattr(first, name)), name
    assert np.array_equal(again.seg_doc, renumber[first.seg_doc])  # the same rows, id for id
    assert np.array_equal(store_order(again.seg_doc, again.seg_start, doc_len.size, seqlen), np.arange(order.size))
    tails = _tails_per_row(again)
    contiguous = _contiguous(again, doc_len[order])
    assert np.array_equal(contiguous, tails <= 1)
    if long_files == "truncate":
        assert contiguous.all()
    return float(contiguous.mean()) if contiguous.size else 1.0


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.lists(st.tuples(st.integers(1, 150), st.integers(0, 2)), min_size=1, max_size=80),
       st.sampled_from(["windows", "truncate"]), st.booleans())
def test_planning_again_in_store_order_gives_the_same_index_with_contiguous_rows(seqlen, docs, long_files, few):
    if few:  # few distinct lengths: many ties
        docs = [(1 + (n % 4) * max(seqlen // 3, 1) + (n % 3) * seqlen, c) for n, c in docs]
    docs = sorted(docs, key=lambda d: d[1])
    _replan(np.array([d[0] for d in docs]), np.array([d[1] for d in docs]), seqlen, long_files)


@pytest.mark.parametrize("shape", ["small", "lognormal", "few_lengths"])
@pytest.mark.parametrize("long_files", ["windows", "truncate"])
def test_the_claim_on_larger_corpora(shape, long_files):
    """Thousands of documents shaped like benchmarks/corpora.py's (tokens ~ bytes / 2, rows of 2048 tokens)."""
    rng = np.random.default_rng(len(shape))
    n, seqlen = 4000, 2048
    size = {"small": rng.integers(256, 4097, n),
            "lognormal": np.clip(rng.lognormal(np.log(2048), 1.6, n), 16, 1 << 20).astype(np.int64),
            "few_lengths": rng.choice([100, 700, 2000, 4100, 5000], n)}[shape]
    share = _replan(size // 2 + 12, np.sort(rng.choice(3, n, p=[0.6, 0.3, 0.1])), seqlen, long_files)
    assert share >= {"small": 1.0, "lognormal": 0.9, "few_lengths": 0.8}[shape] or long_files == "truncate"


@pytest.mark.parametrize("style", ["diff", "concat"])
def test_other_styles_keep_corpus_order(tmp_path, style):
    fps = write_corpus(tmp_path / "data", SIZES, seed=2)
    ds = Consumer(fps, style=style, n_bytes=1, seqlen=SEQLEN, metadata=None, cache_dir=False)
    assert pack_order(ds.documents, ds.spec, ds.index) is None
    ds.pack(str(tmp_path / "store"))
    store = Consumer.from_packed(str(tmp_path / "store"), style=style, seqlen=SEQLEN, cache_dir=False)
    assert list(store.documents.paths) == list(ds.documents.paths)
    ids = np.arange(len(ds))
    assert np.array_equal(store.fetch_numpy(ids)["input_array"], ds.fetch_numpy(ids)["input_array"])
    assert (packed_runs(store.index, store.documents) >= 0).all()


def test_a_pack_on_an_engine_writes_the_same_store(tmp_path):
    fps = write_corpus(tmp_path / "data", SIZES, seed=3)
    ds = Consumer(fps, style="packed", n_bytes=1, seqlen=SEQLEN, metadata=None, cache_dir=False)
    ds.pack(str(tmp_path / "local"))
    with ThreadPoolExecutor(2) as pool:
        ds.pack(str(tmp_path / "engine"), engine=pool)
    for suffix in (".bin", ".idx", ".consumer.npz", ".consumer.sums"):
        assert (tmp_path / f"engine{suffix}").read_bytes() == (tmp_path / f"local{suffix}").read_bytes(), suffix
    store = Consumer.from_packed(str(tmp_path / "engine"), style="packed", seqlen=SEQLEN, cache_dir=False)
    ids = np.arange(len(ds))
    assert np.array_equal(store.fetch_numpy(ids)["input_array"], ds.fetch_numpy(ids)["input_array"])


def test_a_corpus_order_store_served_packed_repacks_into_row_order(tmp_path):
    """A store's documents (StoreFiles) reordered too: the repacked store serves the same rows, all one range here
    but for rows with two last pieces."""
    fps = write_corpus(tmp_path / "data", SIZES, seed=4)
    Consumer(fps, style="concat", n_bytes=1, seqlen=SEQLEN, metadata=None, cache_dir=False).pack(str(tmp_path / "a"))
    old = Consumer.from_packed(str(tmp_path / "a"), style="packed", seqlen=SEQLEN, cache_dir=False)
    assert pack_order(old.documents, old.spec, old.index) is not None
    old.pack(str(tmp_path / "b"))
    new = Consumer.from_packed(str(tmp_path / "b"), style="packed", seqlen=SEQLEN, cache_dir=False)
    ids = np.arange(len(old))
    assert np.array_equal(new.fetch_numpy(ids)["input_array"], old.fetch_numpy(ids)["input_array"])
    runs = packed_runs(new.index, new.documents)
    assert np.array_equal(runs >= 0, _tails_per_row(new.index) <= 1)
    assert (packed_runs(old.index, old.documents) >= 0).mean() < (runs >= 0).mean()
    assert verify_packed(str(tmp_path / "b"))["ok"]


def test_a_batch_of_rows_some_of_one_range_some_not_equals_the_files_rows(tmp_path) -> None:
    """A batch mixing rows that are one store range with rows that are not (the store written in corpus order by a
    concat dataset, served packed): the first by the lean path, the others by the general reader, the same rows."""
    import numpy as np

    from consumer import Consumer
    from consumer.fetch.packed_rows import SMALL_BATCH

    rng = np.random.default_rng(7)
    for i in range(120):
        folder = tmp_path / "data" / ("a" if i % 3 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:03d}.bin").write_bytes(rng.integers(0, 256, int(rng.integers(5, 300)), dtype=np.uint8)
                                               .tobytes())
    files = Consumer(str(tmp_path / "data"), style="packed", n_bytes=1, seqlen=256, cache_dir=False)
    concat = Consumer(str(tmp_path / "data"), style="concat", n_bytes=1, seqlen=256, cache_dir=False)
    concat.pack(str(tmp_path / "store"))  # corpus order: a packed row is one range only by chance
    store = Consumer.from_packed(str(tmp_path / "store"), style="packed", seqlen=256, cache_dir=False)
    from consumer.fetch.reader import packed_runs
    runs = packed_runs(store.index, store.documents) >= 0
    assert runs.any() and not runs.all()
    ranged, scattered = np.flatnonzero(runs), np.flatnonzero(~runs)
    k = max(SMALL_BATCH + 2, 2 * min(len(scattered), 4))
    ids = np.concatenate([ranged[:k - min(len(scattered), k // 2)], scattered[:k // 2]])
    np.random.default_rng(0).shuffle(ids)
    assert 2 * runs[ids].sum() >= ids.size > SMALL_BATCH and not runs[ids].all()
    np.testing.assert_array_equal(store.fetch_numpy(ids)["input_array"], files.fetch_numpy(ids)["input_array"])
