"""The few-rows raw path (``consumer.fetch.raw_rows``) against the general reader on random selections, and the
same refusal of changed files."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, FileChangedError
from consumer.fetch.raw_rows import FEW_ROWS, FEW_SEGMENTS, few_rows
from consumer.fetch.reader import read_rows

from ..conftest import write_corpus

SETTINGS = [("diff", 5, "truncate"), ("diff", 40, "windows"), ("diff", 3000, "truncate"), ("concat", 7, "truncate"),
            ("concat", 100, "truncate")]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """Datasets over one corpus (every tail length, empty files, a long file) per n_bytes, header mode, style."""
    fps = write_corpus(tmp_path_factory.mktemp("raw-rows") / "data")
    return {(nb, meta, style, seqlen, lf): Consumer(fps, cache_dir=False, n_bytes=nb, metadata=meta, style=style,
                                                     seqlen=seqlen, long_files=lf)
            for nb in (1, 2, 3) for meta in (None, "mime") for style, seqlen, lf in SETTINGS}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nb=st.sampled_from([1, 2, 3]), meta=st.sampled_from([None, "mime"]), setting=st.sampled_from(SETTINGS),
       data=st.data(), dtype=st.sampled_from([np.int64, np.int32]))
def test_few_rows_are_the_general_readers_rows(datasets, nb, meta, setting, data, dtype):
    ds = datasets[(nb, meta, *setting)]
    ids = data.draw(st.lists(st.integers(0, len(ds) - 1), min_size=0, max_size=FEW_ROWS))
    width = data.draw(st.sampled_from([ds.seqlen, int(ds.index.sample_tokens()[ids].max()) if ids else 1]))
    got = few_rows(ds.index, ds.documents, ids, width, dtype)
    ref, _ = read_rows(ds.index, ds.documents, np.array(ids, dtype=np.int64), width=width, dtype=dtype)
    segments = int((ds.index.seg_ptr[np.array(ids, dtype=np.int64) + 1] - ds.index.seg_ptr[ids]).sum())
    assert (got is None) == (segments > FEW_SEGMENTS)
    if got is not None:
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, ref)
    if ids:  # and through the public fetch
        np.testing.assert_array_equal(ds.fetch(ids)["input_array"].numpy(), read_rows(ds.index, ds.documents,
                                                                                      np.array(ids))[0])


def test_few_rows_leave_packed_stores_and_masked_queries_to_the_general_reader(tmp_path):
    fps = write_corpus(tmp_path / "data")
    ds = Consumer(fps, cache_dir=False, style="concat", seqlen=16)
    ds.pack(tmp_path / "p")
    packed = Consumer.from_packed(tmp_path / "p", style="concat", seqlen=16)
    assert few_rows(packed.index, packed.documents, [0], 16, np.int64) is None
    ds.set_mlm_mode()
    batch = ds[[0, 1]]  # masked: the reader's content mask is needed
    assert set(batch) == {"input_array", "attention_mask", "labels"}


@pytest.mark.parametrize("change, message", [
    ("rewrite", "changed since the build: modified at"),
    ("append", "longer than at build time"),
    ("dev-zero", "cannot read .*a device now"),
    ("gone", "cannot open"),
])
def test_a_changed_file_is_refused_by_a_one_row_fetch(tmp_path, change, message):
    fps = write_corpus(tmp_path / "data", {"cat": [300, 40, 12], "dog": [500, 9]})
    ds = Consumer(fps, cache_dir=False, seqlen=64, style="concat")
    victim = int(np.argmax(ds.documents.doc_size))
    path = ds.files[victim]
    seg = int(np.flatnonzero(ds.index.seg_doc == victim)[0])  # a segment of the victim, and its sample
    first = int(np.searchsorted(ds.index.seg_ptr, seg, side="right")) - 1
    st = os.stat(path)
    if change == "rewrite":
        with open(path, "r+b") as f:
            data = f.read()
            f.seek(0)
            f.write(bytes(reversed(data)))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif change == "append":
        with open(path, "ab") as f:
            f.write(b"more")
    elif change == "dev-zero":
        os.remove(path)
        os.symlink("/dev/zero", path)
    else:
        os.remove(path)
    with pytest.raises(FileChangedError, match=message) as info:
        ds[first]
    assert os.path.basename(path) in str(info.value)
