"""Megatron's blend reproduced: ``consumer.mix(parts, weights=..., sampling="megatron", num_samples=N, seed=S)``.

What megatron-core 0.16.1 does with ``--data-path w0 A w1 B ...`` and a training size ``N``
(``BlendedMegatronDatasetBuilder.build`` with ``config.blend``, then ``BlendedDataset``), and what is done here:

1. The weights are normalised (``megatron.core.datasets.utils.normalize``;
   :func:`consumer.formats.megatron_blending.normalize_weights`), in the order of the parts.
2. Each part's ``GPTDataset`` is asked for ``ceil(ceil(N * w_i) * (1 + surplus))`` samples, with
   ``surplus = config.mid_level_dataset_surplus``, which defaults to 0.005 (:data:`MID_LEVEL_DATASET_SURPLUS`): that
   number sets the part's epochs and whether its last epoch is shuffled apart, so it shapes the part's order. The
   part's samples are Megatron's GPT order over all its documents (``split="1,0,0"``), with the mixture's seed (the
   builder's ``random_seed``, one for every part), ``seq_length = part.seqlen - add_extra_token``
   (:func:`consumer.tokens.megatron_index.megatron_sample_index`). A part's own ``MegatronSampling.num_samples`` is
   not used: the blend asks for its own number, as the builder does.
3. The ``BlendedDataset`` gets the size ``sum(ceil(N * w_i))`` (no surplus) and the normalised weights, which it
   normalises again; its ``dataset_index``/``dataset_sample_index`` are the compiled helper's greedy
   (:func:`consumer.formats.megatron_blending.build_blending_indices`, bit-identical).

Item ``k`` of the mixture is part ``dataset_index[k]``'s item ``dataset_sample_index[k]``; its ``class`` column is the
part's index, which is Megatron's ``dataset_id`` (the ``"megatron"`` query gives the rest of ``BlendedDataset[k]``:
``tokens``, ``labels``, ``loss_mask``, ``position_ids``). Samples are not grouped by part, so ``{part: n}`` and
``{part: [i]}`` selections are refused, as a ``Consumer`` with ``sampling="megatron"`` refuses class selections.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property, partial
from typing import Any

import numpy as np

from ..consumer import Consumer
from ..errors import InputError, short_repr
from ..fetch.fetcher import Fetcher
from ..formats.megatron_blending import blend_sizes, build_blending_indices, normalize_weights
from ..tokens.index import SampleIndex
from ..tokens.megatron_index import MegatronSampling, megatron_sample_index
from .blend_cache import BlendArrays, cached_blend
from .checks import check_weights
from .reader import PartReader

__all__ = ["MID_LEVEL_DATASET_SURPLUS", "Blend", "BlendIndex", "blend_reader", "check_blend_parts", "blend_weights"]

MID_LEVEL_DATASET_SURPLUS = 0.005  # BlendedMegatronDatasetConfig.mid_level_dataset_surplus's default (0.16.1)
_SHARED = ("add_extra_token", "reset_position_ids", "reset_attention_mask", "eod_mask_loss", "create_attention_mask")


def check_blend_parts(parts: dict[str, Consumer]) -> None:
    """Every part built with ``sampling="megatron"`` (a :class:`MegatronSampling`) and agreeing with the first on
    what one ``GPTDatasetConfig`` fixes for all (the extra token and the query's switches); else the part is named."""
    first = None
    for name, part in parts.items():
        s = part.sampling
        if not isinstance(s, MegatronSampling):
            raise InputError(f"sampling='megatron' blends parts built with sampling='megatron' (Megatron's GPT "
                             f"order); part {name!r} has sampling={short_repr(getattr(s, 'name', s))}: build it "
                             "with sampling='megatron' or mix with sampling=None")
        if first is None:
            first = (name, s)
            continue
        for flag in _SHARED:
            if getattr(s, flag) != getattr(first[1], flag):
                raise InputError(f"parts {first[0]!r} and {name!r} disagree on MegatronSampling.{flag} "
                                 f"({getattr(first[1], flag)} vs {getattr(s, flag)}): Megatron's blend has one "
                                 "GPTDatasetConfig for every part")


def blend_weights(weights: object, sizes: dict[str, int], num_samples: int | None) -> list[float]:
    """The weights as given, in the order of the parts (``sizes``: ``{part: samples}``); Megatron normalises them
    itself, so they are not normalised here. Refused: no dict, no ``num_samples``, what ``check_weights`` refuses
    (unknown parts, numbers not finite and >= 0), a part left out or of weight 0 (``BlendedDataset`` asserts every
    weight > 0)."""
    if not isinstance(weights, Mapping):
        raise InputError(f"sampling='megatron' needs weights as a dict {{part: weight > 0}} (Megatron's blend takes "
                         f"one weight per dataset, not a schedule nor natural weights), got {short_repr(weights)}")
    if num_samples is None:
        raise InputError("sampling='megatron' needs num_samples: the size of the blend (Megatron's training "
                         "samples), which sets the samples asked of each part")
    check_weights(weights, sizes)
    out = []
    for name in sizes:
        w = weights.get(name, 0.0)
        if not float(w) > 0:
            raise InputError(f"weights[{name!r}] is {short_repr(w)}: Megatron's blend needs every part's weight > 0 "
                             "(leave the part out of the mixture instead)")
        out.append(float(w))
    return out


class Blend:
    """The blend's arrays: ``targets`` (samples the blend may use per part), ``asked`` (samples each part's GPT order
    is built for, the targets with the surplus), ``size``, ``dataset_index`` (int16), ``dataset_sample_index``
    (int64), ``indexes`` (each part's :class:`SampleIndex` in Megatron's order), ``counts`` (samples each part gives
    the blend) and ``cache`` (``"hit"``, ``"miss"`` or ``"off"``: the arrays are built once and then mapped,
    :mod:`consumer.mixtures.blend_cache`)."""

    def __init__(self, parts: dict[str, Consumer], weights: list[float], num_samples: int, seed: int,
                 surplus: float = MID_LEVEL_DATASET_SURPLUS):
        self.weights = normalize_weights(weights)  # what the builder hands on (BlendedDataset normalises again)
        self.targets = blend_sizes(weights, num_samples)
        self.asked = blend_sizes(weights, num_samples, surplus)
        self.size = int(sum(self.targets))
        shapes = [(int(part.seqlen), bool(_sampling(part).add_extra_token)) for part in parts.values()]
        facts = {"weights": list(weights), "num_samples": num_samples, "seed": seed, "surplus": surplus,
                 "rows": shapes}
        arrays, self.cache = cached_blend(parts, facts, lambda: self._build(parts, seed))
        self.dataset_index, self.dataset_sample_index, self.indexes, self.counts = arrays
        for name, index, count in zip(parts, self.indexes, self.counts, strict=True):
            if len(index) < count:  # BlendedDataset's IndexError, named
                raise InputError(f"the blend asks {count} samples of part {name!r}, which has {len(index)}")

    def _build(self, parts: dict[str, Consumer], seed: int) -> BlendArrays:
        dataset_index, dataset_sample_index = build_blending_indices(self.weights, self.size)
        counts = np.bincount(dataset_index, minlength=len(parts)).tolist()
        indexes = []
        for p, part in enumerate(parts.values()):
            extra = int(_sampling(part).add_extra_token)
            docs = part.documents
            indexes.append(megatron_sample_index(docs.doc_len, docs.doc_class, max(1, part.n_classes),
                                                 seq_length=int(part.seqlen) - extra, seed=seed,
                                                 num_samples=self.asked[p], add_extra_token=bool(extra)))
        return dataset_index, dataset_sample_index, indexes, counts


def _sampling(part: Consumer) -> MegatronSampling:
    s = part.sampling
    assert isinstance(s, MegatronSampling)  # check_blend_parts said so
    return s


class BlendIndex:
    """A blend's index, with :class:`~consumer.mixtures.index.MixtureIndex`'s interface: ``class_ptr`` is all zeros
    (no part owns a contiguous range, so class selections are refused), ``sample_class`` is ``dataset_index``,
    :meth:`local_of` is ``dataset_sample_index``."""

    def __init__(self, blend: Blend, seqlen: int):
        self.blend = blend
        self.seqlen = int(seqlen)
        self.class_ptr = np.zeros(len(blend.indexes) + 1, dtype=np.int64)
        self._counts = np.asarray(blend.counts, dtype=np.int64)
        self._tokens: np.ndarray | None = None

    @cached_property
    def sample_class(self) -> np.ndarray:
        """``[S]`` int32: the part of every item (``dataset_index``; made when a batch order needs it)."""
        return self.blend.dataset_index.astype(np.int32)

    def __len__(self) -> int:
        return self.blend.size

    def samples_per_class(self) -> np.ndarray:
        """Samples of the blend drawn from each part."""
        return self._counts

    def sample_tokens(self) -> np.ndarray:
        """``[S]`` int64: real tokens of every item (Megatron's rows are full: ``seqlen`` each)."""
        if self._tokens is None:
            out = np.empty(self.blend.size, dtype=np.int64)
            for p, index in enumerate(self.blend.indexes):
                where = self.sample_class == p
                out[where] = np.asarray(index.sample_tokens(), dtype=np.int64)[self.blend.dataset_sample_index[where]]
            self._tokens = out
        return self._tokens

    def part_of(self, sample_ids: np.ndarray) -> np.ndarray:
        """The part of each global id (``dataset_index``)."""
        return self.blend.dataset_index[sample_ids].astype(np.int64)

    def local_of(self, sample_ids: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """Each global id's sample in its part (``dataset_sample_index``)."""
        return self.blend.dataset_sample_index[sample_ids]


def blend_reader(name: str, part: Consumer, index: SampleIndex) -> PartReader:
    """Part ``name`` as the blend reads it: a :class:`Fetcher` over the part's documents and its order in the blend,
    with the part's class ids, mask settings and seed."""
    class_ids = np.array([part.class_to_id[c] for c in part.classes], dtype=np.int64)
    fetcher = Fetcher(part.documents, index, class_ids, part.seed, sampling=part.sampling)
    return PartReader(name, partial(_read_blend, fetcher, part))


def _read_blend(fetcher: Fetcher, part: Consumer, sample_ids: np.ndarray, query: Any = None, *, epoch: int = 0,
                width: int | None = None, out_dtype: Any = np.int64, into: Any = None) -> dict[str, np.ndarray]:
    return fetcher.fetch(np.asarray(sample_ids, dtype=np.int64), query, mask=part._mask, epoch=epoch, width=width,
                         out_dtype=out_dtype, into=into)
