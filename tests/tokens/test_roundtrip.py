"""Every byte of every file comes back: all styles, n_bytes 1..3, every tail length, with/without header."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.tokens.vocab import encode_bytes

from ..conftest import content_of, documents_from_samples, file_bytes, write_corpus

CASES = [("concat", 1, 7), ("concat", 2, 16), ("concat", 3, 50), ("diff", 1, 13), ("diff", 2, 64),
         ("diff", 3, 5)]


@pytest.mark.parametrize("metadata", ["file", None])
@pytest.mark.parametrize("style, nb, seqlen", CASES)
def test_every_file_round_trips(corpus_dir, style, nb, seqlen, metadata):
    kw = {"long_files": "windows"} if style == "diff" else {}
    ds = Consumer(corpus_dir, style=style, n_bytes=nb, seqlen=seqlen, metadata=metadata, **kw)
    docs = documents_from_samples(ds)
    assert len(docs) == len(ds.files)
    for doc, path in zip(docs, ds.files):
        assert ds.decode(content_of(doc, ds)) == file_bytes(path)
        assert (doc == ds.document_tokens(ds.files.index(path))).all()


@pytest.mark.parametrize("nb", [1, 2, 3])
def test_diff_auto_seqlen_rows_are_whole_documents(corpus_dir, nb):
    ds = Consumer(corpus_dir, n_bytes=nb)
    assert ds.seqlen == int(ds.documents.doc_len.max())  # tokens, not bytes
    rows = ds[:]["input_array"].numpy()
    for row, path in zip(rows, ds.files):
        doc = row[: np.flatnonzero(row == ds.vocab.eof)[0] + 1]
        assert ds.decode(content_of(doc, ds)) == file_bytes(path)
    # with n_bytes=2 the longest row is (nearly) full: no gperc-style half-empty auto rows
    assert (rows != ds.vocab.pad).sum(axis=1).max() == ds.seqlen


def test_diff_truncate_keeps_the_start(corpus_dir):
    ds = Consumer(corpus_dir, n_bytes=1, seqlen=40, metadata=None)
    rows = ds[:]["input_array"].numpy()
    for row, path in zip(rows, ds.files):
        data = file_bytes(path)
        if len(data) + 1 > 40:
            assert ds.decode(row) == data[:40]
            assert ds.vocab.eof not in row


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 70), min_size=1, max_size=8), nb=st.sampled_from([1, 2, 3]),
       seqlen=st.integers(1, 40), style=st.sampled_from(["concat", "diff"]), seed=st.integers(0, 100))
def test_round_trip_property(tmp_path_factory, sizes, nb, seqlen, style, seed):
    root = tmp_path_factory.mktemp("c")
    half = len(sizes) // 2
    write_corpus(root, {"a": sizes[:half] or [1], "b": sizes[half:]}, seed=seed)
    ds = Consumer(str(root), style=style, n_bytes=nb, seqlen=seqlen, long_files="windows",
                  metadata=lambda p: "t")
    docs = documents_from_samples(ds)
    assert [ds.decode(content_of(d, ds)) for d in docs] == [file_bytes(p) for p in ds.files]
    for d, p in zip(docs, ds.files):  # exact ids, padded tail token included (decode ignores its padding bytes)
        assert content_of(d, ds).tolist() == encode_bytes(file_bytes(p), ds.vocab).tolist()
