"""How samples are cut from documents: the ``SAMPLINGS`` registry (``Consumer(..., sampling=...)``).

- ``"consumer"`` (:class:`ConsumerSampling`): the styles of :mod:`consumer.tokens.index` (``diff``, ``concat``),
  samples grouped by class;
- ``"megatron"`` (:class:`~consumer.tokens.megatron_index.MegatronSampling`): Megatron-LM's GPT order over all
  documents (concat style, an int ``seqlen``).

A sampling object is a small frozen value with ``name``, ``to_dict()``, ``check(style, seqlen)``,
``row_width(seqlen, doc_len)`` (the resolved row width) and ``build(...)`` (the
:class:`~consumer.tokens.index.SampleIndex`). A new sampling is one class and one registry entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError, short_repr
from .index import SampleIndex, build_index, resolve_seqlen
from .megatron_index import MegatronSampling

__all__ = ["ConsumerSampling", "MegatronSampling", "SAMPLINGS", "Sampling", "parse_sampling"]


@dataclass(frozen=True)
class ConsumerSampling:
    """The engine's own styles (``diff`` / ``concat``), samples grouped by class."""

    name = "consumer"

    def to_dict(self) -> str:
        """JSON-able settings: just the name."""
        return "consumer"

    def key_dict(self) -> str:
        """The settings that shape the sample index: just the name."""
        return "consumer"

    def check(self, style: str, seqlen: int | str) -> None:
        """Every style and seqlen form is fine."""

    def row_width(self, seqlen: int | str, doc_len: np.ndarray) -> int:
        """``seqlen`` resolved against the document lengths (``"auto"``: the longest document)."""
        return resolve_seqlen(seqlen, doc_len)

    def build(self, doc_len: np.ndarray, doc_class: np.ndarray, n_classes: int, *, style: str, seqlen: int | str,
              long_files: str, seed: int) -> SampleIndex:
        """The index of ``style`` (see :func:`consumer.tokens.index.build_index`)."""
        return build_index(style, doc_len, doc_class, n_classes, self.row_width(seqlen, doc_len),
                           long_files=long_files)


Sampling = ConsumerSampling | MegatronSampling
SAMPLINGS: dict[str, Any] = {"consumer": ConsumerSampling, "megatron": MegatronSampling}


def parse_sampling(value: Any) -> Sampling:
    """A sampling object from a name (``"consumer"``, ``"megatron"``), its ``to_dict()`` or an object."""
    if isinstance(value, (ConsumerSampling, MegatronSampling)):
        return value
    if isinstance(value, str) and value in SAMPLINGS:
        return SAMPLINGS[value]()
    if isinstance(value, dict) and value.get("name") == "megatron":
        return MegatronSampling.from_dict(value)
    raise InputError(f"sampling must be 'consumer', 'megatron' or a MegatronSampling, got {short_repr(value)}")
