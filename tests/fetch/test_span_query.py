"""The "span" query (ByT5 span corruption) over a dataset's rows: per document piece, inputs plus labels rebuild every
row exactly, the sentinels sit above every id, the masks are a pure function of (seed, epoch, sample ids), and the
loader's workers carry its rows of varying width."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer, span_vocab_size
from consumer.errors import QueryError
from consumer.fetch.spans import noise_counts
from consumer.tokens.index import STYLES

from ..helpers.spans import rebuild

STYLES_HERE = ["concat", "diff"] + (["packed"] if "packed" in STYLES else [])


def _corpus(root: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    for i, n in enumerate([300, 45, 1200, 7, 260, 90, 510, 2]):
        folder = root / ("a" if i % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.bin").write_bytes(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
    return root


@pytest.mark.parametrize("style", STYLES_HERE)
@pytest.mark.parametrize("n_bytes", [1, 2])
def test_inputs_and_labels_rebuild_every_row(tmp_path, style, n_bytes) -> None:
    root = _corpus(tmp_path / "data")
    ds = Consumer(str(root), style=style, n_bytes=n_bytes, seqlen=256, cache_dir=False,
                  **({"long_files": "windows"} if style == "diff" else {}))
    ds.set_span_mode(noise_density=0.15, mean_span=8)
    ids = np.arange(len(ds))
    rows = ds.fetch_numpy(ids)["input_array"]
    got = ds.fetch_numpy(ids, ["span", "attention_mask", "loss_mask"])
    n_sentinels, size = span_vocab_size(ds.vocab.size, ds.seqlen, 0.15, 8)
    assert got["input_array"].max() < size and got["labels"].max() < size
    sentinel = (got["input_array"] >= ds.vocab.size) & (got["input_array"] < size)
    assert sentinel.any()
    in_len = got["attention_mask"].sum(axis=1)
    lab_len = (got["labels"] != -100).sum(axis=1)
    np.testing.assert_array_equal(got["loss_mask"], (got["labels"] != -100).astype(np.float32))
    rebuilt = rebuild(got["input_array"], got["labels"], in_len, lab_len, sentinel_top=size - 1,
                      n_sentinels=n_sentinels)
    pieces = ds.fetch_numpy(ids, ["input_array", "cu_seqlens", "attention_mask"])
    for r in ids.tolist():
        real = rows[r][rows[r] != ds.vocab.pad]
        np.testing.assert_array_equal(rebuilt[r], real)
    # per piece: T5's noise and span counts, sentinels restarting at the top in each piece
    lengths = np.diff(pieces["cu_seqlens"]).astype(np.int64)
    noise, spans = noise_counts(lengths, 0.15, 8)
    total_sentinels = int((got["labels"] >= ds.vocab.size).sum())
    assert total_sentinels == int(spans[lengths >= 2].sum())
    assert int(lab_len.sum()) == int(noise.sum() + spans[lengths >= 2].sum()) + len(ds)  # one EOS per row
    assert ((got["labels"] == size - 1).sum(axis=1) == [  # <extra_id_0> once per piece with noise
        sum(1 for n in np.diff(ds.fetch_numpy(np.array([r]), ["input_array", "cu_seqlens"])["cu_seqlens"]) if n >= 2)
        for r in ids.tolist()]).all()


def test_masks_are_a_pure_function_of_seed_epoch_and_ids(tmp_path) -> None:
    root = _corpus(tmp_path / "data")
    ds = Consumer(str(root), style="concat", n_bytes=1, seqlen=128, cache_dir=False, seed=3)
    again = Consumer(str(root), style="concat", n_bytes=1, seqlen=128, cache_dir=False, seed=3)
    other = Consumer(str(root), style="concat", n_bytes=1, seqlen=128, cache_dir=False, seed=4)
    for d in (ds, again, other):  # several spans a piece: with one, T5's mask is its piece's last tokens, always
        d.set_span_mode(mean_span=3)
    ids = np.array([2, 0, 5])
    a = ds.fetch_numpy(ids, "span", epoch=1)
    np.testing.assert_array_equal(a["input_array"], again.fetch_numpy(ids, "span", epoch=1)["input_array"])
    assert not np.array_equal(a["labels"], ds.fetch_numpy(ids, "span", epoch=2)["labels"])
    assert not np.array_equal(a["labels"], other.fetch_numpy(ids, "span", epoch=1)["labels"])


def test_the_loader_carries_span_rows_of_varying_width(tmp_path) -> None:
    root = _corpus(tmp_path / "data")
    ds = Consumer(str(root), style="concat", n_bytes=1, seqlen=64, cache_dir=False)
    ds.set_span_mode(mean_span=3)
    direct = list(ds.dataloader(3, seed=2, num_workers=0))
    pooled = list(ds.dataloader(3, seed=2, num_workers=2))
    assert len(direct) == len(pooled) > 2
    assert len({b["input_array"].shape[1] for b in direct}) > 1
    for a, b in zip(direct, pooled):
        assert a.keys() == b.keys() == {"input_array", "labels"}
        assert all(a[k].equal(b[k]) for k in a)


def test_bad_span_settings_and_columns_are_refused(tmp_path) -> None:
    ds = Consumer(str(_corpus(tmp_path / "data")), style="concat", n_bytes=1, seqlen=64, cache_dir=False)
    with pytest.raises(QueryError, match="noise_density must be a number in \\(0, 1\\), got 1.5"):
        ds.set_span_mode(noise_density=1.5)
    with pytest.raises(QueryError, match="mean_span must be a number >= 1, got 0"):
        ds.set_span_mode(mean_span=0)
    with pytest.raises(QueryError, match=r"\['document_ids'\] have no meaning in a 'span' query"):
        ds.fetch_numpy(np.arange(2), ["span", "document_ids"])
