"""The "megatron" query: megatron-core GPTDataset.__getitem__'s dict, bit for bit, for the 8 combinations of
reset_position_ids / reset_attention_mask / eod_mask_loss, with and without the attention mask and the extra token:
against a transcription of megatron-core 0.16's _get_ltor_masks_and_position_ids (always), and against
megatron-core itself over our store and over a peer's (where it is installed)."""

from __future__ import annotations

import itertools
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from consumer import Consumer
from consumer.errors import QueryError
from consumer.tokens.megatron_index import MegatronSampling

from ..packed.test_peer_stores import _docs, _write

SWITCHES = list(itertools.product([False, True], repeat=3))  # reset_position_ids, reset_attention_mask, eod_mask_loss
SEED = 1234


def ltor_reference(text: torch.Tensor, eod: int, pad: int, extra: bool, reset_pos: bool, reset_att: bool,
                   eod_mask: bool, create: bool) -> dict[str, torch.Tensor]:
    """GPTDataset.__getitem__ after the text is read, written out as megatron-core 0.16 does it (its loop over EOD
    positions, its order of the PAD handling)."""
    if extra:
        tokens, labels = text[:-1].contiguous(), text[1:].contiguous()
    else:
        tokens, labels = text.clone(), torch.roll(text, shifts=-1, dims=0)
        labels[-1] = pad
    L = tokens.numel()
    attention = torch.tril(torch.ones((L, L))).unsqueeze(0) if create else None
    loss_mask = torch.ones(L, dtype=torch.float)
    if eod_mask:
        loss_mask[tokens == eod] = 0.0
    position_ids = torch.arange(L, dtype=torch.long)
    if reset_pos or reset_att:
        prev = 0
        for i in position_ids[tokens == eod].clone().tolist():
            if reset_att and attention is not None:
                attention[0, i + 1:, :i + 1] = 0
            if reset_pos:
                position_ids[i + 1:] -= i + 1 - prev
                prev = i + 1
    loss_mask[labels == pad] = 0.0
    tokens[tokens == pad] = 0
    labels[labels == pad] = 0
    out = {"tokens": tokens, "labels": labels, "loss_mask": loss_mask, "position_ids": position_ids}
    if attention is not None:
        out["attention_mask"] = attention < 0.5
    return out


def _ours(tmp_path: Path) -> tuple[Path, Consumer]:
    root = tmp_path / "data"
    rng = np.random.default_rng(5)
    for i, n in enumerate([40, 3, 150, 17, 90, 220, 8, 61]):
        (root / "c").mkdir(parents=True, exist_ok=True)
        (root / "c" / f"f{i}.bin").write_bytes(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
    return root, Consumer(str(root), style="concat", n_bytes=1, seqlen=24, sampling="megatron", seed=SEED,
                          metadata=None, cache_dir=False)


@pytest.mark.parametrize("extra", [True, False])
@pytest.mark.parametrize("create", [False, True])
@pytest.mark.parametrize("switches", SWITCHES)
def test_the_megatron_query_equals_megatron_s_function(tmp_path, switches, create, extra) -> None:
    root, _ = _ours(tmp_path)
    sampling = MegatronSampling(add_extra_token=extra, reset_position_ids=switches[0],
                                reset_attention_mask=switches[1], eod_mask_loss=switches[2],
                                create_attention_mask=create)
    ds = Consumer(str(root), style="concat", n_bytes=1, seqlen=24, sampling=sampling, seed=SEED, metadata=None,
                  cache_dir=False)
    ids = np.arange(len(ds))
    text = ds.fetch_numpy(ids)["input_array"]
    got = ds.fetch(ids, "megatron")
    assert set(got) == {"tokens", "labels", "loss_mask", "position_ids"} | ({"attention_mask"} if create else set())
    assert got["loss_mask"].dtype == torch.float32 and got["tokens"].dtype == torch.int64
    assert int((torch.from_numpy(text) == ds.vocab.eof).sum()) > 3  # documents end inside rows: the switches matter
    for k in ids.tolist():
        want = ltor_reference(torch.from_numpy(text[k]), ds.vocab.eof, ds.vocab.pad, extra, *switches, create)
        for name, value in want.items():
            assert torch.equal(got[name][k], value), (k, name)
    if create:
        assert got["attention_mask"].shape == (len(ds), 1, 24, 24) and got["attention_mask"].dtype == torch.bool


def test_the_switches_do_not_move_the_cache_key_and_survive_the_settings(tmp_path) -> None:
    root, plain = _ours(tmp_path)
    switched = Consumer(str(root), style="concat", n_bytes=1, seqlen=24, seed=SEED, metadata=None, cache_dir=False,
                        sampling=MegatronSampling(reset_position_ids=True, eod_mask_loss=True))
    assert switched.spec.key_dict() == plain.spec.key_dict()
    assert plain.get_dict()["sampling"] == {"name": "megatron", "num_samples": None, "add_extra_token": True}
    settings = switched.get_dict()["sampling"]
    assert settings["reset_position_ids"] is True and settings["eod_mask_loss"] is True
    assert MegatronSampling.from_dict(settings) == switched.sampling
    with pytest.raises(Exception, match="reset_position_ids must be a bool"):
        MegatronSampling(reset_position_ids=1)
    with pytest.raises(Exception, match="eod must be None or a token id"):
        MegatronSampling(eod=-3)


def test_a_peer_store_needs_its_eod_for_the_switches(tmp_path) -> None:
    prefix = _write(tmp_path / "gpt", "megatron", _docs(n=30))
    ds = Consumer.from_packed(prefix, style="concat", seqlen=32, sampling=MegatronSampling(reset_position_ids=True),
                              seed=SEED, cache_dir=False)
    with pytest.raises(QueryError, match=r"pass MegatronSampling\(eod=<its tokenizer's EOD id>\)"):
        ds.fetch_numpy(np.arange(2), "megatron")
    plain = Consumer.from_packed(prefix, style="concat", seqlen=32, sampling="megatron", seed=SEED, cache_dir=False)
    assert plain.fetch_numpy(np.arange(2), "megatron")["position_ids"].tolist() == [list(range(32))] * 2


def _megatron_core(tmp_path: Path, prefix: str, tokenizer, switches, create, extra, seq: int):
    gpt = pytest.importorskip("megatron.core.datasets.gpt_dataset",
                              reason="megatron-core is not installed (a peer: benchmarks/setup_peers.sh)")
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from megatron.core.datasets.utils import Split

    config = gpt.GPTDatasetConfig(random_seed=SEED, sequence_length=seq, split="1,0,0", tokenizer=tokenizer,
                                  path_to_cache=str(tmp_path / f"mc-{switches}-{create}-{extra}"),
                                  create_attention_mask=create, reset_position_ids=switches[0],
                                  reset_attention_mask=switches[1], eod_mask_loss=switches[2],
                                  add_extra_token_to_sequence=extra)
    index = IndexedDataset(prefix)
    return gpt.GPTDataset(index, prefix, np.arange(len(index), dtype=np.int32), None, Split.train, config)


@pytest.mark.parametrize("store", ["ours", "peer"])
@pytest.mark.parametrize("switches", SWITCHES)
def test_megatron_core_s_items_equal_ours(tmp_path, store, switches) -> None:
    """Where megatron-core is installed: its GPTDataset over the same .bin/.idx gives our items, every key."""
    pytest.importorskip("megatron.core.datasets.gpt_dataset",
                        reason="megatron-core is not installed (a peer: benchmarks/setup_peers.sh)")
    for create, extra in itertools.product([False, True], [True, False]):
        if store == "ours":
            _, files = _ours(tmp_path / "src")
            prefix = str(tmp_path / "store")
            if not Path(prefix + ".bin").exists():
                files.pack(prefix)
            eod, pad, sampling_ids = files.vocab.eof, files.vocab.pad, {}
        else:
            prefix = _write(tmp_path / "gpt", "megatron", _docs(n=60, top=40)) if not (tmp_path / "gpt.bin").exists() \
                else str(tmp_path / "gpt")
            eod, pad, sampling_ids = 0, 1, {"eod": 0, "pad": 1}  # a tokenizer whose PAD appears in the data
        tokenizer = types.SimpleNamespace(eod=eod, pad=pad, vocab_size=None,
                                          unique_identifiers={"class": "t", "eod": eod, "pad": pad})
        theirs = _megatron_core(tmp_path, prefix, tokenizer, switches, create, extra, 20)
        sampling = MegatronSampling(add_extra_token=extra, reset_position_ids=switches[0],
                                    reset_attention_mask=switches[1], eod_mask_loss=switches[2],
                                    create_attention_mask=create, **sampling_ids)
        ours = Consumer.from_packed(prefix, style="concat", seqlen=20, sampling=sampling, seed=SEED, cache_dir=False)
        assert len(ours) == len(theirs)
        got = ours.fetch(np.arange(len(ours)), "megatron")
        for k in range(len(ours)):
            item = theirs[k]
            assert set(item) == set(got), (item.keys(), got.keys())
            for name, value in item.items():
                assert torch.equal(got[name][k], value), (k, name, create, extra)
