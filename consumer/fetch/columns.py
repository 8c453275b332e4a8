"""Queries (the SELECT list): which columns a batch carries, for which objective, and masked-LM corruption.

A query is ``None``, a preset name (``QUERY_PRESETS``), a list of column names (``COLUMNS``), or a list that starts
with a preset name and adds columns to it (``["causal", "document_ids", "cu_seqlens"]``). Each preset has an
*objective*, which decides what ``input_array``, ``labels`` and ``loss_mask`` mean:

=================  ============  ================================================================
``None``           plain         ``input_array``
``"supervised"``   plain         ``input_array``, ``class``
``"unsupervised"`` mask          ``input_array`` (masked), ``output_tensor`` (the unmasked original)
``"mlm"``          mask          ``input_array`` (masked), ``attention_mask``, ``labels``
``"causal"``       causal        ``input_array``, ``labels`` (the next token, -100 where not scored)
``"span"``         span          ``input_array`` (sentinels for spans), ``labels`` (the spans), T5's layout
``"megatron"``     megatron      ``tokens``, ``labels``, ``loss_mask``, ``position_ids`` (and ``attention_mask``)
=================  ============  ================================================================

A plain list of columns is the mask objective when it asks for ``output_tensor`` or ``labels`` (gperc's rule),
else plain. Masking only touches content tokens (never PAD, EOF, SEP, CLS, TAIL markers or header tokens). With
the ``"bert"`` rule a chosen position becomes MASK 80% of the time, a random data id 10%, and stays 10%; the
``"mask"`` rule always writes MASK. MLM ``labels`` hold the original id at chosen positions and -100 elsewhere.
Masks are a pure function of ``(seed, epoch, sample ids)``: reproducible, no global RNG.

The document columns (``position_ids``, ``document_ids``, ``cu_seqlens``, ``max_seqlen``:
:mod:`consumer.fetch.layout`) and ``loss_mask`` (float32, 1 where the objective scores the position: MLM's chosen
positions, the causal labels' scored positions, Megatron's) go with any objective but span.

All columns are numpy here; :mod:`consumer.fetch.collate` turns them into tensors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import QueryError, short_repr
from ..tokens.vocab import Vocab
from ..util.seeds import generator
from .causal import DEFAULT_LOSS_ON, check_loss_on

__all__ = ["QUERY_PRESETS", "COLUMNS", "MASK_RULES", "MaskConfig", "Query", "BatchParts", "columns_of",
           "parse_query", "make_columns", "needs_masking", "mask_rng", "mask_tokens", "IGNORE_INDEX"]

IGNORE_INDEX = -100
QUERY_PRESETS: dict[str | None, tuple[str, ...]] = {
    None: ("input_array",),
    "supervised": ("input_array", "class"),
    "unsupervised": ("input_array", "output_tensor"),
    "mlm": ("input_array", "attention_mask", "labels"),
    "causal": ("input_array", "labels"),
    "span": ("input_array", "labels"),
    "megatron": ("tokens", "labels", "loss_mask", "position_ids"),
}
_OBJECTIVE = {None: "plain", "supervised": "plain", "unsupervised": "mask", "mlm": "mask", "causal": "causal",
              "span": "span", "megatron": "megatron"}
MASK_RULES = ("bert", "mask")


@dataclass(frozen=True)
class MaskConfig:
    """A dataset's query settings: masked-LM (fraction of content tokens chosen, replacement rule, CLS prefix), the
    causal labels' ``loss_on`` (:mod:`consumer.fetch.causal`) and span corruption's ``noise_density`` and
    ``mean_span`` (:mod:`consumer.fetch.spans`)."""

    frequency: float = 0.15
    rule: str = "bert"
    add_cls: bool = False
    loss_on: tuple[str, ...] = DEFAULT_LOSS_ON
    noise_density: float = 0.15
    mean_span: float = 20.0

    def __post_init__(self) -> None:
        f = self.frequency
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating)) or not 0.0 <= float(f) <= 1.0:
            raise QueryError(f"mask_frequency must be a number in [0, 1], got {short_repr(f)}")
        if self.rule not in MASK_RULES:
            raise QueryError(f"mask_rule must be one of {MASK_RULES}, got {short_repr(self.rule)}")
        if not isinstance(self.add_cls, bool):
            raise QueryError(f"add_cls must be a bool, got {short_repr(self.add_cls)}")
        object.__setattr__(self, "loss_on", check_loss_on(self.loss_on))
        d = self.noise_density
        if isinstance(d, bool) or not isinstance(d, (int, float, np.floating)) or not 0.0 < float(d) < 1.0:
            raise QueryError(f"noise_density must be a number in (0, 1), got {short_repr(d)}")
        m = self.mean_span
        if isinstance(m, bool) or not isinstance(m, (int, float, np.floating)) or not float(m) >= 1.0:
            raise QueryError(f"mean_span must be a number >= 1, got {short_repr(m)}")

    def settings(self) -> dict[str, Any]:
        """JSON-able settings (``get_dict()["mask"]``): the masking's, and the others where they differ from their
        defaults (so a description written before they existed still matches)."""
        out: dict[str, Any] = {"frequency": self.frequency, "rule": self.rule, "add_cls": self.add_cls}
        for name, default in (("loss_on", DEFAULT_LOSS_ON), ("noise_density", 0.15), ("mean_span", 20.0)):
            if getattr(self, name) != default:
                out[name] = list(self.loss_on) if name == "loss_on" else getattr(self, name)
        return out


@dataclass(frozen=True)
class Query:
    """A parsed query: its objective (``plain``, ``mask``, ``causal``, ``span``, ``megatron``) and its columns."""

    objective: str
    columns: tuple[str, ...]


def parse_query(query: object) -> Query:
    """The objective and columns a query selects (validated; see the module docstring)."""
    if query is None or isinstance(query, str):
        preset = _PRESETS.get(query)
        if preset is None:
            raise QueryError(f"unknown query {short_repr(query)}; presets are {list(QUERY_PRESETS)} "
                             f"or a list of columns from {sorted(COLUMNS)}")
        return preset
    if isinstance(query, (list, tuple)) and query and all(isinstance(c, str) for c in query):
        head, rest = (query[0], tuple(query[1:])) if query[0] in QUERY_PRESETS else (None, tuple(query))
        unknown = [c for c in rest if c not in COLUMNS]
        if unknown:
            raise QueryError(f"unknown column(s) {unknown}; columns are {sorted(COLUMNS)} (a list may start with a "
                             f"preset name: {[p for p in QUERY_PRESETS if p]})")
        if head is not None:
            return _checked(_OBJECTIVE[head], tuple(dict.fromkeys(QUERY_PRESETS[head] + rest)))
        cols = tuple(dict.fromkeys(rest))
        return _checked("mask" if needs_masking(cols) else "plain", cols)
    raise QueryError(f"query must be None, a preset name or a non-empty list of column names, got {short_repr(query)}")


def _checked(objective: str, cols: tuple[str, ...]) -> Query:
    """The query, if every column has a meaning under its objective."""
    bad = [c for c in cols if objective not in COLUMN_OBJECTIVES.get(c, _ALL)]
    if bad:
        raise QueryError(f"column(s) {bad} have no meaning in a {objective!r} query; " +
                         "; ".join(f"{c!r} goes with {sorted(COLUMN_OBJECTIVES[c])}" for c in bad))
    return Query(objective, cols)


def columns_of(query: object) -> tuple[str, ...]:
    """The column names a query selects (validated)."""
    return parse_query(query).columns


def needs_masking(cols: tuple[str, ...]) -> bool:
    """Whether a column set asks for masked inputs (it has ``output_tensor`` or ``labels``)."""
    return "output_tensor" in cols or "labels" in cols


def mask_rng(seed: int, epoch: int, sample_ids: np.ndarray) -> np.random.Generator:
    """The generator masking a batch: a pure function of (seed, epoch, the batch's sample ids)."""
    digest = hashlib.sha256(np.ascontiguousarray(sample_ids, dtype=np.int64).tobytes()).digest()
    return generator(seed, "mask", epoch, *np.frombuffer(digest, dtype=np.uint32).tolist())


def mask_tokens(tokens: np.ndarray, content: np.ndarray, cfg: MaskConfig, vocab: Vocab,
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


class BatchParts:
    """What the columns of one batch are made from: the token rows, and the parts the fetcher knows how to make
    (``makers``: name -> a function of no argument), each made once, on first use: ``"masked"`` (masked rows and the
    chosen positions), ``"layout"`` (:class:`~consumer.fetch.layout.BatchLayout` of the rows), ``"causal"`` (the
    labels, -100 where not scored), ``"megatron"`` (Megatron's columns), ``"span"`` (span inputs and labels),
    ``"class"``, ``"file_id"``, ``"offset"``."""

    def __init__(self, tokens: np.ndarray, pad: int, sample_ids: np.ndarray,
                 makers: dict[str, Callable[[], Any]]) -> None:
        self.tokens, self.pad, self.sample_ids, self.makers = tokens, pad, sample_ids, makers
        self._made: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._made:
            self._made[name] = self.makers[name]()
        return self._made[name]

    @cached_property
    def real(self) -> np.ndarray:
        """``[B, L]`` bool: True on tokens, False on PAD."""
        real: np.ndarray = self.tokens != self.pad
        return real


_ANY = ("plain", "mask", "causal", "megatron")  # every objective whose rows are token rows (not span's)
_ALL = _ANY + ("span",)
Maker = Callable[[BatchParts], np.ndarray]


def _f32(mask: np.ndarray) -> np.ndarray:
    return mask.astype(np.float32)


# column -> (description, objective -> how it is made)
_TABLE: dict[str, tuple[str, dict[str, Maker]]] = {
    "input_array": ("[B, L] token ids (masked for MLM; span: the inputs with sentinels)", {
        "plain": lambda b: b.tokens, "causal": lambda b: b.tokens, "mask": lambda b: b["masked"][0],
        "span": lambda b: b["span"][0]}),
    "tokens": ("[B, L] Megatron's tokens (PAD ids as 0)", {"megatron": lambda b: b["megatron"]["tokens"]}),
    "labels": ("[B, L] MLM: the original id where masked; causal: the next token; span: the spans; -100 where not "
               "scored (Megatron: its labels)", {
                   "mask": lambda b: np.where(b["masked"][1], b.tokens, IGNORE_INDEX),
                   "causal": lambda b: b["causal"], "span": lambda b: b["span"][1],
                   "megatron": lambda b: b["megatron"]["labels"]}),
    "loss_mask": ("[B, L] float32: 1 where the objective scores the position (Megatron's name and meaning)", {
        "plain": lambda b: _f32(b["causal"] != IGNORE_INDEX), "causal": lambda b: _f32(b["causal"] != IGNORE_INDEX),
        "mask": lambda b: _f32(b["masked"][1]), "span": lambda b: _f32(b["span"][1] != IGNORE_INDEX),
        "megatron": lambda b: b["megatron"]["loss_mask"]}),
    "attention_mask": ("[B, L] 1 on real tokens, 0 on PAD (Megatron: [B, 1, L, L] bool, True where not allowed)", {
        **{o: lambda b: b.real.astype(b.tokens.dtype) for o in ("plain", "mask", "causal")},
        "span": lambda b: (b["span"][0] != b.pad).astype(np.int64),
        "megatron": lambda b: b["megatron"]["attention_mask"]}),
    "output_tensor": ("[B, L] the unmasked token ids", {"mask": lambda b: b.tokens}),
    "position_ids": ("[B, L] position inside each document piece, restarting at 0 (Megatron: its position_ids)", {
        **{o: lambda b: b["layout"].position_ids() for o in ("plain", "mask", "causal")},
        "megatron": lambda b: b["megatron"]["position_ids"]}),
    "document_ids": ("[B, L] int32: the row-local ordinal of each token's document, -1 on PAD",
                     {o: lambda b: b["layout"].document_ids() for o in _ANY}),
    "cu_seqlens": ("[P + 1] int32: cumulative lengths of the document pieces over the batch's non-PAD tokens",
                   {o: lambda b: b["layout"].cu_seqlens() for o in _ANY}),
    "max_seqlen": ("int32 scalar: the longest document piece", {o: lambda b: b["layout"].max_seqlen() for o in _ANY}),
    "class": ("[B] class id of each sample (class_to_id; a packed row's documents all have it)",
              {o: lambda b: b["class"] for o in _ALL}),
    "sample_id": ("[B] global sample index", {o: lambda b: b.sample_ids.astype(np.int64) for o in _ALL}),
    "file_id": ("[B] index (in ds.files) of the file the sample starts in", {o: lambda b: b["file_id"] for o in _ALL}),
    "offset": ("[B] token offset inside that file's document where the sample starts",
               {o: lambda b: b["offset"] for o in _ALL}),
    "length": ("[B] number of non-PAD tokens", {o: lambda b: b.real.sum(axis=1).astype(np.int64) for o in _ANY}),
}
COLUMNS: dict[str, str] = {name: doc for name, (doc, _) in _TABLE.items()}
COLUMN_OBJECTIVES: dict[str, frozenset[str]] = {name: frozenset(ways) for name, (_, ways) in _TABLE.items()}


def make_columns(query: Query, parts: BatchParts) -> dict[str, np.ndarray]:
    """The query's columns, made from ``parts``."""
    return {c: _TABLE[c][1][query.objective](parts) for c in query.columns}


# every preset parsed once (constants: a query of a batch, parsed at every fetch, is most often a preset)
_PRESETS: dict[str | None, Query] = {name: _checked(_OBJECTIVE[name], cols) for name, cols in QUERY_PRESETS.items()}
