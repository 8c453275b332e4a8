"""Next-token labels (the ``"causal"`` query): which positions are scored, and what they predict.

A causal row is ``input_array`` ``[B, L]``; ``labels[b, j]`` is the token at ``j + 1`` of the same document piece
where it is scored, ``-100`` (:data:`~consumer.fetch.columns.IGNORE_INDEX`) elsewhere. The last position of a row
is not lost: when the row's last document goes on past the row, its next token is read too (a row is read
``L + 1`` tokens wide, as Megatron's ``add_extra_token``, but only the labels see the extra token), so every
position whose next token exists in its document has a label.

Which next tokens are scored (``loss_on``, a subset of :data:`LOSS_ON`):

- ``"content"``: the file's own bytes (TAIL markers and a padded tail token are content: generating a file needs them);
- ``"eof"``: the EOF ending each document (so a model learns where files end);
- ``"header"`` and ``"sep"``: the file-type header libmagic wrote and its separator.

The default scores content and EOF: the header is a description the engine wrote, not data, and predicting it
teaches nothing about the files (it is the same text for every file of a type); PAD is never scored, and no label
crosses from one document to the next (the next document's first token is not predictable from this one; with
document-aware attention, the position cannot even see the documents before it).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..errors import QueryError, short_repr
from ..tokens.documents import DocumentTable, StoreDocuments
from ..util.ranges import flat_ranges
from .layout import BatchLayout

__all__ = ["LOSS_ON", "DEFAULT_LOSS_ON", "check_loss_on", "causal_labels", "next_tokens_exist"]

LOSS_ON = ("content", "eof", "header", "sep")
DEFAULT_LOSS_ON = ("content", "eof")
IGNORE = -100


def check_loss_on(loss_on: object) -> tuple[str, ...]:
    """``loss_on`` as a tuple in :data:`LOSS_ON` order: one kind's name, or an iterable of them (not empty)."""
    kinds = [loss_on] if isinstance(loss_on, str) else loss_on
    if not isinstance(kinds, Iterable) or isinstance(kinds, (bytes, dict)):
        raise QueryError(f"loss_on must be one of {LOSS_ON} or a collection of them, got {short_repr(loss_on)}")
    kinds = list(kinds)
    bad = [k for k in kinds if not isinstance(k, str) or k not in LOSS_ON]
    if bad or not kinds:
        raise QueryError(f"loss_on must name token kinds from {LOSS_ON} (at least one), got {short_repr(loss_on)}")
    return tuple(k for k in LOSS_ON if k in kinds)


def next_tokens_exist(layout: BatchLayout, docs: DocumentTable) -> np.ndarray:
    """Per row, 1 when its last piece stops before its document ends (the next token exists), else 0 (int64)."""
    out = np.zeros(layout.rows, dtype=np.int64)
    last = layout.last
    out[layout.row[last]] = layout.start[last] + layout.length[last] < docs.doc_len[layout.doc[last]]
    return out


def _unscored(layout: BatchLayout, docs: DocumentTable, loss_on: tuple[str, ...]) -> np.ndarray:
    """Flat positions (in the layout's ``[B, W]``) of tokens whose kind is not in ``loss_on``, a piece's first token
    left out (no position of the piece predicts it)."""
    d, a = layout.doc, layout.start
    b = a + layout.length
    end = docs.doc_len[d].astype(np.int64)
    peer = isinstance(docs, StoreDocuments)
    cs = docs.content_start[d].astype(np.int64) if docs.with_header else np.zeros(d.size, dtype=np.int64)
    eof = end - (0 if peer else 1)  # the EOF's position (a peer store's documents have none: past the end)
    spans = []  # [lo, hi) in document positions
    if docs.with_header and "header" not in loss_on:
        spans.append((np.zeros_like(cs), cs - 1))
    if docs.with_header and "sep" not in loss_on:
        spans.append((cs - 1, cs))
    if "content" not in loss_on:
        spans.append((cs, eof))
    if not peer and "eof" not in loss_on:
        spans.append((eof, end))
    out = [np.zeros(0, dtype=np.int64)]
    base = layout.row * layout.width + layout.col - a  # flat position of document position 0 of each piece
    for lo, hi in spans:
        start = np.maximum(lo, a + 1)  # flattened arange(start, end) of every piece with end > start
        pos, piece = flat_ranges(start, np.maximum(np.minimum(hi, b) - start, 0))
        out.append(base[piece] + pos)
    return np.concatenate(out)


def causal_labels(tokens: np.ndarray, following: np.ndarray, ends: np.ndarray, layout: BatchLayout,
                  docs: DocumentTable, loss_on: tuple[str, ...]) -> np.ndarray:
    """``labels`` ``[B, L]`` int64 (the scored positions are where it is not -100): ``tokens`` are the rows
    (``[B, L]``, each row's ``ends[r]`` tokens from column 0, then PAD), ``following`` each row's next token after its
    last one (read where it exists; anything elsewhere), ``layout`` the rows' pieces over ``L + 1`` columns, each
    row's last piece lengthened by one where ``following`` exists (so the following token sits at column
    ``ends[r]``). Two ``[B, L]``-sized arrays are made (the labels and one bool mask): a batch's temporaries come
    fresh from the kernel when the allocator gives them back between batches."""
    B, L = tokens.shape
    W = layout.width  # L + 1
    blocked = np.arange(W, dtype=np.int64)[None, :] >= layout.row_len[:, None]  # PAD predicts nothing
    flat = blocked.reshape(-1)
    flat[layout.row * W + layout.col + layout.length - 1] = True  # a piece's last token predicts nothing in it
    flat[_unscored(layout, docs, loss_on) - 1] = True  # the position before an unscored token (see _unscored)
    labels = np.empty((B, L), dtype=np.int64)
    labels[:, :-1] = tokens[:, 1:]
    has = ends > 0
    labels[np.flatnonzero(has), ends[has] - 1] = following[has]  # where the row has no next token: blocked anyway
    np.copyto(labels, IGNORE, where=blocked[:, :L])
    return labels
