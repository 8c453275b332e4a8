"""The batched reader: segments anywhere in a row, PAD everywhere else; packed runs."""

import numpy as np

from consumer import Consumer
from consumer.fetch.reader import packed_runs, read_segments
from consumer.tokens.index import SampleIndex


def test_segments_with_gaps_are_padded(corpus_dir):
    ds = Consumer(corpus_dir, metadata=None, cache_dir=False)
    docs = ds.documents
    big = int(np.argmax(docs.doc_size))
    # two segments of one row with a gap between them, and a second row left empty
    out, _ = read_segments(docs, (2, 30), np.array([0, 0]), np.array([2, 20]), np.array([big, big]),
                           np.array([0, 5]), np.array([4, 6]))
    full = ds.document_tokens(big)
    pad = ds.vocab.pad
    assert (out[0, :2] == pad).all() and (out[0, 2:6] == full[0:4]).all()
    assert (out[0, 6:20] == pad).all() and (out[0, 20:26] == full[5:11]).all() and (out[0, 26:] == pad).all()
    assert (out[1] == pad).all()


def test_packed_runs_cover_concat_windows(tmp_path, corpus_dir):
    ds = Consumer(corpus_dir, style="concat", seqlen=16, cache_dir=False)
    ds.pack(tmp_path / "p")
    packed = Consumer.from_packed(tmp_path / "p", style="concat", seqlen=16)
    start = packed_runs(packed.index, packed.documents)
    assert (start >= 0).all() and start.size == len(packed)
    assert np.array_equal(packed.fetch_numpy(np.arange(len(packed)))["input_array"],
                          ds.fetch_numpy(np.arange(len(ds)))["input_array"])



def _index(ptr, col, length) -> SampleIndex:
    ptr, col, length = (np.array(x, dtype=np.int64) for x in (ptr, col, length))
    return SampleIndex(seqlen=10, seg_ptr=ptr, seg_doc=np.zeros_like(col), seg_start=np.zeros_like(col),
                       seg_len=length, seg_col=col, sample_class=np.zeros(ptr.size - 1, dtype=np.int64),
                       class_ptr=np.array([0, ptr.size - 1]))


def test_index_tiling_is_checked_in_chunks_like_at_once(monkeypatch):
    import consumer.tokens.index

    for chunk in (1, 2, 3, 1 << 20):
        monkeypatch.setattr(consumer.tokens.index, "_CHUNK", chunk)
        assert _index([0, 2, 3], [0, 4, 0], [4, 3, 5]).tiled
        assert not _index([0, 2, 3], [0, 5, 0], [4, 3, 5]).tiled  # a gap after the first segment
        assert not _index([0, 2, 3], [0, 4, 1], [4, 3, 5]).tiled  # a row not starting at column 0
        assert _index([0, 0, 2, 2, 3], [0, 4, 0], [4, 3, 5]).tiled  # samples without segments
        assert _index([0], [], []).tiled
        assert _index([0, 1, 2], [0, 0], [3, 3])._one_segment_each
        assert not _index([0, 0, 2], [0, 3], [3, 3])._one_segment_each
