"""Random streams: one table of stream tags, one function that makes a generator.

Every random choice the engine makes comes from ``numpy.random.Generator(PCG64(SeedSequence(words)))``
with ``words = [seed, *STREAMS[stream], *extra]``: a pure function of the dataset's seed, the stream's
tag and the caller's extra words (epoch, sample ids, ...). No global RNG is ever touched, and two
streams never share draws. Tags are fixed forever: changing one changes every order and mask.

=========  ============  =================================================================
stream     tag           extra words
=========  ============  =================================================================
order      ``"load"``    epoch: the draws of an epoch plan (``training/plan.py``): the samples of
                         the epoch, their order, and the order of token-budget batches. The one
                         batch order of ``create_batches``, ``ds[None]`` and ``ds.dataloader``.
epoch      (none)        epoch: the same draws as ``order``, with 0.2's tag. Release 0.2's batch
                         cursor drew its epochs here; only its saved states still use it, so
                         that they resume in the order they started.
select     ``"sele"``    none: the draws of ``{class: n}`` selections, one generator per dataset
mask       ``"mask"``    epoch, sha256 of the batch's sample ids: masked-LM corruption
ties       ``"ties"``    none: the order of equally long samples before token batching
part       ``"part"``    a word of the sha256 of a mixture part's name, the part's epoch: the
                         order of that epoch of the part (``mixtures/plan.py``)
=========  ============  =================================================================
"""

from __future__ import annotations

import numpy as np

__all__ = ["ORDER_STREAMS", "STREAMS", "generator"]

STREAMS: dict[str, tuple[int, ...]] = {
    "order": (0x6C6F6164,),  # "load"
    "epoch": (),
    "select": (0x73656C65,),  # "sele"
    "mask": (0x6D61736B,),    # "mask"
    "ties": (0x74696573,),    # "ties"
    "part": (0x70617274,),    # "part"
}

ORDER_STREAMS = ("order", "epoch")
"""The streams an epoch plan may draw from: ``order`` (every new plan), ``epoch`` (plans resumed from 0.2)."""


def generator(seed: int, stream: str, *words: int) -> np.random.Generator:
    """The generator of ``stream`` for ``seed`` and the extra ``words`` (see the module docstring)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), *STREAMS[stream],
                                                                       *(int(w) for w in words)])))
