import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import InputError
from consumer.tokens.index import _assemble, build_index, index_dtype, resolve_seqlen


@st.composite
def layouts(draw):
    n_classes = draw(st.integers(1, 4))
    counts = draw(st.lists(st.integers(1, 6), min_size=n_classes, max_size=n_classes))
    doc_class = np.repeat(np.arange(n_classes), counts)
    doc_len = np.array(draw(st.lists(st.integers(1, 40), min_size=doc_class.size, max_size=doc_class.size)))
    seqlen = draw(st.integers(1, 50))
    return doc_len, doc_class, n_classes, seqlen


def _coverage(idx, doc_len):
    """How many times each (document, token) appears in the index."""
    seen = [np.zeros(n, dtype=int) for n in doc_len]
    for d, a, n in zip(idx.seg_doc, idx.seg_start, idx.seg_len):
        seen[d][a:a + n] += 1
    return seen


@settings(max_examples=200, deadline=None)
@given(layouts())
def test_concat_every_token_exactly_once_and_windows_exact(layout):
    doc_len, doc_class, n_classes, seqlen = layout
    idx = build_index("concat", doc_len, doc_class, n_classes, seqlen)
    assert all((s == 1).all() for s in _coverage(idx, doc_len))
    per_sample = idx.sample_tokens()
    assert (per_sample <= seqlen).all() and (per_sample > 0).all()
    for c in range(n_classes):
        lo, hi = idx.class_ptr[c], idx.class_ptr[c + 1]
        total = doc_len[doc_class == c].sum()
        assert hi - lo == -(-total // seqlen)
        assert (per_sample[lo:hi - 1] == seqlen).all()  # only the last window of a class is short
        assert (idx.sample_class[lo:hi] == c).all()
    # windows never cross classes; segments fill each row left to right without gaps
    segs_class = doc_class[idx.seg_doc]
    owner = np.repeat(np.arange(len(idx)), np.diff(idx.seg_ptr))
    assert (segs_class == idx.sample_class[owner]).all()
    col_expected = np.concatenate([np.cumsum(idx.seg_len[a:b]) - idx.seg_len[a:b]
                                   for a, b in zip(idx.seg_ptr[:-1], idx.seg_ptr[1:])])
    assert (idx.seg_col == col_expected).all()


@settings(max_examples=200, deadline=None)
@given(layouts())
def test_diff_windows_cover_every_token_once(layout):
    doc_len, doc_class, n_classes, seqlen = layout
    idx = build_index("diff", doc_len, doc_class, n_classes, seqlen, long_files="windows")
    assert all((s == 1).all() for s in _coverage(idx, doc_len))
    assert len(idx) == int((-(-doc_len // seqlen)).sum())
    # a window never holds two documents
    assert (np.diff(idx.seg_ptr) == 1).all()


@settings(max_examples=100, deadline=None)
@given(layouts())
def test_diff_truncate_one_sample_per_file(layout):
    doc_len, doc_class, n_classes, seqlen = layout
    idx = build_index("diff", doc_len, doc_class, n_classes, seqlen)
    assert len(idx) == doc_len.size
    assert (idx.seg_doc == np.arange(doc_len.size)).all()
    assert (idx.seg_len == np.minimum(doc_len, seqlen)).all() and (idx.seg_start == 0).all()
    assert (idx.samples_per_class() == np.bincount(doc_class, minlength=n_classes)).all()
    # the same arrays, dtypes included, as the general assembly of one segment a sample gives
    n = doc_len.size
    narrow = index_dtype(seqlen + 1)
    general = _assemble(np.arange(n, dtype=index_dtype(n)), np.zeros(n, dtype=np.int64),
                        np.minimum(doc_len, seqlen).astype(narrow), np.ones(n, dtype=np.int64),
                        np.zeros(n, dtype=narrow), doc_class, n_classes, seqlen)
    for name in ("seg_ptr", "seg_doc", "seg_start", "seg_len", "seg_col", "sample_class", "class_ptr"):
        got, want = getattr(idx, name), getattr(general, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name


def test_worked_example_from_gperc_docs():
    # the gperc docs' table: cat f1 137, f2 417, f3 139; dog f4 123, f5 52, f6 390; seqlen 128
    doc_len = np.array([137, 417, 139, 123, 52, 390])
    idx = build_index("concat", doc_len, np.array([0, 0, 0, 1, 1, 1]), 2, 128)
    end = idx.seg_ptr[2]
    first = [(int(d), int(a), int(a + n)) for d, a, n in
             zip(idx.seg_doc[idx.seg_ptr[0]:end], idx.seg_start[:end], idx.seg_len[:end])]
    assert first == [(0, 0, 128), (0, 128, 137), (1, 0, 119)]
    assert idx.samples_per_class().tolist() == [6, 5]


def test_resolve_seqlen():
    assert resolve_seqlen("auto", np.array([3, 9, 4])) == 9
    assert resolve_seqlen(7, np.array([3])) == 7
    for bad in (0, -1, "big", 2.5, True):
        with pytest.raises(InputError, match="seqlen must be"):
            resolve_seqlen(bad, np.array([3]))


def test_bad_style_and_long_files():
    with pytest.raises(InputError, match="style must be one of"):
        build_index("stack", np.array([3]), np.array([0]), 1, 4)
    with pytest.raises(InputError, match="long_files must be one of"):
        build_index("diff", np.array([3]), np.array([0]), 1, 4, long_files="slide")
