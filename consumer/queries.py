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

All columns are numpy here (int64); :mod:`consumer.collate` turns them into tensors.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .errors import QueryError, short_repr
from .vocab import Vocab

__all__ = ["QUERY_PRESETS", "COLUMNS", "MASK_RULES", "MaskConfig", "columns_of", "build_columns", "IGNORE_INDEX"]

IGNORE_INDEX = -100
QUERY_PRESETS: dict[str | None, tuple[str, ...]] = {
    None: ("input_array",),
    "supervised": ("input_array", "class"),
    "unsupervised": ("input_array", "output_tensor"),
    "mlm": ("input_array", "attention_mask", "labels"),
}
COLUMNS = {
    "input_array": "[B, L] token ids (masked when output_tensor or labels is selected)",
    "attention_mask": "[B, L] 1 on real tokens, 0 on PAD",
    "class": "[B] class id of each sample (class_to_id)",
    "output_tensor": "[B, L] the unmasked token ids",
    "labels": "[B, L] original id where masked, -100 elsewhere",
    "sample_id": "[B] global sample index",
    "file_id": "[B] index (in ds.files) of the file the sample starts in",
    "offset": "[B] token offset inside that file's document where the sample starts",
    "length": "[B] number of non-PAD tokens",
}
MASK_RULES = ("bert", "mask")
_MASK_TAG = 0x6D61736B  # "mask": separates mask streams from other uses of the seed


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


def columns_of(query) -> tuple[str, ...]:
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
    words = np.frombuffer(digest, dtype=np.uint32).tolist()
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), _MASK_TAG, int(epoch), *words])))


def _mask(tokens: np.ndarray, content: np.ndarray, cfg: MaskConfig, vocab: Vocab, rng: np.random.Generator):
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


def build_columns(cols: tuple[str, ...], tokens: np.ndarray, content: np.ndarray | None, *, vocab: Vocab,
                  cfg: MaskConfig, rng_factory, sample_ids: np.ndarray, sample_class_ids: np.ndarray,
                  file_id: np.ndarray, offset: np.ndarray) -> dict[str, np.ndarray]:
    """The selected columns as numpy arrays, from token rows and (when masking) their content mask.

    ``rng_factory()`` returns the masking generator; it is only called when masking happens.
    """
    if cfg.add_cls:
        tokens = np.concatenate([np.full((tokens.shape[0], 1), vocab.cls, dtype=np.int64), tokens], axis=1)
        if content is not None:
            content = np.concatenate([np.zeros((content.shape[0], 1), dtype=bool), content], axis=1)
    out: dict[str, np.ndarray] = {}
    masked = chosen = None
    if needs_masking(cols):
        masked, chosen = _mask(tokens, content, cfg, vocab, rng_factory())
    for c in cols:
        if c == "input_array":
            out[c] = masked if masked is not None else tokens
        elif c == "attention_mask":
            out[c] = (tokens != vocab.pad).astype(np.int64)
        elif c == "class":
            out[c] = sample_class_ids
        elif c == "output_tensor":
            out[c] = tokens
        elif c == "labels":
            out[c] = np.where(chosen, tokens, IGNORE_INDEX)
        elif c == "sample_id":
            out[c] = sample_ids.astype(np.int64)
        elif c == "file_id":
            out[c] = file_id
        elif c == "offset":
            out[c] = offset
        elif c == "length":
            out[c] = (tokens != vocab.pad).sum(axis=1).astype(np.int64)
    return out
