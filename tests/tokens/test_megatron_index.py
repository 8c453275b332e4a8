"""Megatron GPT sampling as a SampleIndex: item k of Megatron == sample k, on the formats.md §2.8 / §7.2 vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import InputError, SelectionError
from consumer.fetch.reader import read_rows
from consumer.fetch.select import resolve
from consumer.formats import build_gpt_indices
from consumer.tokens.megatron_index import megatron_sample_index

SIZES = [20, 50, 60, 30, 100, 5]  # formats.md §2.8
SEQ = 30
SEED = 1234
# formats.md §7.2, full pipeline, seed 1234, E=1
DOC_INDEX_1 = [2, 1, 5, 0, 4, 3]
SAMPLE_INDEX_1 = [[0, 0], [0, 30], [1, 0], [1, 30], [3, 5], [4, 15], [4, 45], [4, 75], [5, 5]]
SHUFFLE_1 = [5, 0, 3, 4, 2, 6, 1, 7]
DOC_INDEX_10 = [2, 1, 5, 0, 4, 3, 0, 4, 3, 2, 5, 1]  # num_samples=10: 2 epochs, last one separate
SHUFFLE_10 = [1, 0, 3, 5, 2, 7, 4, 6, 15, 14, 10, 11, 9, 16, 13, 12, 8]


def megatron_text(docs: list[np.ndarray], document_index, sample_index, shuffle_index, k: int, e: int) -> np.ndarray:
    """Megatron's ``GPTDataset.__getitem__`` text of item k (formats.md §2.7), written out plainly."""
    i = shuffle_index[k]
    d0, o0 = sample_index[i]
    d1, o1 = sample_index[i + 1]
    if d0 == d1:
        return docs[document_index[d0]][o0:o1 + e]
    parts = [docs[document_index[d0]][o0:]]
    parts += [docs[document_index[d]] for d in range(d0 + 1, d1)]
    parts.append(docs[document_index[d1]][:o1 + e])
    return np.concatenate(parts)


@pytest.fixture
def ds(tmp_path: Path) -> Consumer:
    """Six files whose documents are exactly SIZES tokens long (n_bytes=1, no header: size + EOF)."""
    rng = np.random.default_rng(3)
    fps = {}
    for i, n in enumerate(SIZES):
        cls = ("a", "b", "c")[i // 2]
        p = tmp_path / cls / f"doc{i}.bin"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(rng.integers(0, 256, n - 1, dtype=np.uint8).tobytes())
        fps.setdefault(cls, []).append(str(p))
    out = Consumer(fps, style="concat", n_bytes=1, seqlen=SEQ + 1, metadata=None)
    assert out.documents.doc_len.tolist() == SIZES
    return out


def test_reference_arrays() -> None:
    document_index, sample_index, shuffle_index = build_gpt_indices(np.array(SIZES), SEQ, SEED)
    assert document_index.tolist() == DOC_INDEX_1
    assert sample_index.tolist() == SAMPLE_INDEX_1
    assert shuffle_index.tolist() == SHUFFLE_1


def test_worked_example_tokens_equal_megatron_items(ds: Consumer, tmp_path: Path) -> None:
    docs = [ds.document_tokens(i) for i in range(len(SIZES))]
    idx = megatron_sample_index(ds.documents.doc_len, ds.documents.doc_class, ds.n_classes, SEQ, SEED)
    assert len(idx) == 8 and idx.seqlen == SEQ + 1
    rows, _ = read_rows(idx, ds.documents, np.arange(len(idx)))
    for k in range(8):
        expected = megatron_text(docs, DOC_INDEX_1, SAMPLE_INDEX_1, SHUFFLE_1, k, 1)
        assert expected.size == SEQ + 1
        np.testing.assert_array_equal(rows[k], expected, err_msg=f"item {k}")
    # by hand, item 2 = sample_index row 3 -> (1, 30) .. (3, 5): doc 1 [30:50], doc 5 whole, doc 0 [:6]
    np.testing.assert_array_equal(rows[2], np.concatenate([docs[1][30:], docs[5], docs[0][:6]]))
    # the same from a packed store
    ds.pack(str(tmp_path / "store"))
    packed = Consumer.from_packed(str(tmp_path / "store"), style="concat", seqlen=SEQ + 1)
    packed_rows, _ = read_rows(idx, packed.documents, np.arange(len(idx)))
    np.testing.assert_array_equal(packed_rows, rows)


def test_two_epochs_separate_last_epoch(ds: Consumer) -> None:
    docs = [ds.document_tokens(i) for i in range(len(SIZES))]
    document_index, sample_index, shuffle_index = build_gpt_indices(np.array(SIZES), SEQ, SEED, num_samples=10)
    assert document_index.tolist() == DOC_INDEX_10 and shuffle_index.tolist() == SHUFFLE_10
    idx = megatron_sample_index(ds.documents.doc_len, ds.documents.doc_class, ds.n_classes, SEQ, SEED,
                                num_samples=10)
    assert len(idx) == 17  # Megatron's len(dataset): every item of the two epochs, >= num_samples
    rows, _ = read_rows(idx, ds.documents, np.arange(len(idx)))
    for k in range(17):
        np.testing.assert_array_equal(rows[k], megatron_text(docs, DOC_INDEX_10, sample_index, SHUFFLE_10, k, 1))


def test_without_extra_token(ds: Consumer) -> None:
    docs = [ds.document_tokens(i) for i in range(len(SIZES))]
    document_index, sample_index, shuffle_index = build_gpt_indices(np.array(SIZES), SEQ, SEED, add_extra_token=False)
    idx = megatron_sample_index(ds.documents.doc_len, ds.documents.doc_class, ds.n_classes, SEQ, SEED,
                                add_extra_token=False)
    assert idx.seqlen == SEQ and len(idx) == len(shuffle_index)
    assert (idx.seg_len > 0).all()
    rows, _ = read_rows(idx, ds.documents, np.arange(len(idx)))
    for k in range(len(idx)):
        np.testing.assert_array_equal(rows[k], megatron_text(docs, document_index, sample_index, shuffle_index, k, 0))


def test_samples_overlap_by_one_token_and_cover_the_stream() -> None:
    sizes = np.random.default_rng(0).integers(1, 300, 400)
    idx = megatron_sample_index(sizes, np.zeros(sizes.size, dtype=np.int64), 1, 128, 9)
    document_index, sample_index, shuffle_index = build_gpt_indices(sizes, 128, 9)
    # flat stream positions of each segment: unshuffled item i starts at 128 * i and spans 129 tokens
    starts = np.concatenate([[0], np.cumsum(sizes[document_index])])
    pos_of_doc = {int(d): int(starts[p]) for p, d in enumerate(document_index)}
    first = idx.seg_ptr[:-1]
    flat_first = np.array([pos_of_doc[int(d)] for d in idx.seg_doc[first]]) + idx.seg_start[first]
    np.testing.assert_array_equal(flat_first, 128 * shuffle_index.astype(np.int64))
    np.testing.assert_array_equal(np.add.reduceat(idx.seg_len, first), np.full(len(idx), 129))


def test_classes_are_not_ranges(ds: Consumer) -> None:
    idx = megatron_sample_index(ds.documents.doc_len, ds.documents.doc_class, ds.n_classes, SEQ, SEED)
    assert idx.class_ptr.tolist() == [0, 0, 0, 0] and idx.samples_per_class().tolist() == [0, 0, 0]
    # class of the sample's first document: items start in docs 4, 2, 1, 1, 0, 4, 2, 4 (classes c, b, a, ...)
    first_doc = [DOC_INDEX_1[SAMPLE_INDEX_1[i][0]] for i in SHUFFLE_1]
    assert idx.sample_class.tolist() == [d // 2 for d in first_doc]
    rng = np.random.default_rng(0)
    for sel in ({"a": 1}, {"b": [0]}, {"a": 0}):
        with pytest.raises(SelectionError, match="class selections such as .* are not supported with "
                                                 "sampling='megatron'"):
            resolve(sel, len(idx), idx.class_ptr, ds.classes, rng)
    np.testing.assert_array_equal(resolve(slice(2, 5), len(idx), idx.class_ptr, ds.classes, rng), [2, 3, 4])


def test_large_corpus_is_vectorised() -> None:
    sizes = np.random.default_rng(1).integers(1, 4000, 200_000)
    classes = np.repeat(np.arange(4), 50_000)
    idx = megatron_sample_index(sizes, classes, 4, 2048, 0, num_samples=300_000)
    assert len(idx) >= 300_000 and idx.seqlen == 2049
    np.testing.assert_array_equal(np.add.reduceat(idx.seg_len, idx.seg_ptr[:-1]), np.full(len(idx), 2049))


def test_arguments_are_checked() -> None:
    with pytest.raises(InputError, match="doc_len must be a 1-D integer array"):
        megatron_sample_index([[1, 2]], [0], 1, 30, 0)
    with pytest.raises(InputError, match="doc_class must have one entry per document: expected 2, got 1"):
        megatron_sample_index([40, 50], [0], 1, 30, 0)
    with pytest.raises(InputError, match=r"doc_class must be in \[0, 1\)"):
        megatron_sample_index([40, 50], [0, 1], 1, 30, 0)
    with pytest.raises(InputError, match="seq_length must be an int >= 2"):
        megatron_sample_index([40, 50], [0, 0], 1, 1, 0)
    with pytest.raises(InputError, match="seed"):
        megatron_sample_index([40, 50], [0, 0], 1, 30, -1)
    with pytest.raises(InputError, match="n_classes"):
        megatron_sample_index([40, 50], [0, 0], 0, 30, 0)


# ---------------------------------------------------------------- Consumer(sampling="megatron")

def _megatron_reference(ds, seq_length, seed, num_samples=None):
    """Megatron's items computed independently: the formats functions on the documents' token streams."""
    from consumer.formats.megatron_sampling import build_gpt_indices
    docs = [ds.document_tokens(i) for i in range(len(ds.files))]
    sizes = np.array([d.size for d in docs])
    doc_index, sample_index, shuffle_index = build_gpt_indices(sizes, seq_length, seed, num_samples=num_samples)
    items = []
    for k in range(len(shuffle_index)):
        i = shuffle_index[k]
        (d0, o0), (d1, o1) = sample_index[i], sample_index[i + 1]
        if d0 == d1:
            text = docs[doc_index[d0]][o0:o1 + 1]
        else:
            parts = [docs[doc_index[d0]][o0:]] + [docs[doc_index[d]] for d in range(d0 + 1, d1)]
            text = np.concatenate(parts + [docs[doc_index[d1]][:o1 + 1]])
        items.append(text)
    return items


def test_consumer_megatron_sampling_matches_megatron(corpus_dir, tmp_path):
    from consumer import Consumer
    ds = Consumer(corpus_dir, style="concat", seqlen=30, sampling="megatron", seed=1234, cache_dir=tmp_path / "c")
    assert ds.seqlen == 31
    expected = _megatron_reference(ds, 30, 1234)
    got = ds.fetch_numpy(np.arange(len(ds)))["input_array"]
    assert len(ds) == len(expected) and all(np.array_equal(g, e) for g, e in zip(got, expected))
    ds.create_batches(4, shuffle=False)
    assert ds.get_next_batch(["sample_id"])["sample_id"].tolist() == [0, 1, 2, 3]  # Megatron's order
    with pytest.raises(SelectionError, match=r"class selections such as \{'cat': 2\} are not supported with "
                                             r"sampling='megatron'"):
        ds[{"cat": 2}, "supervised"]
    again = Consumer(corpus_dir, style="concat", seqlen=30, sampling="megatron", seed=1234, cache_dir=tmp_path / "c")
    assert again.build_info["cache"] == "hit" and np.array_equal(again.fetch_numpy(np.arange(3))["input_array"],
                                                                got[:3])
    other_seed = Consumer(corpus_dir, style="concat", seqlen=30, sampling="megatron", seed=1, cache_dir=tmp_path / "c")
    assert other_seed.build_info["cache"] == "miss"


def test_consumer_megatron_num_samples_and_packed(corpus_dir, tmp_path):
    from consumer import Consumer
    from consumer.tokens.megatron_index import MegatronSampling
    sampling = MegatronSampling(num_samples=200)
    ds = Consumer(corpus_dir, style="concat", seqlen=25, sampling=sampling, seed=7, cache_dir=False)
    expected = _megatron_reference(ds, 25, 7, num_samples=200)
    assert len(ds) == len(expected) >= 200
    assert all(np.array_equal(g, e) for g, e in zip(ds.fetch_numpy(np.arange(len(ds)))["input_array"], expected))
    ds.pack(tmp_path / "p")
    packed = Consumer.from_packed(tmp_path / "p", style="concat", seqlen=25, sampling=sampling, seed=7)
    assert np.array_equal(packed.fetch_numpy(np.arange(len(packed)))["input_array"],
                          ds.fetch_numpy(np.arange(len(ds)))["input_array"])
    assert ds.get_dict()["sampling"] == {"name": "megatron", "num_samples": 200, "add_extra_token": True}


@pytest.mark.parametrize("kwargs, message", [
    ({"style": "diff", "seqlen": 30, "sampling": "megatron"}, "needs style='concat' and an int seqlen"),
    ({"style": "concat", "seqlen": "auto", "sampling": "megatron"}, "needs style='concat' and an int seqlen"),
    ({"style": "concat", "seqlen": 30, "sampling": "nemo"}, "sampling must be 'consumer', 'megatron'"),
])
def test_consumer_megatron_bad_settings(corpus_dir, kwargs, message):
    from consumer import Consumer, InputError
    with pytest.raises(InputError, match=message):
        Consumer(corpus_dir, cache_dir=False, **kwargs)


def test_megatron_sampling_settings_are_checked():
    from consumer import InputError
    from consumer.tokens.megatron_index import MegatronSampling
    with pytest.raises(InputError, match="num_samples must be None or an int >= 1"):
        MegatronSampling(num_samples=0)
    with pytest.raises(InputError, match="add_extra_token must be a bool"):
        MegatronSampling(add_extra_token="yes")
