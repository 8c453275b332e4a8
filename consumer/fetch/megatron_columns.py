"""The ``"megatron"`` query: megatron-core ``GPTDataset.__getitem__``'s dict, for a batch, bit for bit.

A row of ``sampling="megatron"`` is Megatron's ``text`` (``seq_length + add_extra_token`` tokens). From it, as
megatron-core 0.16's ``GPTDataset`` does (``_get_ltor_masks_and_position_ids`` and what follows it):

- ``tokens = text[:-1]`` and ``labels = text[1:]`` with the extra token; without it ``tokens = text`` and ``labels``
  is ``text`` rolled left by one, its last entry PAD;
- ``loss_mask`` float32 ones, 0 where the *input* token is EOD when ``eod_mask_loss``;
- ``position_ids`` ``arange(L)``; with ``reset_position_ids`` they restart after every EOD of ``tokens``;
- ``attention_mask`` (with ``create_attention_mask``) ``[1, L, L]`` bool per row, **True where attention is not
  allowed**: above the diagonal, and with ``reset_attention_mask`` from a position after an EOD to every position
  up to it;
- then ``loss_mask`` is 0 where ``labels`` is PAD, and PAD ids in ``tokens`` and ``labels`` become 0 (after the
  loss mask was taken from them, as Megatron orders it).

The EOD is our EOF (a store another tool wrote: ``MegatronSampling(eod=...)``, its tokenizer's), PAD ours (never
in a document: only the rolled label). Megatron's loop over EOD positions is done here with cumulative sums over
the batch: the same values, no Python per position.
"""

from __future__ import annotations

import numpy as np

from ..errors import QueryError

__all__ = ["MEGATRON_COLUMNS", "megatron_columns"]

MEGATRON_COLUMNS = ("tokens", "labels", "loss_mask", "position_ids", "attention_mask")


def megatron_columns(text: np.ndarray, *, extra_token: bool, eod: int | None, pad: int, reset_position_ids: bool,
                     reset_attention_mask: bool, eod_mask_loss: bool, want: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The ``want`` columns of Megatron's items for rows ``text`` (``[B, seq_length + extra_token]`` int64)."""
    if eod is None and (reset_position_ids or reset_attention_mask or eod_mask_loss):
        raise QueryError("the 'megatron' query: reset_position_ids, reset_attention_mask and eod_mask_loss find "
                         "documents by their EOD token, and this store's ids are another tool's (it holds no EOF of "
                         "ours): pass MegatronSampling(eod=<its tokenizer's EOD id>)")
    if extra_token:
        tokens, labels = text[:, :-1].copy(), text[:, 1:].copy()
    else:
        tokens = text.copy()
        labels = np.empty_like(text)
        labels[:, :-1] = text[:, 1:]
        labels[:, -1] = pad
    B, L = tokens.shape
    is_eod = tokens == eod if eod is not None else np.zeros((B, L), dtype=bool)
    loss_mask = np.ones((B, L), dtype=np.float32)
    if eod_mask_loss:
        loss_mask[is_eod] = 0.0
    after = np.zeros((B, L), dtype=bool)  # position j follows an EOD (a new document begins at j)
    after[:, 1:] = is_eod[:, :-1]
    out: dict[str, np.ndarray] = {}
    if "position_ids" in want:
        positions = np.broadcast_to(np.arange(L, dtype=np.int64), (B, L))
        if reset_position_ids:
            begins = np.maximum.accumulate(np.where(after, positions, 0), axis=1)
            out["position_ids"] = positions - begins
        else:
            out["position_ids"] = positions.copy()
    if "attention_mask" in want:
        allowed = np.tril(np.ones((L, L), dtype=bool))[None, :, :]
        if reset_attention_mask:
            part = np.cumsum(after, axis=1)  # which document of the row each position is in
            allowed = allowed & (part[:, :, None] == part[:, None, :])
        blocked = np.empty((B, 1, L, L), dtype=bool)
        blocked[:, 0] = ~allowed
        out["attention_mask"] = blocked
    loss_mask[labels == pad] = 0.0
    tokens[tokens == pad] = 0
    labels[labels == pad] = 0
    out.update(tokens=tokens, labels=labels, loss_mask=loss_mask)
    return {name: out[name] for name in want}
