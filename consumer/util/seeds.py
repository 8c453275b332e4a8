"""Random streams: one table of stream tags, one function that makes a generator.

Every random choice the engine makes comes from ``numpy.random.Generator(PCG64(SeedSequence(words)))``
with ``words = [seed, *STREAMS[stream], *extra]``: a pure function of the dataset's seed, the stream's
tag and the caller's extra words (epoch, sample ids, ...). No global RNG is ever touched, and two
streams never share draws. Tags are fixed forever: changing one changes every order and mask.

=========  ============  =================================================================
stream     tag           extra words
=========  ============  =================================================================
epoch      (none)        epoch: the permutation of samples (or token batches) of an epoch
select     ``"sele"``    none: the draws of ``{class: n}`` selections, one generator per dataset
mask       ``"mask"``    epoch, sha256 of the batch's sample ids: masked-LM corruption
ties       ``"ties"``    none: the order of equally long samples before token batching
=========  ============  =================================================================
"""

from __future__ import annotations

import numpy as np

__all__ = ["STREAMS", "generator"]

STREAMS: dict[str, tuple[int, ...]] = {
    "epoch": (),
    "select": (0x73656C65,),  # "sele"
    "mask": (0x6D61736B,),    # "mask"
    "ties": (0x74696573,),    # "ties"
}


def generator(seed: int, stream: str, *words: int) -> np.random.Generator:
    """The generator of ``stream`` for ``seed`` and the extra ``words`` (see the module docstring)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), *STREAMS[stream],
                                                                       *(int(w) for w in words)])))
