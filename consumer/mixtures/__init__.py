"""Mixtures: one dataset made of several datasets, each part drawn by its weight (``consumer.mix``, issue #37).

``consumer.mix(parts, weights=...)`` returns a :class:`Mixture`: global sample ids (the parts' ids one after the
other), the part names as classes, every selection and query of a ``Consumer``, a resumable loader over a step plan
of the weights (a dict, or a schedule of the step: :mod:`.plan`, :mod:`.schedule`, :mod:`.loading`), Megatron's blend
(:mod:`.blend`), SQL over the parts (:mod:`.sql`) and a report (:mod:`.describe`).
"""

from __future__ import annotations

from .index import MixtureIndex
from .mixture import Mixture, mix

__all__ = ["Mixture", "MixtureIndex", "mix"]
