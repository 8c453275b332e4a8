"""Megatron's blend (``mix(..., sampling="megatron")``): the mixture's item ``k`` is megatron-core's
``BlendedDataset[k]``, as its ``BlendedMegatronDatasetBuilder`` builds it over the same .bin/.idx (where
megatron-core is installed), and always the blend of ``build_blending_indices`` over the parts'
``megatron_sample_index`` orders."""

from __future__ import annotations

import pickle
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from consumer import Consumer, InputError, MegatronSampling, SelectionError, mix
from consumer.formats.megatron_blending import blend_sizes, build_blending_indices, normalize_weights
from consumer.mixtures.blend import MID_LEVEL_DATASET_SURPLUS
from consumer.tokens.megatron_index import megatron_sample_index

SEQ = 32  # Megatron's seq_length; rows are SEQ + 1 wide (add_extra_token)
SEED = 1234
NAMES = ["code", "web", "books"]
WEIGHTS = [[0.3, 0.7], [1 / 3] * 3, [0.2, 0.5, 0.3]]
_REASON = "megatron-core is not installed (a peer: benchmarks/setup_peers.sh)"


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, dict]:
    """Per part: raw files (a Consumer with sampling="megatron"), their packed store (its prefix) and a Consumer over
    the store. The parts differ in size (one runs through several epochs for the larger num_samples)."""
    root = tmp_path_factory.mktemp("blend")
    rng = np.random.default_rng(7)
    out: dict[str, dict] = {}
    for j, name in enumerate(NAMES):
        folder = root / name
        folder.mkdir()
        for i in range(6 + 9 * j):
            n = int(rng.integers(1, 140))
            (folder / f"f{i:02d}.bin").write_bytes(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
        raw = Consumer(str(folder), style="concat", n_bytes=1, seqlen=SEQ, sampling="megatron", seed=SEED,
                       metadata=None, cache_dir=False)
        prefix = str(root / f"store_{name}")
        raw.pack(prefix)
        packed = Consumer.from_packed(prefix, style="concat", seqlen=SEQ, sampling="megatron", seed=SEED,
                                      cache_dir=False)

        def make(kind: str, sampling: MegatronSampling, folder: Path = folder, prefix: str = prefix) -> Consumer:
            if kind == "raw":
                return Consumer(str(folder), style="concat", n_bytes=1, seqlen=SEQ, sampling=sampling, seed=SEED,
                                metadata=None, cache_dir=False)
            return Consumer.from_packed(prefix, style="concat", seqlen=SEQ, sampling=sampling, seed=SEED,
                                        cache_dir=False)

        out[name] = {"raw": raw, "packed": packed, "prefix": prefix, "make": make}
    return out


def _parts(corpora: dict, kind: str, n: int) -> dict[str, Consumer]:
    return {name: corpora[name][kind] for name in NAMES[:n]}


def _expected(parts: dict[str, Consumer], weights: list[float], num_samples: int, seed: int):
    """The blend written out from the two building blocks: the indices and each part's GPT order."""
    size = sum(blend_sizes(weights, num_samples))
    di, dsi = build_blending_indices(normalize_weights(weights), size)
    asked = blend_sizes(weights, num_samples, MID_LEVEL_DATASET_SURPLUS)
    orders = [megatron_sample_index(p.documents.doc_len, p.documents.doc_class, p.n_classes, SEQ, seed, n_p, True)
              for p, n_p in zip(parts.values(), asked, strict=True)]
    return di, dsi, orders


@pytest.mark.parametrize("kind", ["raw", "packed"])
@pytest.mark.parametrize("weights", WEIGHTS, ids=["0.3-0.7", "thirds", "0.2-0.5-0.3"])
@pytest.mark.parametrize("num_samples", [50, 333])
def test_the_blend_is_megatron_s_indices_over_megatron_s_orders(corpora, kind, weights, num_samples):
    parts = _parts(corpora, kind, len(weights))
    m = mix(parts, weights=dict(zip(parts, weights)), sampling="megatron", num_samples=num_samples, seed=SEED)
    di, dsi, orders = _expected(parts, weights, num_samples, SEED)
    assert len(m) == di.size and np.array_equal(m.blend.dataset_index, di)
    assert np.array_equal(m.blend.dataset_sample_index, dsi)
    assert np.array_equal(m.index.sample_class, di) and m.samples_per_class() == \
        dict(zip(parts, np.bincount(di, minlength=len(parts)).tolist()))
    got = m.fetch_numpy(np.arange(len(m)), ["input_array", "class", "sample_id"])
    assert np.array_equal(got["class"], di) and np.array_equal(got["sample_id"], np.arange(len(m)))
    asked = blend_sizes(weights, num_samples, MID_LEVEL_DATASET_SURPLUS)
    for p, (name, order) in enumerate(zip(parts, orders, strict=True)):
        where = np.flatnonzero(di == p)
        assert np.array_equal(m.index.sample_tokens()[where], order.sample_tokens()[dsi[where]])
        alone = corpora[name]["make"](kind, MegatronSampling(num_samples=asked[p]))  # the part asked for its size
        assert len(alone) == len(order)
        want = alone.fetch_numpy(dsi[where])["input_array"]
        assert np.array_equal(got["input_array"][where], want)
    for k in (0, 1, len(m) // 2, len(m) - 1):  # one item at a time equals the batch's row
        assert np.array_equal(m[k]["input_array"].numpy()[0], got["input_array"][k])


@pytest.mark.parametrize("kind", ["raw", "packed"])
@pytest.mark.parametrize("weights", WEIGHTS, ids=["0.3-0.7", "thirds", "0.2-0.5-0.3"])
@pytest.mark.parametrize("num_samples", [50, 333])
def test_items_equal_megatron_core_s_blended_dataset(corpora, kind, weights, num_samples):
    """megatron-core's own builder (default surplus 0.005) over the packed stores of the same parts."""
    gpt = pytest.importorskip("megatron.core.datasets.gpt_dataset", reason=_REASON)
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder

    parts = _parts(corpora, kind, len(weights))
    vocab = next(iter(parts.values())).vocab
    tokenizer = types.SimpleNamespace(eod=vocab.eof, pad=vocab.pad, vocab_size=None,
                                      unique_identifiers={"class": "t", "eod": vocab.eof, "pad": vocab.pad})
    prefixes = [corpora[name]["prefix"] for name in parts]
    config = gpt.GPTDatasetConfig(random_seed=SEED, sequence_length=SEQ, blend=(prefixes, list(weights)),
                                  split="1,0,0", tokenizer=tokenizer, path_to_cache=None,
                                  create_attention_mask=False, reset_position_ids=False, reset_attention_mask=False,
                                  eod_mask_loss=False)
    assert config.mid_level_dataset_surplus == MID_LEVEL_DATASET_SURPLUS
    theirs, _, _ = BlendedMegatronDatasetBuilder(gpt.GPTDataset, [num_samples, 0, 0], lambda: True, config).build()
    m = mix(parts, weights=dict(zip(parts, weights)), sampling="megatron", num_samples=num_samples, seed=SEED)
    assert [d.num_samples for d in theirs.datasets] == m.blend.asked
    assert [len(d) for d in theirs.datasets] == [len(i) for i in m.blend.indexes]
    assert len(theirs) == len(m)
    assert np.array_equal(theirs.dataset_index, m.blend.dataset_index)
    assert np.array_equal(theirs.dataset_sample_index, m.blend.dataset_sample_index)
    ours = m.fetch(np.arange(len(m)), ["megatron", "class"])
    for k in range(len(m)):
        item = theirs[k]
        assert set(item) - {"dataset_id"} == set(ours) - {"class"}
        assert int(item["dataset_id"]) == int(ours["class"][k])
        for name, value in item.items():
            if name != "dataset_id":
                assert torch.equal(ours[name][k], value), (k, name)
    one = m[3, "megatron"]
    assert all(torch.equal(one[name][0], theirs[3][name]) for name in one)


def test_refusals_name_the_part(corpora):
    parts = _parts(corpora, "raw", 2)
    plain = Consumer(str(Path(corpora["web"]["prefix"]).parent / "web"), style="concat", n_bytes=1, seqlen=SEQ + 1,
                     metadata=None, cache_dir=False)  # rows as wide as the others', in our own order
    with pytest.raises(InputError, match="part 'web' has sampling"):
        mix({"code": parts["code"], "web": plain}, weights={"code": 1, "web": 1}, sampling="megatron",
            num_samples=10)
    with pytest.raises(InputError, match=r"weights\['web'\] is 0"):
        mix(parts, weights={"code": 1}, sampling="megatron", num_samples=10)
    with pytest.raises(InputError, match="does not exist"):
        mix(parts, weights={"code": 1, "web": 1, "nope": 1}, sampling="megatron", num_samples=10)
    with pytest.raises(InputError, match="needs num_samples"):
        mix(parts, weights={"code": 1, "web": 1}, sampling="megatron")
    with pytest.raises(InputError, match="needs weights as a dict"):
        mix(parts, weights=[(0, {"code": 1, "web": 1})], sampling="megatron", num_samples=10)
    with pytest.raises(InputError, match="needs weights as a dict"):
        mix(parts, sampling="megatron", num_samples=10)
    other = Consumer(str(Path(corpora["web"]["prefix"]).parent / "web"), style="concat", n_bytes=1, seqlen=SEQ + 1,
                     sampling=MegatronSampling(add_extra_token=False), metadata=None, cache_dir=False)
    with pytest.raises(InputError, match="disagree on MegatronSampling.add_extra_token"):
        mix({"code": parts["code"], "web": other}, weights={"code": 1, "web": 1}, sampling="megatron",
            num_samples=10)
    m = mix(parts, weights={"code": 1, "web": 3}, sampling="megatron", num_samples=20, seed=SEED)
    for selection in ({"code": 2}, {"web": [0, 1]}):
        with pytest.raises(SelectionError, match="part selections .* not supported with sampling='megatron'"):
            m[selection]


def test_the_loader_and_the_description_of_a_blend(corpora):
    parts = _parts(corpora, "packed", 3)
    m = mix(parts, weights={"code": 0.2, "web": 0.5, "books": 0.3}, sampling="megatron", num_samples=40, seed=SEED)
    served = [b for b in m.dataloader(8, shuffle=False, query=["sample_id", "class"])]
    ids = np.concatenate([b["sample_id"].numpy() for b in served])
    assert ids.tolist() == list(range(len(m)))  # Megatron's order: 0, 1, 2, ...
    assert np.array_equal(np.concatenate([b["class"].numpy() for b in served]), m.blend.dataset_index)
    for r in (0, 1):  # as Megatron's pretraining sampler: rank r takes rows r*B .. r*B + B - 1 of each global batch
        got = [b["sample_id"].tolist() for b in m.dataloader(4, shuffle=False, rank=r, world_size=2,
                                                             query=["sample_id"])]
        assert got == [list(range(s + 4 * r, s + 4 * r + 4)) for s in range(0, len(m) - 7, 8)]
    loader = m.dataloader(4, shuffle=False, query=["sample_id"])
    it = iter(loader)
    next(it)
    state, rest = loader.state_dict(), [b["sample_id"].tolist() for b in it]
    resumed = m.dataloader(4, shuffle=False, query=["sample_id"])
    resumed.load_state_dict(state)
    assert [b["sample_id"].tolist() for b in resumed] == rest
    copy = pickle.loads(pickle.dumps(m))  # what a loader's workers get
    assert np.array_equal(copy.blend.dataset_sample_index, m.blend.dataset_sample_index)
    shuffled = np.concatenate([b["sample_id"].numpy() for b in m.dataloader(8, seed=1, query=["sample_id"])])
    assert sorted(shuffled.tolist()) == list(range(len(m)))
    d = m.get_dict()
    assert d["sampling"] == "megatron" and d["num_samples"] == 40 and d["weights"] == m.weights
    again = type(m).from_json(m.to_json(include_files=True))
    assert np.array_equal(again.blend.dataset_index, m.blend.dataset_index)
    assert np.array_equal(again.fetch_numpy(np.arange(len(m)))["input_array"],
                          m.fetch_numpy(np.arange(len(m)))["input_array"])
    m.create_batches(8, shuffle=False)  # the cursor of a blend serves the loader's order over its items
    assert [m.get_next_batch(["sample_id"])["sample_id"].tolist() for _ in range(len(served))] == \
        [b["sample_id"].tolist() for b in served]
    state = m.state_dict()
    fresh = mix(parts, weights={"code": 0.2, "web": 0.5, "books": 0.3}, sampling="megatron", num_samples=40,
                seed=SEED)
    fresh.load_state_dict(state)
    assert torch.equal(fresh[None, ["sample_id"]]["sample_id"], m[None, ["sample_id"]]["sample_id"])


@pytest.mark.parametrize("kind", ["raw", "packed"])
def test_the_blend_is_built_once_then_mapped_and_a_damaged_entry_is_built_again(corpora, kind, tmp_path):
    cache = tmp_path / "cache"

    def opened() -> dict[str, Consumer]:
        c = corpora
        if kind == "raw":
            return {n: Consumer(str(Path(c[n]["prefix"]).parent / n), style="concat", n_bytes=1, seqlen=SEQ,
                                sampling="megatron", seed=SEED, metadata=None, cache_dir=str(cache)) for n in NAMES}
        return {n: Consumer.from_packed(c[n]["prefix"], style="concat", seqlen=SEQ, sampling="megatron", seed=SEED,
                                        cache_dir=str(cache)) for n in NAMES}

    weights = dict(zip(NAMES, WEIGHTS[2]))
    first = mix(opened(), weights=weights, sampling="megatron", num_samples=333, seed=SEED)
    di, dsi, orders = _expected(first.parts, WEIGHTS[2], 333, SEED)
    again = mix(opened(), weights=weights, sampling="megatron", num_samples=333, seed=SEED)
    assert (first.blend.cache, again.blend.cache) == ("miss", "hit")
    for m in (first, again):
        assert np.array_equal(m.blend.dataset_index, di) and np.array_equal(m.blend.dataset_sample_index, dsi)
        for index, order in zip(m.blend.indexes, orders, strict=True):
            assert np.array_equal(index.seg_ptr, order.seg_ptr) and np.array_equal(index.seg_doc, order.seg_doc)
            assert np.array_equal(index.sample_tokens(), order.sample_tokens())
    ids = np.arange(len(first))
    assert np.array_equal(again.fetch_numpy(ids)["input_array"], first.fetch_numpy(ids)["input_array"])
    for index in again.blend.indexes:  # what a first fetch would find over each index comes with the entry
        assert "tiled" in index.__dict__ and (index.runs is not None) == (kind == "packed")
    other = mix(opened(), weights=weights, sampling="megatron", num_samples=334, seed=SEED)  # other facts: own entry
    assert other.blend.cache == "miss" and len(other) >= len(first)
    entries = [p for p in cache.rglob("dataset_sample_index.npy")]
    assert len(entries) == 2
    for path in entries:  # a flipped bit in a cached array: never served, built again
        data = bytearray(path.read_bytes())
        data[-3] ^= 0x10
        path.write_bytes(bytes(data))
    rebuilt = mix(opened(), weights=weights, sampling="megatron", num_samples=333, seed=SEED)
    assert rebuilt.blend.cache == "miss" and np.array_equal(rebuilt.blend.dataset_sample_index, dsi)
    off = mix(_parts(corpora, kind, 3), weights=weights, sampling="megatron", num_samples=333, seed=SEED)
    assert off.blend.cache == "off"  # parts without a cache directory: built at every mix
