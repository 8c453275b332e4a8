"""The ``packed`` style's figures for the padding panel: rows, PAD and documents cut at each ``seqlen`` choice.

Best-fit decreasing (:mod:`consumer.tokens.packing`) has no closed form in SQL, so these numbers come from the
sample index or the packing plan, never from a statement:

- at the dataset's own ``seqlen``, when the dataset is ``packed`` (with these ``long_files``): its index, rows per
  class from ``class_ptr`` and real tokens from ``sample_tokens()`` (``source="index"``);
- else the real planner over the documents' lengths, ``build_index("packed", doc_len, doc_class, n_classes, seqlen,
  long_files=...)``, what building the dataset with that ``seqlen`` gives (``source="packing plan"``);
- above :data:`PLAN_DOCS` documents (or a ``seqlen`` no index takes), concat's rows as a lower bound: per class
  ``ceil(sum(tokens) / seqlen)`` over the tokens the items keep (``source="lower bound"``; the PAD share is then a
  lower bound too).

A ``packed`` row cuts only the documents longer than ``seqlen`` (split into pieces, or truncated), so documents cut
is exact in every case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..tokens.index import MAX_SEQLEN, build_index, padding_share

__all__ = ["PLAN_DOCS", "PackedFigures", "packed_figures", "plan_recipe"]

PLAN_DOCS = 2_000_000
"""Above this many documents the panel gives packed's lower bound instead of planning every ``seqlen`` choice."""

@dataclass(frozen=True)
class PackedFigures:
    """``packed`` at one ``seqlen``: rows, PAD share (%), documents cut (%; None without documents) and where the
    rows come from (``"index"``, ``"packing plan"`` or ``"lower bound"``)."""

    seqlen: int
    rows: int
    pad_pct: float | None
    cut_pct: float | None
    source: str


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def _one(ds: Any, doc_len: np.ndarray, doc_class: np.ndarray, seqlen: int, long_files: str) -> PackedFigures:
    n_docs = int(doc_len.size)
    cut = _pct(int(np.count_nonzero(doc_len > seqlen)), n_docs)
    same = ds.spec.style == "packed" and ds.spec.long_files == long_files and seqlen == int(ds.index.seqlen)
    if not same and (n_docs > PLAN_DOCS or seqlen > MAX_SEQLEN):
        kept = np.minimum(doc_len, seqlen) if long_files == "truncate" else doc_len
        ends = np.searchsorted(doc_class, np.arange(len(ds.classes)), side="right")  # classes are non-decreasing
        csum = np.concatenate(([0], np.cumsum(kept, dtype=np.int64)))
        per_class = np.diff(np.concatenate(([0], csum[ends])))
        rows, real = int((-(-per_class // seqlen)).sum()), int(per_class.sum())
        pad = None if not rows else round(100.0 * (1.0 - real / (rows * seqlen)), 2)
        return PackedFigures(seqlen, rows, pad, cut, "lower bound")
    idx = ds.index if same else build_index("packed", doc_len, doc_class, len(ds.classes), seqlen,
                                            long_files=long_files)
    rows = len(idx)
    pad = None if not rows else round(100.0 * padding_share(idx), 2)
    return PackedFigures(seqlen, rows, pad, cut, "index" if same else "packing plan")


def packed_figures(ds: Any, seqlens: Sequence[int], long_files: str) -> list[PackedFigures]:
    """``packed`` (with ``long_files``) at each of ``seqlens`` over the documents of ``ds`` (see the module
    docstring); each distinct ``seqlen`` is planned once."""
    docs = ds.documents
    doc_len = np.asarray(docs.doc_len)
    doc_class = np.asarray(docs.doc_class)
    done: dict[int, PackedFigures] = {}
    for s in seqlens:
        if s not in done:
            done[s] = _one(ds, doc_len, doc_class, int(s), long_files)
    return [done[s] for s in seqlens]


def plan_recipe(long_files: str) -> str:
    """The Python that gives the packing plan's numbers at ``seqlen`` (shown on the page where SQL would be)."""
    return ("from consumer.tokens.index import build_index\n"
            "docs = ds.documents\n"
            "plan = build_index('packed', docs.doc_len, docs.doc_class, len(ds.classes), seqlen, "
            f"long_files={long_files!r})\n"
            "rows = len(plan)\n"
            "pad_pct = 100 * (1 - plan.sample_tokens().sum() / (rows * seqlen))\n"
            "cut_pct = 100 * (docs.doc_len > seqlen).mean()\n"
            "# at the dataset's own seqlen, when it is packed: plan = ds.index")
