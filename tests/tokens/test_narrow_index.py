"""Memory at scale: int32 sample-index fields and packed paths (PathList) serve exactly what int64 and lists did."""

import dataclasses
import os
import pickle
import tempfile

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, InputError
from consumer.dataset.cache import file_table_sha256
from consumer.fetch.reader import packed_runs, read_rows
from consumer.sources.paths import ENCODE_CHUNK, PathList
from consumer.tokens.index import INDEX_ARRAYS, SampleIndex, build_index, index_dtype
from consumer.tokens.megatron_index import megatron_sample_index
from consumer.util.fileio import pack_paths, unpack_paths

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


_paths = st.lists(st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)))
                  | st.sampled_from(["/a/\udcff.bin", "", "/é/ü"]), max_size=40)


@settings(max_examples=200, deadline=None)
@given(_paths, st.integers(-45, 45), st.integers(-45, 45), st.sampled_from([1, 1, 2, 3, -1]))
def test_pathlist_reads_like_the_list(paths, a, b, step):
    pl = PathList.of(paths)
    assert len(pl) == len(paths) and list(pl) == paths and pl == paths and paths == pl and pl == tuple(paths)
    assert [pl[i] for i in range(-len(paths), len(paths))] == [paths[i] for i in range(-len(paths), len(paths))]
    assert list(pl[a:b:step]) == paths[a:b:step] and pl[a:b:step] == paths[a:b:step]
    assert pickle.loads(pickle.dumps(pl)) == pl and pickle.loads(pickle.dumps(pl[a:b])) == paths[a:b]
    if paths:
        assert np.array_equal(pl.packed(), pack_paths(paths)) and PathList.from_blob(pack_paths(paths)) == paths
        assert unpack_paths(pl.packed()) == paths
        assert file_table_sha256(pl, np.zeros(len(paths)), np.zeros(len(paths)), np.zeros(len(paths))) == \
            file_table_sha256(paths, np.zeros(len(paths)), np.zeros(len(paths)), np.zeros(len(paths)))
    cut = len(paths) // 2
    assert PathList.concat([paths[:cut], paths[cut:]]) == pl and hash(PathList.of(list(paths))) == hash(pl)
    joined = pl[:cut].joined(pl[cut:])
    assert joined is not None and joined == paths and pl[cut:].joined(pl[:cut]) is None or cut == 0
    assert pl != [*paths, "x"] and (pl == 3) is False
    ids = np.arange(len(paths))[::-1]
    assert pl.take(ids) == paths[::-1] and pl.take(ids, raw=True) == [os.fsencode(p) for p in paths[::-1]]
    assert pl[cut:].take(np.arange(len(paths) - cut)) == paths[cut:]
    assert pl[:cut] + pl[cut:] == paths and paths[:cut] + pl[cut:] == paths and pl[:cut] + tuple(paths[cut:]) == paths
    copied = pl.copy()
    assert type(copied) is list and copied == paths and pl.count(paths[0] if paths else "") == paths.count(
        paths[0] if paths else "")


def test_pathlist_across_chunks_and_out_of_range():
    paths = [f"/d{i % 7}/f{i}" + ("é" if i % 5 == 0 else "") for i in range(ENCODE_CHUNK + 1234)]
    pl = PathList.of(paths)
    assert list(pl) == paths and pl[ENCODE_CHUNK] == paths[ENCODE_CHUNK] and pl[-1] == paths[-1]
    assert list(pl[ENCODE_CHUNK - 3:ENCODE_CHUNK + 3]) == paths[ENCODE_CHUNK - 3:ENCODE_CHUNK + 3]
    assert PathList.from_blob(pl.packed()) == pl
    for bad in (len(paths), -len(paths) - 1):
        try:
            pl[bad]
        except IndexError as e:
            assert str(len(paths)) in str(e)
        else:
            raise AssertionError("no IndexError")


def test_pathlist_refuses_a_nul_byte():
    try:
        PathList.of(["/a", "/b\0c"])
    except InputError as e:
        assert "NUL" in str(e) and "/b" in str(e)
    else:
        raise AssertionError("no InputError")


def test_dataset_paths_are_one_shared_pathlist(corpus_dir):
    ds = Consumer(corpus_dir, cache_dir=False)
    flat, _ = ds.corpus.flat()
    assert isinstance(ds.files, PathList) and flat.same_blob(ds.files) and flat == ds.files
    assert all(c.paths.same_blob(ds.files) for c in ds.corpus.classes)
    assert list(ds.files) == [p for c in ds.corpus.classes for p in c.paths]
