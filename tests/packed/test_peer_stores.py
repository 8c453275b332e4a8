"""Stores other tools wrote (no consumer sidecar) open as datasets: Megatron's and fairseq's ``.bin/.idx`` (a
multimodal ``.idx`` too) and Modalities' ``.pbin``; sequences are documents, ids a vocabulary of ``vocab_size``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer, inspect_packed, verify_packed
from consumer.cli import main
from consumer.errors import FormatError, InputError
from consumer.formats.mmidx import IndexedWriter
from consumer.formats.pbin import PbinWriter
from consumer.tokens.vocab import TokenVocab

from ..tokens.test_megatron_index import DOC_INDEX_1, SAMPLE_INDEX_1, SEED, SEQ, SHUFFLE_1, SIZES, megatron_text

KINDS = ["megatron", "fairseq", "multimodal", "modalities"]


def _docs(seed: int = 0, n: int = 37, top: int = 50_000) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, top, int(rng.integers(0, 90))).astype(np.uint16) for _ in range(n)]


def _write(prefix: Path, kind: str, docs: list[np.ndarray], dtype=np.uint16) -> str:
    if kind == "modalities":
        with PbinWriter(str(prefix) + ".pbin", np.dtype(dtype).itemsize) as w:
            for d in docs:
                w.add_document(d.astype(dtype))
        return str(prefix)
    flavour = "fairseq" if kind == "fairseq" else "megatron"
    with IndexedWriter(str(prefix), dtype, flavour=flavour, multimodal=kind == "multimodal") as w:
        for i, d in enumerate(docs):
            if kind == "multimodal":
                w.add_item(d.astype(dtype), mode=i % 3)
                w.end_document()
            else:
                w.add_document(d.astype(dtype))
    return str(prefix)


@pytest.mark.parametrize("kind", KINDS)
def test_every_sequence_is_a_document_in_both_styles(tmp_path, kind):
    docs = _docs()
    prefix = _write(tmp_path / "web", kind, docs)
    diff = Consumer.from_packed(prefix, style="diff", seqlen=64, cache_dir=tmp_path / "c")
    vocab = diff.vocab
    assert isinstance(vocab, TokenVocab) and vocab.n_data == 65536 and vocab.pad == 65537  # specials after the ids
    assert diff.classes == ["web"] and len(diff) == len(docs) and list(diff.files[:2]) == ["web#0", "web#1"]
    rows = diff.fetch_numpy(np.arange(len(docs)), ["input_array", "attention_mask", "class"])
    for i, d in enumerate(docs):
        n = min(d.size, 64)
        np.testing.assert_array_equal(rows["input_array"][i, :n], d[:n])
        assert (rows["input_array"][i, n:] == vocab.pad).all() and rows["attention_mask"][i].sum() == n
    assert (rows["class"] == 0).all()
    concat = Consumer.from_packed(prefix, style="concat", seqlen=50, cache_dir=tmp_path / "c")
    stream = np.concatenate(docs).astype(np.int64)  # documents back to back, nothing added between them
    got = concat.fetch_numpy(np.arange(len(concat)))["input_array"].reshape(-1)[:stream.size]
    np.testing.assert_array_equal(got, stream)
    assert len(concat) == -(-stream.size // 50)


def test_the_vocabulary_comes_from_the_argument_or_the_dtype(tmp_path):
    docs = _docs(top=1000)
    p16 = _write(tmp_path / "a", "megatron", docs)
    p32 = _write(tmp_path / "b", "megatron", docs, dtype=np.int32)
    assert Consumer.from_packed(p16, cache_dir=False).vocab.n_data == 65536
    assert Consumer.from_packed(p32, cache_dir=False).vocab.n_data == 2**31
    given = Consumer.from_packed(p16, vocab_size=1000, style="diff", seqlen=16, cache_dir=False)
    assert given.vocab.specials == {"EOF": 1000, "PAD": 1001, "MASK": 1002, "CLS": 1003, "SEP": 1004}
    assert "vocab_size=1000" in repr(given)
    masked = given.fetch_numpy(np.arange(len(given)), "mlm", epoch=1)["input_array"]
    assert masked.max() <= 1004  # MASK and random replacements stay in the vocabulary
    with pytest.raises(InputError, match=r"vocab_size must be an int >= 1, got 0"):
        Consumer.from_packed(p16, vocab_size=0)


def test_an_id_beyond_vocab_size_is_refused_when_read_and_by_verify(tmp_path):
    docs = [np.array([1, 2, 3], np.uint16), np.array([4, 999, 5], np.uint16), np.array([6, 7], np.uint16)]
    prefix = _write(tmp_path / "s", "megatron", docs)
    ds = Consumer.from_packed(prefix, vocab_size=100, style="diff", seqlen=4, cache_dir=False)
    np.testing.assert_array_equal(ds[0]["input_array"][0, :3].numpy(), [1, 2, 3])  # a clean row is served
    with pytest.raises(FormatError, match=r"token ids must be in \[0, 100\), got .*999"):
        ds[1]
    with pytest.raises(FormatError, match="999"):
        Consumer.from_packed(prefix, vocab_size=100, verify=True, cache_dir=False)
    assert verify_packed(prefix)["ok"]  # the dtype's vocabulary holds 999


def test_decode_refuses_and_says_why(tmp_path):
    ds = Consumer.from_packed(_write(tmp_path / "s", "megatron", _docs()), cache_dir=False)
    with pytest.raises(InputError, match=r"decode: the ids of this store are a tokenizer's \(65536 ids"):
        ds.decode(ds[0]["input_array"][0])


def test_megatron_sampling_serves_gpt_dataset_items(tmp_path):
    """The worked example of Megatron's GPTDataset (formats.md's vectors, seed 1234): item k of the sample order."""
    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 60_000, n).astype(np.uint16) for n in SIZES]
    prefix = _write(tmp_path / "gpt", "megatron", docs)
    ds = Consumer.from_packed(prefix, style="concat", seqlen=SEQ, sampling="megatron", seed=SEED, cache_dir=False)
    assert ds.seqlen == SEQ + 1 and len(ds) == len(SHUFFLE_1)
    got = ds.fetch_numpy(np.arange(len(ds)))["input_array"]
    for k in range(len(ds)):
        np.testing.assert_array_equal(got[k], megatron_text(docs, DOC_INDEX_1, SAMPLE_INDEX_1, SHUFFLE_1, k, 1))


def test_megatron_core_gpt_dataset_items_equal_ours(tmp_path):
    """Where megatron-core is installed: its GPTDataset over a store it can read gives our items."""
    gpt = pytest.importorskip("megatron.core.datasets.gpt_dataset",
                              reason="megatron-core is not installed (a peer: benchmarks/setup_peers.sh)")
    import types

    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from megatron.core.datasets.utils import Split

    docs = _docs(n=60)
    prefix = _write(tmp_path / "gpt", "megatron", docs)
    tokenizer = types.SimpleNamespace(eod=0, pad=1, vocab_size=None,
                                      unique_identifiers={"class": "peer", "eod": 0, "pad": 1})
    config = gpt.GPTDatasetConfig(random_seed=SEED, sequence_length=32, split="1,0,0", tokenizer=tokenizer,
                                  path_to_cache=str(tmp_path / "mc"), create_attention_mask=False,
                                  reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False)
    index = IndexedDataset(prefix)
    theirs = gpt.GPTDataset(index, prefix, np.arange(len(index), dtype=np.int32), None, Split.train, config)
    ours = Consumer.from_packed(prefix, style="concat", seqlen=32, sampling="megatron", seed=SEED, cache_dir=False)
    assert len(ours) == len(theirs)
    for k in range(len(ours)):
        item = theirs[k]
        text = np.concatenate([np.asarray(item["tokens"]), np.asarray(item["labels"])[-1:]])
        np.testing.assert_array_equal(ours.fetch_numpy(np.array([k]))["input_array"][0], text)


def test_loader_ranks_and_resume_on_a_peer_store(tmp_path):
    ds = Consumer.from_packed(_write(tmp_path / "s", "megatron", _docs(n=40)), style="diff", seqlen=32,
                              cache_dir=tmp_path / "c")
    ranks = [list(ds.dataloader(4, seed=1, rank=r, world_size=2, query=["sample_id"])) for r in (0, 1)]
    seen = [int(i) for batches in ranks for b in batches for i in b["sample_id"]]
    assert sorted(seen) == list(range(40)) and len(ranks[0]) == len(ranks[1])
    loader = ds.dataloader(4, seed=1, query=["sample_id"])
    it = iter(loader)
    first = [next(it)["sample_id"].tolist() for _ in range(3)]
    state = loader.state_dict()
    rest = [b["sample_id"].tolist() for b in it]
    again = ds.dataloader(4, seed=1, query=["sample_id"])
    again.load_state_dict(state)
    assert [b["sample_id"].tolist() for b in again] == rest and len(first) == 3


def test_sql_inspect_info_and_verify_on_a_peer_store(tmp_path, capsys):
    docs = _docs()
    prefix = _write(tmp_path / "s", "megatron", docs)
    ds = Consumer.from_packed(prefix, style="diff", seqlen=64, cache_dir=tmp_path / "c")
    count, total = ds.sql("SELECT count(*), sum(length) FROM documents")[0]
    assert (count, total) == (len(docs), sum(d.size for d in docs))
    summary = inspect_packed(prefix)
    assert summary["documents"] == len(docs) and summary["preview"]["text"] is None
    assert summary["classes"] == {"s": len(docs)} and summary["vocab_size"] == 65536
    assert main(["inspect", prefix, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == len(docs)
    assert main(["info", prefix, "--cache-dir", "off", "--seqlen", "64"]) == 0
    assert "s" in capsys.readouterr().out
    assert main(["sql", prefix, "SELECT count(*) AS n FROM documents", "--json", "--cache-dir", "off"]) == 0
    assert str(len(docs)) in capsys.readouterr().out
    assert main(["verify", prefix]) == 0


def test_vocab_size_is_refused_for_a_store_of_ours_and_an_interrupted_pack_is_no_peer_store(tmp_path):
    fps = {"a": [str(tmp_path / "f.bin")]}
    (tmp_path / "f.bin").write_bytes(b"hello world")
    Consumer(fps, cache_dir=False).pack(tmp_path / "ours")
    with pytest.raises(InputError, match=r"vocab_size is for stores other tools wrote"):
        Consumer.from_packed(tmp_path / "ours", vocab_size=300)
    (tmp_path / "ours.consumer.json").unlink()  # data files and table renamed, sidecar not yet: incomplete
    with pytest.raises(FormatError, match=r"incomplete pack .* sidecar .* is missing"):
        Consumer.from_packed(tmp_path / "ours")


def test_the_store_vocabulary_survives_the_settings_round_trip(tmp_path):
    from consumer.spec import Spec

    ds = Consumer.from_packed(_write(tmp_path / "s", "megatron", _docs(top=900)), vocab_size=1000, cache_dir=False)
    assert Spec.from_dict(ds.spec.to_dict()).vocab == TokenVocab(1000)
    assert ds.get_dict()["vocab_size"] == 1005  # every id of the vocabulary, as for byte tokens
    (tmp_path / "f.bin").write_bytes(b"abc")
    byte_ds = Consumer({"a": [str(tmp_path / "f.bin")]}, n_bytes=1, cache_dir=False)
    assert Spec.from_dict(byte_ds.get_dict()).vocab_size is None  # get_dict's vocab_size is not a store's


def test_a_peer_store_reopens_on_its_recorded_check(tmp_path):
    docs = _docs(n=50)
    prefix = _write(tmp_path / "s", "megatron", docs)
    cache = tmp_path / "c"
    first = Consumer.from_packed(prefix, style="diff", seqlen=40, cache_dir=cache)
    again = Consumer.from_packed(prefix, style="concat", seqlen=40, cache_dir=cache)
    assert (first.build_info["checks"], again.build_info["checks"]) == ("full", "recorded")
    want = Consumer.from_packed(prefix, style="concat", seqlen=40, cache_dir=False)
    np.testing.assert_array_equal(again.fetch_numpy(np.arange(len(again)))["input_array"],
                                  want.fetch_numpy(np.arange(len(want)))["input_array"])
    other = Consumer.from_packed(prefix, style="concat", seqlen=40, vocab_size=50_000, cache_dir=cache)
    assert other.build_info["checks"] == "full"  # another vocabulary: its own check
    _write(tmp_path / "s", "megatron", _docs(seed=5, n=20))  # written again at the same prefix
    fresh = Consumer.from_packed(prefix, style="diff", seqlen=40, cache_dir=cache)
    assert fresh.build_info["checks"] == "full" and len(fresh) == 20
