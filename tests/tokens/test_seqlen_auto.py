"""seqlen="auto:pNN" (a percentile of document lengths) and the warning when "auto" pads most of every row."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer import Consumer
from consumer.errors import ConsumerWarning, InputError
from consumer.tokens.index import build_index, check_seqlen, padding_share, resolve_seqlen, warn_if_padded


@pytest.mark.parametrize("good", ["auto", "auto:p95", "auto:p50", "auto:p99.9", "auto:p100", "auto:p0.5", 1, 8192,
                                  np.int64(7)])
def test_check_seqlen_accepts(good):
    assert check_seqlen(good) == good and type(check_seqlen(good)) in (int, str)


@pytest.mark.parametrize("bad", ["auto:p0", "auto:p101", "auto:95", "auto:", "p95", "Auto", "auto:p-5", "max", 0, -3,
                                 2.5, True, None])
def test_check_seqlen_refuses(bad):
    with pytest.raises(InputError, match=r"seqlen must be a positive int, 'auto' .* or 'auto:pNN' .*got "):
        check_seqlen(bad)


def test_resolve_percentiles():
    lengths = np.arange(1, 101, dtype=np.int64)[::-1].copy()  # order does not matter
    assert resolve_seqlen("auto", lengths) == 100
    assert resolve_seqlen("auto:p100", lengths) == 100
    assert resolve_seqlen("auto:p95", lengths) == 95
    assert resolve_seqlen("auto:p50", lengths) == 50
    assert resolve_seqlen("auto:p0.5", lengths) == 1
    assert resolve_seqlen("auto:p95", np.zeros(0, dtype=np.int64)) == 1
    with pytest.raises(InputError, match="needs the document lengths"):
        resolve_seqlen("auto:p95", None)


@given(st.lists(st.integers(1, 10_000), min_size=1, max_size=200), st.floats(0.01, 100))
def test_percentile_is_a_document_length_that_fits_at_least_that_share(lengths, q):
    doc_len = np.array(lengths, dtype=np.int64)
    got = resolve_seqlen(f"auto:p{q:.2f}", doc_len)
    q = float(f"{q:.2f}")
    assert got in lengths
    assert (doc_len <= got).mean() * 100 >= q - 1e-9  # at least q % of the documents fit whole
    smaller = doc_len[doc_len < got]
    assert smaller.size == 0 or (doc_len <= smaller.max()).mean() * 100 < q + 1e-9  # and it is the smallest such


def _diff(doc_len, seqlen, long_files="truncate"):
    doc_len = np.asarray(doc_len, dtype=np.int64)
    return build_index("diff", doc_len, np.zeros(doc_len.size, dtype=np.int64), 1, seqlen, long_files=long_files)


def test_padding_share():
    assert padding_share(_diff([10, 10, 10, 1000], 1000)) == pytest.approx(1 - 1030 / 4000)
    assert padding_share(_diff([5, 5], 5)) == 0.0
    assert padding_share(_diff([], 8)) == 0.0


def test_auto_warns_when_most_of_every_row_is_padding():
    index = _diff([10, 12, 14, 1000], 1000)
    with pytest.warns(ConsumerWarning) as record:
        share = warn_if_padded("auto", "diff", index, stacklevel=2)
    assert share == pytest.approx(1 - 1036 / 4000)
    text = str(record[0].message)
    assert "seqlen='auto' resolved to 1000 tokens, so 74% of every row is PAD" in text
    assert "median sample has 13 tokens" in text and "95th percentile here is 1000" in text
    for advice in ("seqlen= an int", "long_files='windows'", "seqlen='auto:p95'", "create_token_batches"):
        assert advice in text
    assert record[0].filename == __file__  # stacklevel points at the caller


@pytest.mark.parametrize("requested, style, lengths", [
    (1000, "diff", [10, 12, 14, 1000]),      # an int the user chose: no advice
    ("auto", "concat", [10, 12, 14, 1000]),  # concat rows are full except a class's last window
    ("auto", "diff", [900, 950, 1000, 990]),  # padding below half
    ("auto:p100", "diff", [10, 12, 14, 1000]),  # a percentile is a deliberate choice
    ("auto:p50", "diff", [10, 12, 14, 1000]),
])
def test_no_warning(requested, style, lengths):
    doc_len = np.array(lengths, dtype=np.int64)
    index = build_index(style, doc_len, np.zeros(doc_len.size, dtype=np.int64), 1, 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_padded(requested, style, index)


def _padding_warnings(record: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in record if "of every row is PAD" in str(w.message)]


def test_consumer_percentile_and_warning(corpus_dir, tmp_path):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ds = Consumer(corpus_dir, cache_dir=tmp_path / "c")
        ds.sql("SELECT count(*) FROM files")
        ds.samples_per_class()
    assert _padding_warnings(record) == []  # building and SQL make no rows: nothing to warn about yet
    with pytest.warns(ConsumerWarning, match=r"seqlen='auto' resolved to \d+ tokens") as record:
        ds[0]
    assert record[0].filename == __file__  # it points at the line that made the rows
    assert ds.seqlen == int(ds.documents.doc_len.max())
    hit = Consumer(corpus_dir, cache_dir=tmp_path / "c")
    assert hit.build_info["cache"] == "hit"
    with pytest.warns(ConsumerWarning):  # a cache hit warns too, at its first rows
        hit.fetch([0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = Consumer(corpus_dir, seqlen="auto:p50", long_files="windows", style="concat", cache_dir=tmp_path / "c")
        assert ds.seqlen == int(np.percentile(ds.documents.doc_len, 50, method="inverted_cdf"))
        assert ds.get_dict()["seqlen_requested"] == "auto:p50"
        Consumer(corpus_dir, seqlen=64, cache_dir=False)
    with pytest.raises(InputError, match="got 'auto:p0'"):
        Consumer(corpus_dir, seqlen="auto:p0")


def test_making_rows_warns_once_per_dataset_whatever_the_route(corpus_dir):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ds = Consumer(corpus_dir, cache_dir=False)
        ds[0]
        ds[1:3]
        ds.create_batches(2)
        ds.get_next_batch()
        for _ in ds.dataloader(4):
            pass
    assert len(_padding_warnings(record)) == 1 and _padding_warnings(record)[0].filename == __file__
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fresh = Consumer(corpus_dir, cache_dir=False)
        next(iter(fresh.dataloader(4, query=["sample_id"])))  # the loader's first batch makes rows
        fresh.subset([0, 1, 2])[0]  # a subset never warns (as before)
    assert len(_padding_warnings(record)) == 1 and _padding_warnings(record)[0].filename == __file__
