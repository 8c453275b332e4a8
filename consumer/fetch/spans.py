"""T5 / ByT5 span corruption as pure numpy functions: noise masks, sentinel encoding, T5's length helper.

T5's rule (``random_spans_noise_mask`` of the T5 preprocessors, also in Hugging Face's ``run_t5_mlm_flax.py``),
for one document piece of ``n >= 2`` tokens::

    num_noise = clip(round(n * noise_density), 1, n - 1)
    num_spans = max(1, round(num_noise / mean_span))       # also capped at min(num_noise, n - num_noise)
    mask      = nonnoise_0 noise_0 nonnoise_1 noise_1 ...   # num_spans non-empty spans of each kind

All masks with these counts are equally likely. ``round`` is half-to-even (Python's ``round`` and ``np.rint``).
The cap binds only where T5 would need more spans than it has tokens of a kind (never with ``mean_span >= 1`` and
``noise_density < 0.5``; e.g. 3 tokens at density 0.5, mean 1: 2 noise tokens, 1 non-noise token, so 1 span, not 2):
there T5 builds empty spans and Hugging Face's copy fails. A piece of fewer than 2 tokens gets no noise.

:func:`span_corrupt` corrupts every document piece of a batch at once (no loop per piece or token): a row holding
several pieces is several T5 examples laid end to end, each with its own mask and sentinels restarting at
``sentinel_top`` (ByT5's ``<extra_id_0>`` is the highest id; the k-th span of a piece gets ``sentinel_top - k``)::

    inputs[row] = for each piece: its non-noise tokens, each noise span replaced by one sentinel; then EOS
    labels[row] = for each piece: each sentinel followed by its noise span; then EOS

Rows without pieces stay empty (length 0). ``inputs`` is padded with ``pad``, ``labels`` with -100.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError, QueryError, short_repr
from ..util.ranges import flat_ranges
from ..util.validate import check_int, int_vector

__all__ = ["IGNORE_INDEX", "SpanBatch", "compute_input_and_target_lengths", "max_spans", "random_spans_noise_mask",
           "span_corrupt", "noise_counts"]

IGNORE_INDEX = -100  # the label padding of torch's cross entropy


class SpanBatch(tuple[np.ndarray, np.ndarray, np.ndarray]):
    """What :func:`span_corrupt` returns: unpacks as ``inputs, labels, noise``, with the row lengths as attributes.

    ``inputs`` [B, Win] (``pad`` after each row), ``labels`` [B, Wt] (-100 after each row), ``noise`` [B, L] (the
    mask used, on the original columns); ``input_lengths`` and ``label_lengths`` [B] (EOS included; 0 for a row
    without pieces). ``Win``/``Wt`` are the longest row of this batch."""

    input_lengths: np.ndarray
    label_lengths: np.ndarray

    def __new__(cls, inputs: np.ndarray, labels: np.ndarray, noise: np.ndarray, input_lengths: np.ndarray,
                label_lengths: np.ndarray) -> SpanBatch:
        self = super().__new__(cls, (inputs, labels, noise))
        self.input_lengths, self.label_lengths = input_lengths, label_lengths
        return self

    @property
    def inputs(self) -> np.ndarray:
        """[B, Win] int64 encoder inputs."""
        return self[0]

    @property
    def labels(self) -> np.ndarray:
        """[B, Wt] int64 decoder targets."""
        return self[1]

    @property
    def noise(self) -> np.ndarray:
        """[B, L] bool: the noise mask used."""
        return self[2]


def _number(name: str, value: object, low: float, high: float, what: str) -> float:
    if isinstance(value, (float, int, np.floating, np.integer)) and not isinstance(value, (bool, np.bool_)):
        out = float(value)
        if math.isfinite(out) and low < out < high:
            return out
    raise QueryError(f"{name} must be {what}, got {short_repr(value)}")


def _check_settings(noise_density: object, mean_span: object) -> tuple[float, float]:
    return (_number("noise_density", noise_density, 0.0, 1.0, "a number in (0, 1)"),
            _number("mean_span", mean_span, 0.0, math.inf, "a finite number > 0"))


def noise_counts(lengths: np.ndarray, noise_density: float, mean_span: float) -> tuple[np.ndarray, np.ndarray]:
    """T5's ``(num_noise, num_spans)`` for pieces of ``lengths`` tokens (both 0 where a piece has < 2 tokens)."""
    density, mean = _check_settings(noise_density, mean_span)
    return _counts(np.asarray(lengths, dtype=np.int64), density, mean)


def _counts(n: np.ndarray, density: float, mean: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`noise_counts` of int64 ``n`` with settings already checked."""
    noise = np.clip(np.rint(n * density).astype(np.int64), 1, np.maximum(n - 1, 1))
    spans = np.clip(np.rint(noise / mean).astype(np.int64), 1, np.maximum(np.minimum(noise, n - noise), 1))
    short = n < 2
    return np.where(short, 0, noise), np.where(short, 0, spans)


def max_spans(seqlen: int, noise_density: float, mean_span: float) -> int:
    """The most noise spans any piece of at most ``seqlen`` tokens gets: size ``n_sentinels`` to at least this.

    Both counts of T5's rule never decrease with the length (``noise_density < 1``), so it is the count of a piece
    of exactly ``seqlen`` tokens."""
    n = check_int("seqlen", seqlen, minimum=0, error=QueryError)
    return int(noise_counts(np.array([n]), noise_density, mean_span)[1][0])


def compute_input_and_target_lengths(inputs_length: int, noise_density: float,
                                     mean_noise_span_length: float) -> tuple[int, int]:
    """T5's ``random_spans_helper``: ``(tokens_length, targets_length)`` such that a piece of ``tokens_length``
    tokens becomes ``inputs_length`` input tokens and ``targets_length`` label tokens (EOS included in both).

    Exactly T5's arithmetic, quirks included: its counts skip the clipping of the mask (so short lengths, where
    ``round(num_noise / mean)`` is 0, disagree with the mask by one span), and at ``noise_density == 0.5`` it takes
    one token off when the targets come out longer than the inputs (then a piece gives one input token fewer)."""
    inputs_length = check_int("inputs_length", inputs_length, minimum=1, error=QueryError)
    density, mean = _check_settings(noise_density, mean_noise_span_length)

    def lengths(tokens_length: int) -> tuple[int, int]:
        num_noise = int(round(tokens_length * density))
        num_spans = int(round(num_noise / mean))
        return tokens_length - num_noise + num_spans + 1, num_noise + num_spans + 1

    tokens_length = inputs_length
    while lengths(tokens_length + 1)[0] <= inputs_length:
        tokens_length += 1
    got_inputs, targets_length = lengths(tokens_length)
    if density == 0.5 and targets_length > got_inputs:  # T5's hack: targets as long as the (round) inputs
        tokens_length -= 1
        targets_length -= 1
    return tokens_length, targets_length


def random_spans_noise_mask(length: int, noise_density: float, mean_span: float,
                            rng: np.random.Generator) -> np.ndarray:
    """T5's noise mask for one piece of ``length`` tokens (bool [length]); the plain reference of the rule.

    Each segmentation shuffles ``num_spans - 1`` "a span starts here" flags over the ``k - 1`` gaps between ``k``
    items (T5's ``_random_segmentation``); all masks with T5's counts are equally likely."""
    n = check_int("length", length, minimum=0, error=QueryError)
    _check_rng(rng)
    noise, spans = (int(c[0]) for c in noise_counts(np.array([n]), noise_density, mean_span))
    if spans == 0:
        return np.zeros(n, dtype=bool)

    def segment(items: int) -> np.ndarray:
        gaps = np.arange(items - 1) < spans - 1
        rng.shuffle(gaps)
        return np.bincount(np.cumsum(np.concatenate([[True], gaps])) - 1, minlength=spans)

    lengths = np.stack([segment(n - noise), segment(noise)], axis=1).reshape(-1)
    return np.repeat(np.tile([False, True], spans), lengths)


def _check_rng(rng: object) -> None:
    if not isinstance(rng, np.random.Generator):
        raise QueryError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {short_repr(rng)}")


def _segment_starts(items: np.ndarray, segments: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For groups of ``items[p] >= 1`` items cut into ``segments[p]`` non-empty segments: the flags (over all items,
    group after group) of the first item of each segment, the ``segments[p] - 1`` cuts drawn uniformly among the
    ``items[p] - 1`` gaps of each group, for all groups at once (a random key per gap, sorted within its group; equal
    keys, odds about ``items**2 / 2**(64 - log2(groups))``, fall back to column order)."""
    within, group = flat_ranges(0, items)
    starts: np.ndarray = within == 0
    gaps = np.flatnonzero(~starts)  # item i >= 1 of a group: a segment may start there
    shift = max(int(items.size).bit_length(), 1)  # group in the high bits, a random key in the others
    keys = (group[gaps].astype(np.uint64) << np.uint64(64 - shift)) | \
        rng.integers(0, 2 ** (64 - shift), gaps.size, dtype=np.uint64)
    order = gaps[np.argsort(keys, kind="stable")]
    rank, _ = flat_ranges(0, items - 1)
    starts[order[rank < segments[group[order]] - 1]] = True
    return starts


def _draw_mask(piece_len: np.ndarray, noise: np.ndarray, spans: np.ndarray, piece: np.ndarray,
               rng: np.random.Generator) -> np.ndarray:
    """T5 noise flags for every token of every piece (flat, pieces in order), drawn for all pieces at once, from
    the pieces' :func:`noise_counts` and the piece of every token."""
    noisy = spans > 0
    noise, spans, n = noise[noisy], spans[noisy], piece_len[noisy]
    noise_starts = _segment_starts(noise, spans, rng)
    keep_starts = _segment_starts(n - noise, spans, rng)
    total = int(spans.sum())
    noise_len = np.bincount(np.cumsum(noise_starts) - 1, minlength=total)
    keep_len = np.bincount(np.cumsum(keep_starts) - 1, minlength=total)
    kinds = np.tile(np.array([False, True]), total)
    flags = np.zeros(piece.size, dtype=bool)
    flags[noisy[piece]] = np.repeat(kinds, np.stack([keep_len, noise_len], axis=1).reshape(-1))
    return flags


def _check_pieces(tokens: np.ndarray, piece_row: object, piece_col: object,
                  piece_len: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    b, width = tokens.shape
    row = int_vector("piece_row", piece_row, minimum=0, maximum=max(b - 1, 0))
    col = int_vector("piece_col", piece_col, minimum=0, maximum=width)
    n = int_vector("piece_len", piece_len, minimum=0, maximum=width)
    if not row.size == col.size == n.size:
        raise InputError(f"piece_row, piece_col and piece_len must have one entry per piece, got lengths "
                         f"{row.size}, {col.size} and {n.size}")
    if row.size and b == 0:
        raise InputError(f"piece_row: tokens has no rows, got pieces in rows {short_repr(row.tolist())}")
    past = np.flatnonzero(col + n > width)
    if past.size:
        i = int(past[0])
        raise InputError(f"piece {i} (piece_col={int(col[i])}, piece_len={int(n[i])}) ends past the {width} columns "
                         f"of tokens")
    same = row[1:] == row[:-1]
    bad = np.flatnonzero((row[1:] < row[:-1]) | (same & (col[1:] < col[:-1] + n[:-1])))
    if bad.size:
        i = int(bad[0]) + 1
        raise InputError(f"pieces must be ordered by row then column without overlap: piece {i} (row {int(row[i])}, "
                         f"col {int(col[i])}) follows piece {i - 1} (row {int(row[i - 1])}, col {int(col[i - 1])}, "
                         f"len {int(n[i - 1])})")
    return row, col, n


def _check_ids(values: np.ndarray, *, sentinel_top: object, n_sentinels: object, first_free_id: object,
               eos: object, pad: object) -> tuple[int, int, int, int]:
    top = check_int("sentinel_top", sentinel_top, minimum=0, error=QueryError)
    count = check_int("n_sentinels", n_sentinels, minimum=1, error=QueryError)
    free = check_int("first_free_id", first_free_id, minimum=0, error=QueryError)
    eos_id = check_int("eos", eos, error=QueryError)
    pad_id = check_int("pad", pad, error=QueryError)
    low = top - count + 1
    if low < free:
        raise QueryError(f"sentinel_top={top} with n_sentinels={count} uses ids down to {low}, below "
                         f"first_free_id={free}: sentinels would collide with data or special ids")
    for name, value in (("eos", eos_id), ("pad", pad_id)):
        if low <= value <= top:
            raise QueryError(f"{name}={value} is one of the sentinel ids [{low}, {top}]")
    if values.size and int(values.max()) >= free:
        raise InputError(f"tokens: a piece holds id {int(values.max())}, not below first_free_id={free} "
                         f"(the sentinels' range starts at {low})")
    return top, count, eos_id, pad_id


def span_corrupt(tokens: np.ndarray, piece_row: np.ndarray, piece_col: np.ndarray, piece_len: np.ndarray,
                 rng: np.random.Generator, *, noise_density: float, mean_span: float, sentinel_top: int,
                 n_sentinels: int, first_free_id: int, eos: int, pad: int) -> SpanBatch:
    """T5 span corruption of every document piece of a batch (see the module docstring for the layout).

    ``tokens`` [B, L] integer ids; piece ``i`` is ``tokens[piece_row[i], piece_col[i]:piece_col[i] + piece_len[i]]``,
    pieces ordered by row then column, not overlapping (tokens outside every piece are dropped). ``rng`` draws every
    mask (a pure function of the caller's seed). Sentinels are ``sentinel_top - k`` for the k-th span of a piece,
    ``k < n_sentinels``, and must all be ``>= first_free_id`` (the smallest id not used by data or specials).

    Raises :class:`QueryError` for bad settings (sentinel range overlapping ``first_free_id``, ``eos`` or ``pad``; a
    piece needing more than ``n_sentinels`` spans: size it with :func:`max_spans`) and :class:`InputError` for bad
    arrays (pieces out of bounds, unordered or overlapping, ids ``>= first_free_id`` inside a piece).
    """
    arr = np.asarray(tokens)
    if arr.ndim != 2 or arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"tokens must be a 2-D integer array [B, L], got {arr.dtype} of shape {arr.shape}")
    _check_rng(rng)
    density, mean = _check_settings(noise_density, mean_span)
    row, col, n = _check_pieces(arr, piece_row, piece_col, piece_len)
    within, piece = flat_ranges(0, n)
    rows, cols = row[piece], col[piece] + within
    vals = arr[rows, cols]
    top, count, eos_id, pad_id = _check_ids(vals, sentinel_top=sentinel_top, n_sentinels=n_sentinels,
                                            first_free_id=first_free_id, eos=eos, pad=pad)
    noise_len, spans = _counts(n, density, mean)
    if spans.size and int(spans.max()) > count:
        i = int(np.argmax(spans))
        raise QueryError(f"n_sentinels={count} is too few: piece {i} of {int(n[i])} tokens needs {int(spans[i])} "
                         f"spans (use max_spans(seqlen, noise_density, mean_span))")
    flag = _draw_mask(n, noise_len, spans, piece, rng)
    noise = np.zeros(arr.shape, dtype=bool)
    noise[rows, cols] = flag
    return _encode(arr.shape[0], row, n, piece, within, rows, vals.astype(np.int64), flag, noise, sentinel_top=top,
                   n_sentinels=count, eos=eos_id, pad=pad_id)


def encode_mask(tokens: np.ndarray, piece_row: np.ndarray, piece_col: np.ndarray, piece_len: np.ndarray,
                noise: np.ndarray, *, sentinel_top: int, n_sentinels: int, eos: int, pad: int) -> SpanBatch:
    """The inputs and labels of a given noise mask (``noise`` [B, L] bool; only the pieces' columns are read).

    Internal (arguments are trusted, pieces as :func:`span_corrupt` checks them) and exact for any mask: each run of
    noise tokens within a piece is one span. Raises :class:`QueryError` when a piece has more than ``n_sentinels``
    spans."""
    within, piece = flat_ranges(0, piece_len)
    rows, cols = piece_row[piece], piece_col[piece] + within
    return _encode(tokens.shape[0], piece_row, piece_len, piece, within, rows, tokens[rows, cols].astype(np.int64),
                   noise[rows, cols].astype(bool), noise, sentinel_top=sentinel_top, n_sentinels=n_sentinels, eos=eos,
                   pad=pad)


def _encode(b: int, piece_row: np.ndarray, piece_len: np.ndarray, piece: np.ndarray, within: np.ndarray,
            rows: np.ndarray, vals: np.ndarray, flag: np.ndarray, noise: np.ndarray, *, sentinel_top: int,
            n_sentinels: int, eos: int, pad: int) -> SpanBatch:
    """:func:`encode_mask` given the flattened pieces: each token's piece, index within it and row, its id (int64)
    and noise flag (bool), for ``b`` rows; ``noise`` is returned as the batch's mask."""
    start = flag & ~np.concatenate([[False], flag[:-1]])
    start[within == 0] = flag[within == 0]
    per_piece = np.bincount(piece, weights=start, minlength=piece_len.size).astype(np.int64)
    if per_piece.size and int(per_piece.max()) > n_sentinels:
        i = int(np.argmax(per_piece))
        raise QueryError(f"n_sentinels={n_sentinels} is too few: piece {i} has {int(per_piece[i])} noise spans")
    k = np.cumsum(start) - 1 - np.repeat(np.cumsum(per_piece) - per_piece, piece_len)
    sentinel = sentinel_top - k
    has_piece = np.bincount(piece_row, minlength=b) > 0

    def place(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # slot of each token in its row, row lengths
        per_row = np.bincount(rows, weights=counts, minlength=b).astype(np.int64)
        slot = np.cumsum(counts) - counts - np.repeat(np.cumsum(per_row) - per_row, np.bincount(rows, minlength=b))
        return slot, per_row + has_piece

    in_cnt, lab_cnt = (~flag | start).astype(np.int64), flag.astype(np.int64) + start
    in_slot, in_len = place(in_cnt)
    lab_slot, lab_len = place(lab_cnt)
    inputs = np.full((b, int(in_len.max(initial=0))), pad, dtype=np.int64)
    labels = np.full((b, int(lab_len.max(initial=0))), IGNORE_INDEX, dtype=np.int64)
    kept = in_cnt.astype(bool)
    inputs[rows[kept], in_slot[kept]] = np.where(start, sentinel, vals)[kept]
    labels[rows[start], lab_slot[start]] = sentinel[start]
    labels[rows[flag], (lab_slot + start)[flag]] = vals[flag]
    ends = np.flatnonzero(has_piece)
    inputs[ends, in_len[ends] - 1] = eos
    labels[ends, lab_len[ends] - 1] = eos
    return SpanBatch(inputs, labels, noise, in_len, lab_len)

