"""The lean packed path (``consumer.fetch.packed_rows``) against the general reader, on random selections, and its
block-wise id check on damaged stores (blocks checked lazily and all at once)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, FormatError
from consumer.fetch.packed_rows import SMALL_BATCH, PackedRows
from consumer.fetch.reader import read_rows
from consumer.sources.store import StoreFiles

from ..conftest import without_chunk_sums, write_corpus

SIZES = {"cat": [0, 1, 5, 100, 301, 2500], "dog": [6, 31, 64, 999], "eel": [250, 11, 4000]}
SETTINGS = [("diff", 16), ("diff", 700), ("concat", 32), ("concat", 333)]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Per (style, seqlen): the dataset over the files and the one over its packed store (n_bytes 1 and 2)."""
    root = tmp_path_factory.mktemp("packed-rows")
    fps = write_corpus(root / "data", SIZES)
    out = {}
    for n_bytes in (1, 2):
        for style, seqlen in SETTINGS:
            raw = Consumer(fps, cache_dir=False, style=style, seqlen=seqlen, n_bytes=n_bytes, metadata=None)
            prefix = root / f"store-{n_bytes}-{style}-{seqlen}"
            raw.pack(prefix)
            out[n_bytes, style, seqlen] = (raw, Consumer.from_packed(prefix, style=style, seqlen=seqlen), prefix)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from([(nb, s, q) for nb in (1, 2) for s, q in SETTINGS]), data=st.data(),
       dtype=st.sampled_from([np.int64, np.int32]), narrow=st.booleans())
def test_rows_written_into_another_array_are_the_rows_and_touch_nothing_else(stores, key, data, dtype, narrow):
    _, packed, _ = stores[key]
    # two rows at least: one row of a warm store takes the one-row path, a row of its own (as documented)
    ids = np.array(data.draw(st.lists(st.integers(0, len(packed) - 1), min_size=2, max_size=3 * SMALL_BATCH)),
                   dtype=np.int64)
    width = int(packed.index.sample_tokens()[ids].max()) if narrow else None
    want = packed.fetch_numpy(ids, out_dtype=dtype, width=width)["input_array"]
    total = ids.size + data.draw(st.integers(0, 5))
    pos = np.array(data.draw(st.permutations(range(total)))[:ids.size], dtype=np.int64)
    out = np.full((total, want.shape[1]), -7, dtype=dtype)
    got = packed.fetch_numpy(ids, None, out_dtype=dtype, width=width, into=(out, pos))["input_array"]
    assert got is out  # the rows were written in place, at their positions
    np.testing.assert_array_equal(out[pos], want)
    others = np.setdiff1d(np.arange(total), pos)
    assert (out[others] == -7).all()
    # a query that is not the plain rows, or an array of another width or dtype: rows of their own, out untouched
    out[:] = -7
    for query, array in ((["input_array", "sample_id"], out), (None, out[:, :-1]), (None, out.astype(np.int16))):
        res = packed.fetch_numpy(ids, query, out_dtype=dtype, width=width, into=(array, pos))
        assert res["input_array"] is not array and (out == -7).all()
        np.testing.assert_array_equal(res["input_array"], want)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from([(nb, s, q) for nb in (1, 2) for s, q in SETTINGS]), data=st.data(),
       dtype=st.sampled_from([np.int64, np.int32]), narrow=st.booleans())
def test_the_lean_path_gives_the_general_readers_rows(stores, key, data, dtype, narrow):
    raw, packed, _ = stores[key]
    n = len(packed)
    ids = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=3 * SMALL_BATCH)), dtype=np.int64)
    width = None
    if narrow and ids.size:
        width = int(packed.index.sample_tokens()[ids].max())
    got = packed.fetch_numpy(ids, out_dtype=dtype, width=width)["input_array"]
    ref, _ = read_rows(packed.index, packed.documents, ids, width=width, dtype=dtype)  # no runs: the general path
    assert got.dtype == np.dtype(dtype) and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, raw.fetch_numpy(ids, out_dtype=dtype, width=width)["input_array"])
    if ids.size:  # the tensors of ds[...] and ds.fetch hold the int64 rows of the full width
        full = read_rows(packed.index, packed.documents, ids)[0]
        np.testing.assert_array_equal(packed[ids.tolist()]["input_array"].numpy(), full)
        np.testing.assert_array_equal(packed.fetch(ids)["input_array"].numpy(), full)
        np.testing.assert_array_equal(packed[int(ids[0])]["input_array"].numpy(), full[:1])

def _damage(prefix, position: int, value: int) -> None:
    """Write ``value`` over token ``position`` of a Megatron store of int32 tokens, in place."""
    with open(f"{prefix}.bin", "r+b") as f:
        f.seek(4 * position)
        f.write(int(value).to_bytes(4, "little", signed=True))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), eager=st.booleans(), shift=st.sampled_from([2, 5, 9]), bad=st.sampled_from([70000, -3]))
def test_block_checks_refuse_exactly_the_samples_holding_a_bad_id(tmp_path_factory, data, eager, shift, bad):
    root = tmp_path_factory.mktemp("damaged")
    fps = write_corpus(root / "data", SIZES)
    prefix = root / "store"
    Consumer(fps, cache_dir=False, style="concat", seqlen=32, n_bytes=2, metadata=None).pack(prefix)
    clean = Consumer.from_packed(prefix, style="concat", seqlen=32)
    n = len(clean)
    rows = clean.fetch_numpy(np.arange(n))["input_array"]
    pr = PackedRows(clean.index, clean.documents, block_shift=shift, eager_bytes=1 << 30 if eager else 0)
    start, length = pr.start, pr.length
    total = int((start + length).max())
    position = data.draw(st.integers(0, total - 1) | st.sampled_from([0, total - 1]))  # the ends: partial blocks
    holders = set(np.flatnonzero((start <= position) & (position < start + length)).tolist())
    before = data.draw(st.lists(st.integers(0, n - 1), max_size=12))  # served (and marked) before the damage
    if before:
        np.testing.assert_array_equal(pr.rows(np.array(before), None, np.dtype(np.int64)), rows[before])
    time.sleep(0.01)  # past the file system's timestamp tick: the write moves the change time
    _damage(prefix, position, bad)
    for _ in range(3):
        ids = data.draw(st.lists(st.integers(0, n - 1) | st.sampled_from(sorted(holders)), max_size=3 * SMALL_BATCH))
        hit = [i for i in ids if i in holders]
        if hit:
            with pytest.raises(FormatError, match=rf"sample {hit[0]}: token ids must be in \[0, 65542\), got "
                                                  rf"\[{bad}\]"):
                pr.rows(np.array(ids, dtype=np.int64), None, np.dtype(np.int64))
        else:
            np.testing.assert_array_equal(pr.rows(np.array(ids, dtype=np.int64), None, np.dtype(np.int64)),
                                          rows[np.array(ids, dtype=np.int64)])


def test_a_store_larger_than_the_eager_bound_is_checked_block_by_block(tmp_path):
    fps = write_corpus(tmp_path / "data", SIZES)
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, style="diff", seqlen=64, n_bytes=2, metadata=None).pack(prefix)
    summed = Consumer.from_packed(prefix, style="diff", seqlen=64)
    pr = PackedRows(summed.index, summed.documents, block_shift=3, eager_bytes=0)
    assert pr.by_chunks and pr.rows(np.arange(len(summed)), None, np.dtype(np.int64)) is not None
    assert not pr.blocks.any()  # with chunk sums, the ids are checked with the chunks: no block is read
    without_chunk_sums(prefix)  # the block checks are those of a store without chunk sums
    ds = Consumer.from_packed(prefix, style="diff", seqlen=64)
    pr = PackedRows(ds.index, ds.documents, block_shift=3, eager_bytes=0)
    assert pr.rows(np.array([0]), None, np.dtype(np.int64)) is not None
    touched = int(pr.blocks.sum())
    assert 0 < touched < pr.blocks.size  # only the blocks of sample 0 were read
    pr.rows(np.arange(len(ds)), None, np.dtype(np.int64))
    covered = np.zeros(pr.blocks.size, dtype=bool)
    for s, m in zip(pr.start.tolist(), pr.length.tolist()):
        if m:
            covered[s >> 3:((s + m - 1) >> 3) + 1] = True
    assert np.array_equal(pr.blocks, covered)  # every block a sample uses, and no other, is marked clean
    eager = PackedRows(ds.index, ds.documents)
    eager.rows(np.array([0]), None, np.dtype(np.int64))
    assert eager.blocks.all()  # a small store: all of it checked at the first fetch


def test_samples_that_are_not_one_store_range_take_the_general_reader(tmp_path):
    fps = write_corpus(tmp_path / "data", SIZES)
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, style="concat", seqlen=32, n_bytes=2, metadata=None).pack(prefix)
    ds = Consumer.from_packed(prefix, style="concat", seqlen=32)
    docs = ds.documents
    tokens = docs.source.tokens
    ptr = tokens.doc_ptr.copy()
    ptr[[1, 2]] = ptr[[2, 1]]  # documents 1 and 2 swapped in the store (as in a merged store): windows over them break
    source = StoreFiles(dataclasses.replace(tokens, doc_ptr=ptr), docs.paths, docs.doc_size)
    swapped = dataclasses.replace(docs, source=source)
    pr = PackedRows(ds.index, swapped)
    broken = np.flatnonzero(pr.start < 0)
    whole = np.flatnonzero(pr.start >= 0)
    assert broken.size and whole.size
    assert pr.rows(broken[:1], None, np.dtype(np.int64)) is None
    assert pr.rows(np.arange(len(ds)), None, np.dtype(np.int64)) is None
    np.testing.assert_array_equal(pr.rows(whole[:3], None, np.dtype(np.int64)),
                                  ds.fetch_numpy(whole[:3])["input_array"])
