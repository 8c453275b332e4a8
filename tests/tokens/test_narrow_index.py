"""Memory at scale: int32 sample-index fields and packed paths (PathList) serve exactly what int64 and lists did."""

import dataclasses
import os
import tempfile

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.fetch.reader import packed_runs, read_rows
from consumer.sources.paths import PathList
from consumer.tokens.index import INDEX_ARRAYS, SampleIndex, build_index, index_dtype
from consumer.tokens.megatron_index import megatron_sample_index

WIDE = ("seg_doc", "seg_len", "seg_col", "sample_class")


def _widened(index: SampleIndex) -> SampleIndex:
    """The same index with every field int64 (what every index was before the narrow fields)."""
    return dataclasses.replace(index, **{k: np.asarray(getattr(index, k), dtype=np.int64) for k in INDEX_ARRAYS})


def test_index_dtype_bounds():
    assert index_dtype(1) == np.int32 and index_dtype(2**31) == np.int32
    assert index_dtype(2**31 + 1) == np.int64 and index_dtype(2**40) == np.int64
    assert np.iinfo(index_dtype(2**31)).max == 2**31 - 1  # values < bound fit


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=30), st.integers(1, 4), st.integers(1, 600),
       st.sampled_from([("concat", "truncate"), ("diff", "truncate"), ("diff", "windows")]))
def test_narrow_fields_equal_the_int64_index(doc_len, n_classes, seqlen, style):
    doc_class = np.sort(np.arange(len(doc_len)) % n_classes)
    idx = build_index(style[0], np.array(doc_len), doc_class, n_classes, seqlen, long_files=style[1])
    for k in WIDE:
        assert getattr(idx, k).dtype == np.int32, k
    for k in ("seg_ptr", "seg_start", "class_ptr"):
        assert getattr(idx, k).dtype == np.int64, k
    wide = _widened(idx)
    np.testing.assert_array_equal(idx.sample_tokens(), wide.sample_tokens())
    ids = np.arange(len(idx))
    for got, want in zip(idx.segments_of(ids), wide.segments_of(ids)):
        np.testing.assert_array_equal(got, want)


def test_megatron_index_fields_are_narrow():
    idx = megatron_sample_index(np.array([40, 7, 300, 12]), np.array([0, 0, 1, 1]), 2, 64, seed=3)
    assert all(getattr(idx, k).dtype == np.int32 for k in WIDE) and idx.seg_start.dtype == np.int64


def _write_corpus(root: str, sizes: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    for i, n in enumerate(sizes):
        folder = os.path.join(root, f"c{i % 3}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"f{i:03d}.bin"), "wb") as f:
            f.write(rng.integers(0, 256, n, dtype=np.uint8).tobytes())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 700), min_size=1, max_size=12), st.integers(1, 300), st.sampled_from([1, 2]),
       st.sampled_from([("concat", "truncate"), ("diff", "truncate"), ("diff", "windows"), ("diff", "crop")]),
       st.booleans())
def test_int32_and_int64_indexes_fetch_the_same(sizes, seqlen, n_bytes, style, headers):
    with tempfile.TemporaryDirectory() as tmp:
        _write_corpus(os.path.join(tmp, "data"), sizes, len(sizes) + seqlen)
        ds = Consumer(os.path.join(tmp, "data"), style=style[0], long_files=style[1], seqlen=seqlen,
                      n_bytes=n_bytes, metadata="file" if headers else None, cache_dir=False)
        narrow, wide = ds.index, _widened(ds.index)
        ids = np.arange(len(ds))
        rows_n, mask_n = read_rows(narrow, ds.documents, ids, content_mask=True)
        rows_w, mask_w = read_rows(wide, ds.documents, ids, content_mask=True)
        np.testing.assert_array_equal(rows_n, rows_w)
        np.testing.assert_array_equal(mask_n, mask_w)
        out = ds.fetch_numpy(ids, ["input_array", "file_id", "class", "offset", "length"])
        assert out["file_id"].dtype == np.int64 and out["class"].dtype == np.int64
        np.testing.assert_array_equal(out["file_id"], wide.seg_doc[wide.seg_ptr[:-1]])
        np.testing.assert_array_equal(out["length"], wide.sample_tokens())
        ds.pack(os.path.join(tmp, "p"))
        packed = Consumer.from_packed(os.path.join(tmp, "p"), style=style[0], long_files=style[1], seqlen=seqlen)
        np.testing.assert_array_equal(packed_runs(packed.index, packed.documents),
                                      packed_runs(_widened(packed.index), packed.documents))
        got, _ = read_rows(packed.index, packed.documents, ids)
        np.testing.assert_array_equal(got, read_rows(_widened(packed.index), packed.documents, ids)[0])
        if style[1] != "crop":
            np.testing.assert_array_equal(got, rows_n)


def test_cache_round_trips_the_narrow_fields(tmp_path, corpus_dir):
    first = Consumer(corpus_dir, style="concat", seqlen=64, cache_dir=tmp_path / "c")
    again = Consumer(corpus_dir, style="concat", seqlen=64, cache_dir=tmp_path / "c")
    assert first.build_info["cache"] == "miss" and again.build_info["cache"] == "hit"
    for k in INDEX_ARRAYS:
        a, b = getattr(first.index, k), getattr(again.index, k)
        assert a.dtype == b.dtype and np.array_equal(a, b), k
    assert again.index.seg_len.dtype == np.int32 and again.index.seg_doc.dtype == np.int32
    assert isinstance(again.files, PathList) and again.files == first.files
    ids = np.arange(len(first))
    for k, v in first.fetch_numpy(ids).items():
        np.testing.assert_array_equal(v, again.fetch_numpy(ids)[k])


def test_dataset_paths_are_one_shared_pathlist(corpus_dir):
    ds = Consumer(corpus_dir, cache_dir=False)
    flat, _ = ds.corpus.flat()
    assert isinstance(ds.files, PathList) and flat.same_blob(ds.files) and flat == ds.files
    assert all(c.paths.same_blob(ds.files) for c in ds.corpus.classes)
    assert list(ds.files) == [p for c in ds.corpus.classes for p in c.paths]
