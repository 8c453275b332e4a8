"""A mixture's fetch: split a batch's global sample ids by part, fetch each part's rows with the part's own
``fetch_numpy`` (its reader, masks and settings), and put the rows back in the batch's order.

How each kind of column is put back:

- a per-row column (``[B, ...]``): one ``np.empty`` and a fancy assignment per part; when the parts' rows differ in
  width (a span query, a part with a CLS column) the narrower are padded (token ids with PAD, ``labels`` with -100,
  ``document_ids`` with -1, anything else with 0);
- ``class``: the part's index (the parts are the mixture's classes); ``sample_id``: the global id;
- a scalar (``max_seqlen``): the largest of the parts';
- ``cu_seqlens`` (:data:`consumer.fetch.layout.RAGGED_COLUMNS`): the pieces of every row, in the batch's row order.
  Each part's pieces come from its ``cu_seqlens``, and its rows' counts of pieces from its ``document_ids``
  (row-local ordinals, -1 on PAD), fetched with it when the query did not ask for them.

``file_id``, ``offset`` and masks stay the part's own (a file of part ``p``; masks drawn from the part's seed and its
local sample ids, so the same request gets the same masks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..fetch.columns import IGNORE_INDEX, parse_query
from ..fetch.layout import RAGGED_COLUMNS
from .index import MixtureIndex

if TYPE_CHECKING:
    from .blend import BlendIndex

__all__ = ["fetch_mixture", "join_rows", "join_pieces"]

_TOKEN_COLUMNS = ("input_array", "output_tensor")
_FILL = {"labels": IGNORE_INDEX, "document_ids": -1}


def _with_document_ids(query: Any) -> Any:
    """``query`` asking for ``document_ids`` too (a preset name or a list of columns; never None here)."""
    return [query, "document_ids"] if isinstance(query, str) else [*query, "document_ids"]


def fetch_mixture(parts: list[Any], index: MixtureIndex | BlendIndex, sample_ids: np.ndarray, query: Any, *, pad: int,
                  epoch: int = 0, width: int | None = None, out_dtype: Any = np.int64) -> dict[str, np.ndarray]:
    """The columns of ``query`` for global ``sample_ids`` (in order), read part by part (see the module docstring).
    ``pad`` is the vocabulary's PAD id. The index gives each id's part and its sample in the part (``part_of``,
    ``local_of``: a block per part, or Megatron's blend, :mod:`consumer.mixtures.blend`)."""
    q = parse_query(query)
    extra = "cu_seqlens" in q.columns and "document_ids" not in q.columns
    part_query = _with_document_ids(query) if extra else query
    owner = index.part_of(sample_ids)
    local_ids = index.local_of(sample_ids, owner)
    chunks: list[tuple[int, np.ndarray, dict[str, np.ndarray]]] = []
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(len(parts) + 1))
    rows = int(sample_ids.size)
    # the token rows of a plain query: each part writes its rows into the batch's own array (no copy after)
    batch = np.empty((rows, index.seqlen if width is None else width), dtype=out_dtype) \
        if q.objective == "plain" and q.columns == ("input_array",) and rows else None
    for p in range(len(parts)):
        pos = order[bounds[p]:bounds[p + 1]]
        if pos.size:
            local = local_ids[pos]
            chunks.append((p, pos, parts[p].fetch_numpy(local, part_query, epoch=epoch, width=width,
                                                        out_dtype=out_dtype, into=None if batch is None else
                                                        (batch, pos))))
    if batch is not None and all(c["input_array"] is batch for _, _, c in chunks):
        return {"input_array": batch}
    if batch is not None:  # a part made rows of its own (files, a CLS column): the batch's rows, joined below
        chunks = [(p, pos, {"input_array": batch[pos]} if c["input_array"] is batch else c) for p, pos, c in chunks]
    if not chunks:  # an empty batch: the columns' empty shapes, from the first part
        chunks = [(0, sample_ids, parts[0].fetch_numpy(sample_ids, part_query, epoch=epoch, width=width,
                                                       out_dtype=out_dtype))]
    out: dict[str, np.ndarray] = {}
    for name, first in chunks[0][2].items():
        if name == "class":
            out[name] = owner.astype(first.dtype)
        elif name == "sample_id":
            out[name] = sample_ids.astype(first.dtype)
        elif name in RAGGED_COLUMNS:
            out[name] = join_pieces([(pos, c[name], c["document_ids"]) for _, pos, c in chunks], rows)
        elif first.ndim == 0:
            out[name] = np.array(max(c[name] for _, _, c in chunks), dtype=first.dtype)
        elif len(chunks) == 1:  # one part: its rows are the batch's, in order
            out[name] = first
        else:
            fill = pad if name in _TOKEN_COLUMNS else _FILL.get(name, 0)
            out[name] = join_rows([(pos, c[name]) for _, pos, c in chunks], rows, fill)
    if extra:
        del out["document_ids"]
    return out


def join_rows(pieces: list[tuple[np.ndarray, np.ndarray]], rows: int, fill: int) -> np.ndarray:
    """``[rows, ...]``: each ``(positions, array)`` written at its rows; trailing sizes padded with ``fill`` to the
    largest of the pieces'."""
    arrays = [a for _, a in pieces]
    dtype = np.result_type(*arrays)
    shape = tuple(max(a.shape[k] for a in arrays) for k in range(1, arrays[0].ndim))
    same = all(a.shape[1:] == shape for a in arrays)
    out = np.empty((rows, *shape), dtype=dtype) if same else np.full((rows, *shape), fill, dtype=dtype)
    for pos, a in pieces:
        if same:
            out[pos] = a
        else:
            where: tuple[Any, ...] = (pos, *(slice(0, s) for s in a.shape[1:]))
            out[where] = a
    return out


def join_pieces(pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]], rows: int) -> np.ndarray:
    """``cu_seqlens`` of a batch of ``rows`` rows from each part's ``(positions, cu_seqlens, document_ids)``: the
    parts' piece lengths laid in the batch's row order, then summed (vectorised; no Python per row or piece)."""
    counts = np.zeros(rows, dtype=np.int64)
    per_part = []
    for pos, cu, doc_ids in pieces:
        c = np.maximum(doc_ids.max(axis=1).astype(np.int64) + 1, 0) if doc_ids.shape[1] else \
            np.zeros(doc_ids.shape[0], dtype=np.int64)
        lengths = np.diff(cu.astype(np.int64))
        if int(c.sum()) != lengths.size:
            raise AssertionError(f"a part's cu_seqlens has {lengths.size} pieces, its document_ids {int(c.sum())}")
        counts[pos] = c
        per_part.append((pos, c, lengths))
    starts = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(counts)])
    lengths_all = np.zeros(int(starts[-1]), dtype=np.int64)
    for pos, c, lengths in per_part:
        local = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(c)[:-1]])
        dest = np.repeat(starts[pos] - local, c) + np.arange(lengths.size, dtype=np.int64)
        lengths_all[dest] = lengths
    dtype = pieces[0][1].dtype if pieces else np.dtype(np.int32)
    out = np.zeros(lengths_all.size + 1, dtype=dtype)
    np.cumsum(lengths_all, out=out[1:])
    return out
