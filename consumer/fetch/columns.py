"""Queries (the SELECT list): which columns a batch carries, and masked-LM corruption.

A query is ``None``, a preset name (``QUERY_PRESETS``) or a list of column names (``COLUMNS``).
Presets match gperc's documented key sets exactly:

=================  ==============================================
``None``           ``input_array``
``"supervised"``   ``input_array``, ``class``
``"unsupervised"`` ``input_array`` (masked), ``output_tensor`` (the unmasked original)
``"mlm"``          ``input_array`` (masked), ``attention_mask``, ``labels``
=================  ==============================================

The input is masked exactly when the query asks for ``output_tensor`` or ``labels``. Masking only
touches content tokens (never PAD, EOF, SEP, CLS, TAIL markers or header tokens). With the ``"bert"``
rule a chosen position becomes MASK 80% of the time, a random data id 10%, and stays 10%; the
``"mask"`` rule always writes MASK. ``labels`` hold the original id at chosen positions and -100
elsewhere. Masks are a pure function of ``(seed, epoch, sample ids)``: reproducible, no global RNG.

All columns are numpy here (int64); :mod:`consumer.fetch.collate` turns them into tensors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np

from ..errors import QueryError, short_repr
from ..tokens.vocab import Vocab
from ..util.seeds import generator

__all__ = ["QUERY_PRESETS", "COLUMNS", "COLUMN_BUILDERS", "Column", "Batch", "MASK_RULES", "MaskConfig", "columns_of",
           "build_columns", "needs_masking", "mask_rng", "IGNORE_INDEX"]

IGNORE_INDEX = -100
QUERY_PRESETS: dict[str | None, tuple[str, ...]] = {
    None: ("input_array",),
    "supervised": ("input_array", "class"),
    "unsupervised": ("input_array", "output_tensor"),
    "mlm": ("input_array", "attention_mask", "labels"),
}
MASK_RULES = ("bert", "mask")


@dataclass(frozen=True)
class MaskConfig:
    """Masked-LM settings: fraction of content tokens chosen, replacement rule, CLS prefix."""

    frequency: float = 0.15
    rule: str = "bert"
    add_cls: bool = False

    def __post_init__(self) -> None:
        f = self.frequency
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating)) or not 0.0 <= float(f) <= 1.0:
            raise QueryError(f"mask_frequency must be a number in [0, 1], got {short_repr(f)}")
        if self.rule not in MASK_RULES:
            raise QueryError(f"mask_rule must be one of {MASK_RULES}, got {short_repr(self.rule)}")
        if not isinstance(self.add_cls, bool):
            raise QueryError(f"add_cls must be a bool, got {short_repr(self.add_cls)}")


def columns_of(query: object) -> tuple[str, ...]:
    """The column names a query selects (validated)."""
    if query is None or isinstance(query, str):
        if query not in QUERY_PRESETS:
            raise QueryError(f"unknown query {short_repr(query)}; presets are {list(QUERY_PRESETS)} "
                             f"or a list of columns from {sorted(COLUMNS)}")
        return QUERY_PRESETS[query]
    if isinstance(query, (list, tuple)) and query and all(isinstance(c, str) for c in query):
        unknown = [c for c in query if c not in COLUMNS]
        if unknown:
            raise QueryError(f"unknown column(s) {unknown}; columns are {sorted(COLUMNS)}")
        return tuple(dict.fromkeys(query))
    raise QueryError(f"query must be None, a preset name or a non-empty list of column names, got {short_repr(query)}")


def needs_masking(cols: tuple[str, ...]) -> bool:
    """Whether a column set asks for masked inputs (it has ``output_tensor`` or ``labels``)."""
    return "output_tensor" in cols or "labels" in cols


def mask_rng(seed: int, epoch: int, sample_ids: np.ndarray) -> np.random.Generator:
    """The generator masking a batch: a pure function of (seed, epoch, the batch's sample ids)."""
    digest = hashlib.sha256(np.ascontiguousarray(sample_ids, dtype=np.int64).tobytes()).digest()
    return generator(seed, "mask", epoch, *np.frombuffer(digest, dtype=np.uint32).tolist())


def _mask(tokens: np.ndarray, content: np.ndarray, cfg: MaskConfig, vocab: Vocab,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Masked copy of ``tokens`` and the chosen positions (only where ``content`` is True)."""
    chosen = (rng.random(tokens.shape) < cfg.frequency) & content
    masked = tokens.copy()
    if cfg.rule == "mask":
        masked[chosen] = vocab.mask
        return masked, chosen
    roll = rng.random(tokens.shape)
    to_mask = chosen & (roll < 0.8)
    to_random = chosen & (roll >= 0.8) & (roll < 0.9)
    masked[to_mask] = vocab.mask
    n_random = int(to_random.sum())
    if n_random:
        masked[to_random] = rng.integers(0, vocab.n_data, size=n_random, dtype=np.int64)
    return masked, chosen


@dataclass
class Batch:
    """What the columns of one batch are made from (token rows, masks, per-sample facts)."""

    tokens: np.ndarray                 # [B, L] unmasked ids
    masked: np.ndarray | None          # [B, L] masked ids, when the query masks
    chosen: np.ndarray | None          # [B, L] positions chosen for masking
    pad: int
    sample_ids: np.ndarray
    class_ids: np.ndarray
    file_id: np.ndarray
    offset: np.ndarray


@dataclass(frozen=True)
class Column:
    """One column a query may select: its description and how a :class:`Batch` makes it."""

    doc: str
    make: Callable[[Batch], np.ndarray]


COLUMN_BUILDERS: dict[str, Column] = {
    "input_array": Column("[B, L] token ids (masked when output_tensor or labels is selected)",
                          lambda b: b.masked if b.masked is not None else b.tokens),
    "attention_mask": Column("[B, L] 1 on real tokens, 0 on PAD", lambda b: (b.tokens != b.pad).astype(b.tokens.dtype)),
    "class": Column("[B] class id of each sample (class_to_id)", lambda b: b.class_ids),
    "output_tensor": Column("[B, L] the unmasked token ids", lambda b: b.tokens),
    "labels": Column("[B, L] original id where masked, -100 elsewhere",
                     lambda b: np.where(cast(np.ndarray, b.chosen), b.tokens, IGNORE_INDEX)),
    "sample_id": Column("[B] global sample index", lambda b: b.sample_ids.astype(np.int64)),
    "file_id": Column("[B] index (in ds.files) of the file the sample starts in", lambda b: b.file_id),
    "offset": Column("[B] token offset inside that file's document where the sample starts", lambda b: b.offset),
    "length": Column("[B] number of non-PAD tokens", lambda b: (b.tokens != b.pad).sum(axis=1).astype(np.int64)),
}
COLUMNS: dict[str, str] = {name: column.doc for name, column in COLUMN_BUILDERS.items()}


def build_columns(cols: tuple[str, ...], tokens: np.ndarray, content: np.ndarray | None, *, vocab: Vocab,
                  cfg: MaskConfig, rng_factory: Callable[[], np.random.Generator], sample_ids: np.ndarray,
                  sample_class_ids: np.ndarray, file_id: np.ndarray, offset: np.ndarray) -> dict[str, np.ndarray]:
    """The selected columns as numpy arrays, from token rows and (when masking) their content mask.

    ``rng_factory()`` returns the masking generator; it is only called when masking happens.
    """
    if cfg.add_cls:
        tokens = np.concatenate([np.full((tokens.shape[0], 1), vocab.cls, dtype=tokens.dtype), tokens], axis=1)
        if content is not None:
            content = np.concatenate([np.zeros((content.shape[0], 1), dtype=bool), content], axis=1)
    masked = chosen = None
    if needs_masking(cols):
        if content is None:
            raise QueryError(f"columns {list(cols)} mask the input: the reader must return the content mask")
        masked, chosen = _mask(tokens, content, cfg, vocab, rng_factory())
    batch = Batch(tokens=tokens, masked=masked, chosen=chosen, pad=vocab.pad, sample_ids=sample_ids,
                  class_ids=sample_class_ids, file_id=file_id, offset=offset)
    return {c: COLUMN_BUILDERS[c].make(batch) for c in cols}
