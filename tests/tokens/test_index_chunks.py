"""The index builders work a chunk of documents (or segments) at a time and take int32 lengths and classes as they
are (a Megatron ``.idx``'s): over more documents than one chunk the index is the same as from int64 inputs, every
token is in it exactly once, and each sample's token count and store range are found across chunks."""

from __future__ import annotations

import numpy as np
import pytest

from consumer import Consumer
from consumer.fetch.reader import packed_runs
from consumer.formats.mmidx import IndexedWriter
from consumer.tokens.index import build_index, sample_chunks
from consumer.tokens.pieces import PIECE_CHUNK

N = (1 << 20) + 3 * PIECE_CHUNK + 17  # past the builders' chunks of documents and segments
FIELDS = ("seg_ptr", "seg_doc", "seg_start", "seg_len", "seg_col", "sample_class", "class_ptr")


@pytest.fixture(scope="module")
def layout() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    doc_len = rng.integers(1, 40, N).astype(np.int32)
    doc_len[::50_000] = 5000  # a few documents longer than a window
    doc_class = np.repeat(np.arange(3, dtype=np.int32), [N // 2, 10, N - N // 2 - 10])
    return doc_len, doc_class


def _every_token_once(idx, doc_len: np.ndarray) -> None:
    """Each document's segments are consecutive, start at 0 and continue one another, and add up to it."""
    seg_doc, start, length = (np.asarray(getattr(idx, f), dtype=np.int64) for f in ("seg_doc", "seg_start", "seg_len"))
    assert np.array_equal(np.bincount(seg_doc, weights=length, minlength=doc_len.size), doc_len)
    assert (np.diff(seg_doc) >= 0).all()
    same = seg_doc[1:] == seg_doc[:-1]
    assert (start[1:][same] == (start + length)[:-1][same]).all() and (start[1:][~same] == 0).all()


@pytest.mark.parametrize("style, long_files, seqlen", [("concat", "truncate", 64), ("concat", "truncate", 2048),
                                                       ("diff", "windows", 64), ("diff", "truncate", 64)])
def test_int32_inputs_over_many_chunks(layout, style: str, long_files: str, seqlen: int) -> None:
    doc_len, doc_class = layout
    narrow = build_index(style, doc_len, doc_class, 3, seqlen, long_files=long_files)
    wide = build_index(style, doc_len.astype(np.int64), doc_class.astype(np.int64), 3, seqlen, long_files=long_files)
    for f in FIELDS:
        assert np.array_equal(getattr(narrow, f), getattr(wide, f)), f
    owner = np.repeat(np.arange(len(narrow)), np.diff(narrow.seg_ptr))
    assert np.array_equal(narrow.sample_tokens(), np.bincount(owner, weights=narrow.seg_len, minlength=len(narrow)))
    if long_files != "truncate" or style == "concat":
        _every_token_once(narrow, doc_len)
    if style == "concat":
        per_class = np.bincount(doc_class, weights=doc_len, minlength=3).astype(np.int64)
        assert np.array_equal(np.diff(narrow.class_ptr), -(-per_class // seqlen))


def test_sample_runs_across_chunks_of_segments(layout, tmp_path) -> None:
    doc_len, _ = layout
    prefix = str(tmp_path / "web")
    with IndexedWriter(prefix, np.uint16) as w:  # a store of one class holding the documents back to back
        w.add_segments(np.zeros(int(doc_len.sum()), dtype=np.uint16), doc_len, np.ones(N, dtype=bool))
        w.end_document()
    ds = Consumer.from_packed(prefix, style="concat", seqlen=64, cache_dir=False)
    idx, starts = ds.index, np.cumsum(doc_len, dtype=np.int64) - doc_len
    first = idx.seg_ptr[:-1]
    runs = packed_runs(idx, ds.documents)
    assert np.array_equal(runs, starts[idx.seg_doc[first]] + idx.seg_start[first])  # every window one range
    chunks = list(sample_chunks(idx.seg_ptr, 1 << 16))
    assert chunks[0][0] == 0 and chunks[-1][1] == len(idx) and all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
