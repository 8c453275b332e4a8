"""Mixtures: one dataset made of several datasets, each part drawn by its weight (``consumer.mix``, issue #37).

``consumer.mix(parts, weights=...)`` returns a :class:`Mixture`: global sample ids (the parts' ids one after the
other), the part names as classes, every selection and query of a ``Consumer``, and the resumable loader and batch
cursor of :mod:`consumer.training` with the weights as the class balance. Static weights only, for now.
"""

from __future__ import annotations

from .index import MixtureIndex
from .mixture import Mixture, mix

__all__ = ["Mixture", "MixtureIndex", "mix"]
