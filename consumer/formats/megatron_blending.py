"""Megatron-core's blending indices (``BlendedDataset``), re-implemented exactly in numpy.

A blend of parts ``0..P-1`` with weights ``w`` is two arrays of ``size`` entries:

* ``dataset_index`` (int16): the part sample *i* comes from;
* ``dataset_sample_index`` (int64): which sample of that part, i.e. how many times the part was picked before.

The rule is megatron-core's C++ ``helpers.build_blending_indices`` (megatron-core 0.16.1, ``helpers.cpp``),
stated here as the specification::

    current = [0] * P                                   # int64 counts
    for i in range(size):
        x = max(float(i), 1.0)                          # samples 0 and 1 both use x = 1.0
        d = 0; best = w[0] * x - float(current[0])      # IEEE doubles, one rounding per operation
        for j in range(1, P):
            error = w[j] * x - float(current[j])
            if error > best:                            # strictly greater: on a tie the lowest part wins
                d, best = j, error
        dataset_index[i] = d; dataset_sample_index[i] = current[d]; current[d] += 1

``BlendedDataset`` hands the C++ its weights normalised by ``megatron.core.datasets.utils.normalize``
(``w / numpy.sum(w)`` in float64); :func:`build_blending_indices` does the same by default
(``normalize=False`` passes the weights through unchanged). ``BlendedMegatronDatasetBuilder`` normalises the
configured weights once itself and the dataset normalises them again, with the size
``sum(blend_sizes(weights, num_samples))``; so the builder's arrays are::

    build_blending_indices(normalize_weights(weights), sum(blend_sizes(weights, num_samples)))

Zero weights are allowed here (the C++ handles them: a part of weight 0 can still win a tie at error 0);
``BlendedDataset`` itself asserts every weight is > 0.

How it is computed without a Python loop per sample
-----------------------------------------------------
The greedy depends only on the count vector ``current`` at step ``i``: two runs with the same counts at the same
step agree from then on. The samples are cut into ``K`` chunks of ``L`` steps, and all chunks run the loop
above *in lockstep*, one numpy operation per step over a ``(P, K)`` array (errors, column maximum, the first part
attaining it, count gather and scatter): ``L + V`` Python steps in all, ``O(P * size)`` vectorised work.

* Chunk 0 starts from zeros at sample 0: exact. Chunk ``j >= 1`` starts ``V`` warm-up steps before its first
  sample from a guess of the counts there (largest-remainder rounding of ``w * t``); the warm-up usually brings
  it onto the exact run, since the exact counts are the only ones the greedy keeps consistent.
* A scan from chunk 0 follows the exact run: chunk ``j``'s run is accepted only when it started from exactly the
  counts the accepted run of chunk ``j - 1`` ended with. Where no run of a chunk fits, a round runs it again
  from those counts (exact), and runs the next chunks (a window doubling while the miss persists) from their
  guesses shifted by the same count difference (a part of tiny weight still waiting for its turn where the
  guess has it drawn, or the reverse, persists for many chunks). The first miss moves right every round, so
  this ends; chunks whose accepted run is not their first are rewritten from their exact start at the end.

Every accepted chunk is a stretch of the exact run, so the arrays equal the C++ loop's, bit for bit: each error
is one ``numpy.multiply`` and one ``numpy.subtract`` of float64, as the C++ computes it (no fused multiply-add
in megatron-core's build), and a tie goes to the first part attaining the maximum. Only the speed depends on
the guesses: rounds are few unless a weight is tiny (a part drawn once per ~10^5 samples or rarer).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import InputError, short_repr
from ..util.validate import check_int

__all__ = ["blend_sizes", "build_blending_indices", "normalize_weights"]

MAX_PARTS = 32766  # BlendedDataset asserts len(datasets) < 32767 (the index is int16)
_INT64_MAX = int(np.iinfo(np.int64).max)
_WARMUP = 256  # steps a chunk runs from its estimated counts before its first sample
_MIN_CHUNK = 1024
_LANES = 163_840  # aim for P * K about this many doubles per lockstep operation (fits in L2/L3)


# ------------------------------------------------------------------------------------ validation


def _weights(weights: object, name: str = "weights") -> np.ndarray:
    """``weights`` as a 1-D float64 array of finite values >= 0, not all zero (InputError otherwise)."""
    if isinstance(weights, str | bytes) or not isinstance(weights, Sequence | np.ndarray):
        raise InputError(f"{name} must be a 1-D sequence of numbers, got {short_repr(weights)}")
    try:
        arr = np.asarray(weights)
    except (ValueError, TypeError, OverflowError):
        raise InputError(f"{name} must be a 1-D sequence of numbers, got {short_repr(weights)}") from None
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "biuf":
        raise InputError(f"{name} must be a non-empty 1-D sequence of numbers, got {short_repr(weights)}")
    w = arr.astype(np.float64)
    if arr.size > MAX_PARTS:
        raise InputError(f"{name}: at most {MAX_PARTS} parts (the dataset index is int16), got {arr.size}")
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        j = int(bad[0])
        raise InputError(f"{name}[{j}]: expected a finite number >= 0, got {short_repr(arr[j].item())}")
    if not w.any():
        raise InputError(f"{name}: expected at least one weight > 0, got {short_repr(arr.tolist())}")
    return w


def _count(value: object, name: str) -> int:
    n = check_int(name, value, 0)
    if n > _INT64_MAX:
        raise InputError(f"{name} must be an int >= 0, got {n}")
    return n


def _total(w: np.ndarray) -> np.floating:
    """The sum of checked weights ``w`` (InputError where it overflows float64)."""
    with np.errstate(over="ignore"):
        total = np.sum(w)
    if not np.isfinite(total):
        raise InputError(f"weights: their sum overflows float64, got {short_repr(w.tolist())}")
    return total


def normalize_weights(weights: Sequence[float] | np.ndarray) -> list[float]:
    """Megatron-core's ``datasets.utils.normalize``: ``(w / numpy.sum(w)).tolist()`` in float64, bit for bit."""
    w = _weights(weights)
    return (w / _total(w)).tolist()


def blend_sizes(weights: Sequence[float] | np.ndarray, num_samples: int, surplus: float = 0.0) -> list[int]:
    """Samples asked of each part: ``int(ceil(ceil(num_samples * w) * (1 + surplus)))``, ``w`` normalised.

    As ``BlendedMegatronDatasetBuilder._get_size_per_split_per_dataset`` (megatron-core 0.16.1) computes it, in
    Python floats. ``surplus=0`` (the default) gives the per-part targets whose sum is the ``BlendedDataset``'s
    size; the builder builds each part with ``surplus=config.mid_level_dataset_surplus``, which defaults to
    0.005 in 0.16.1.
    """
    w = normalize_weights(weights)
    n = _count(num_samples, "num_samples")
    if isinstance(surplus, bool) or not isinstance(surplus, int | float | np.floating | np.integer) or \
            not (math.isfinite(surplus) and surplus >= 0):
        raise InputError(f"surplus must be a finite number >= 0, got {short_repr(surplus)}")
    return [int(math.ceil(math.ceil(n * weight) * (1 + float(surplus)))) for weight in w]


# ------------------------------------------------------------------------------------ the lockstep kernel


def _run(w_col: np.ndarray, starts: np.ndarray, counts: np.ndarray, s0: int, nsteps: int, *,
         out: tuple[np.ndarray, np.ndarray] | None = None, rows: np.ndarray | None = None, limit: int = 1,
         snap: int = -1) -> np.ndarray | None:
    # long: the per-step kernel, every operation into a preallocated buffer
    """Run ``len(starts)`` chunks in lockstep for steps ``s0 .. s0 + nsteps - 1`` (chunk ``c`` is at sample
    ``starts[c] + s`` on step ``s``), updating ``counts`` (``(P, k)`` float64) in place. With ``out`` (two
    ``(K, steps)`` views), each step's pick and count go to rows ``rows`` (or all), at most ``limit`` steps at a
    time (the chunk length: a chunk's warm-up writes land where its predecessor writes ``limit`` steps later);
    without, it is a dry run. Returns the counts before step ``snap`` (a copy) when it is in range."""
    p, k = counts.shape
    flat_counts = counts.reshape(-1)
    rank_type = np.uint8 if p < 255 else np.uint16
    rank = (p - np.arange(p)).astype(rank_type)[:, None]  # the first part attaining the max ranks highest
    x = np.empty(k)
    err = np.empty((p, k))
    top = np.empty(k)
    hit = np.empty((p, k), dtype=bool)
    ranked = np.empty((p, k), dtype=rank_type)
    best = np.empty(k, dtype=rank_type)
    base = p * k + np.arange(k, dtype=np.intp)  # flat index of (part, chunk) = base - rank * k
    flat = np.empty(k, dtype=np.intp)
    got = np.empty(k)
    width, pp = np.intp(k), np.int16(p)
    depth = max(1, min(512, (1 << 19) // k, nsteps, limit))
    picks = np.empty((depth, k), dtype=np.int16)
    taken = np.empty((depth, k), dtype=np.int64)
    snapshot = None
    b, lo = 0, s0
    for s in range(s0, s0 + nsteps):
        if s == snap:
            snapshot = counts.copy()
        np.add(starts, s, out=x)
        if s == 0:
            np.maximum(x, 1.0, out=x)  # x = max(i, 1.0)
        np.multiply(w_col, x, out=err)
        np.subtract(err, counts, out=err)
        np.max(err, axis=0, out=top)
        np.equal(err, top, out=hit)
        np.multiply(hit, rank, out=ranked)
        np.max(ranked, axis=0, out=best)
        np.multiply(best, width, out=flat, casting="unsafe")
        np.subtract(base, flat, out=flat)
        np.take(flat_counts, flat, out=got)
        if out is not None:
            np.subtract(pp, best, out=picks[b], casting="unsafe")
            np.copyto(taken[b], got, casting="unsafe")
        got += 1.0
        flat_counts[flat] = got
        b += 1
        if out is not None and (b == depth or s == s0 + nsteps - 1):
            where = slice(None) if rows is None else rows
            out[0][where, lo:s + 1] = picks[:b].T
            out[1][where, lo:s + 1] = taken[:b].T
            b, lo = 0, s + 1
    if snap == s0 + nsteps:
        snapshot = counts.copy()
    return snapshot


def _estimate(w: np.ndarray, times: np.ndarray) -> np.ndarray:
    """A guess of the counts at each time (``(P, k)`` float64, each column summing to its time): the largest
    remainder rounding of ``v * t``, ``v`` the weights shifted to sum to 1 (water-filling: parts of weight below
    the level never fill when the weights sum to more than 1). Only the speed depends on this, not the result."""
    order = np.sort(w)[::-1]
    fill = (np.cumsum(order) - 1.0) / np.arange(1, w.size + 1)
    m = int(np.flatnonzero(order > fill)[-1]) if (order > fill).any() else 0
    v = np.maximum(w - fill[m], 0.0)
    v = v / v.sum() if v.sum() > 0 else np.full(w.size, 1.0 / w.size)
    q = v[:, None] * times[None, :]
    base = np.floor(q)
    short = times - base.sum(axis=0)  # parts still to hand out per column (0 <= short < P, up to rounding)
    rank = np.argsort(np.argsort(base - q, axis=0, kind="stable"), axis=0, kind="stable")
    base += rank < np.clip(short, 0, w.size)[None, :]
    base[int(np.argmax(v))] += times - base.sum(axis=0)  # any rounding residue: the sum must be exact
    return base


class _Plan:
    """The chunks of one blend and, for each, the runs tried: ``begin`` and ``end`` hold the first run's counts
    at the chunk's first sample and after its last (its picks are in the output); ``tried[j]`` maps the counts
    another (dry) run started chunk ``j`` from to its counts after the chunk."""

    def __init__(self, w: np.ndarray, size: int, chunk: int, warmup: int) -> None:
        self.w, self.chunk, self.warmup = w, chunk, warmup
        self.w_col = np.ascontiguousarray(w[:, None])
        self.k = k = -(-(size - warmup) // chunk)
        total = k * chunk + warmup
        self.idx, self.cnt = np.empty(total, dtype=np.int16), np.empty(total, dtype=np.int64)
        steps = chunk + warmup
        self.views = (np.lib.stride_tricks.as_strided(self.idx, (k, steps), (chunk * 2, 2)),
                      np.lib.stride_tricks.as_strided(self.cnt, (k, steps), (chunk * 8, 8)))
        self.starts = np.arange(k, dtype=np.float64) * chunk
        counts = np.ascontiguousarray(_estimate(w, self.starts))
        counts[:, 0] = 0.0  # chunk 0 starts at sample 0 with nothing drawn: exact
        first = _run(self.w_col, self.starts, counts, 0, steps, out=self.views, limit=chunk, snap=warmup)
        assert first is not None
        self.begin = [tuple(c) for c in first.T.tolist()]
        self.end = [tuple(c) for c in counts.T.tolist()]
        self.tried: dict[int, dict[tuple, tuple]] = {}
        self.reach: dict[int, int] = {}  # last chunk of a window of guesses -> the window's length

    def scan(self) -> tuple[list[tuple[int, tuple]], dict[int, tuple]]:
        """Follow the exact run from chunk 0: at each chunk, the run that starts from the counts the previous
        chosen run ended with. Returns the chunks no run fits (with the counts it must start from; only the
        first is sure, the later ones assume the first run of the chunk before each) and the chunks whose
        chosen run is not the first (with its start)."""
        misses: list[tuple[int, tuple]] = []
        chosen: dict[int, tuple] = {}
        now = self.end[0]
        for j in range(1, self.k):
            if self.begin[j] == now:
                now = self.end[j]
                continue
            other = self.tried.get(j, {}).get(now)
            if other is not None:
                chosen[j] = now
                now = other
            else:
                misses.append((j, now))
                now = self.end[j]
        return misses, chosen

    def dry(self, rows: list[int], counts: np.ndarray, early: int) -> list[tuple[tuple, tuple]]:
        """Run chunks ``rows`` from ``counts`` taken ``early`` steps before their first sample, outputs unwritten;
        the (start, end) counts of each."""
        c = np.array(counts, dtype=np.float64, order="C")
        starts = self.starts[rows]
        first = _run(self.w_col, starts, c, self.warmup - early, self.chunk + early, snap=self.warmup)
        assert first is not None
        return list(zip([tuple(v) for v in first.T.tolist()], [tuple(v) for v in c.T.tolist()], strict=True))

    def repair(self, misses: list[tuple[int, tuple]]) -> None:
        """One round: each missed chunk is run from the counts it must start from and, when these differ from its
        first run's, the next chunks (a window that doubles each time the last one falls short) are run from their
        estimate shifted by the same difference, with the warm-up: a wrong start usually persists over several
        chunks (a part of tiny weight counted as drawn when it is still waiting, or the reverse)."""
        rows = [j for j, _ in misses]
        tried = self.dry(rows, np.array([c for _, c in misses]).T, 0)
        guess_rows: list[int] = []
        shifts = []
        for (j, now), pair in zip(misses, tried, strict=True):
            self.tried.setdefault(j, {})[pair[0]] = pair[1]
            reach = 2 * self.reach.get(j - 1, 1)
            last = min(j + reach, self.k - 1)
            self.reach[last] = reach
            delta = np.subtract(self.begin[j], now)
            for m in range(j + 1, last + 1):
                guess_rows.append(m)
                shifts.append(delta)
        if guess_rows:
            times = self.starts[guess_rows]  # the warm-up starts at step 0
            counts = _estimate(self.w, times) - np.array(shifts).T  # columns still sum to times: shifts to 0
            for m, pair in zip(guess_rows, self.dry(guess_rows, counts, self.warmup), strict=True):
                self.tried.setdefault(m, {})[pair[0]] = pair[1]

    def finish(self, chosen: dict[int, tuple]) -> None:
        """Write the chunks whose exact run is not their first run, from their (exact) start counts."""
        if chosen:
            rows = np.array(sorted(chosen), dtype=np.intp)
            counts = np.array([chosen[j] for j in rows.tolist()], dtype=np.float64).T.copy()
            _run(self.w_col, self.starts[rows], counts, self.warmup, self.chunk, out=self.views, rows=rows,
                 limit=self.chunk)


def _lockstep_blend(w: np.ndarray, size: int, chunk: int, warmup: int) -> tuple[np.ndarray, np.ndarray]:
    """The arrays for ``size`` samples: chunks of ``chunk`` samples after ``warmup`` steps each (module docstring)."""
    if size <= chunk + warmup:
        idx, cnt = np.empty(size, dtype=np.int16), np.empty(size, dtype=np.int64)
        if size:
            _run(np.ascontiguousarray(w[:, None]), np.zeros(1), np.zeros((w.size, 1)), 0, size,
                 out=(idx[None, :], cnt[None, :]), limit=size)
        return idx, cnt
    plan = _Plan(w, size, chunk, warmup)
    while True:
        misses, chosen = plan.scan()
        if not misses:
            break
        plan.repair(misses)
    plan.finish(chosen)
    return plan.idx[:size], plan.cnt[:size]


def build_blending_indices(weights: Sequence[float] | np.ndarray, size: int, *,
                           normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(dataset_index int16[size], dataset_sample_index int64[size])``, equal to megatron-core's
    ``helpers.build_blending_indices`` (module docstring), weights normalised as ``BlendedDataset`` does unless
    ``normalize=False``. Raises InputError on weights that are not a 1-D sequence of finite numbers >= 0 with
    one > 0 (or whose sum overflows), on more than 32766 parts, and on a size that is not an int >= 0."""
    w = _weights(weights)
    n = _count(size, "size")
    if not isinstance(normalize, bool | np.bool_):
        raise InputError(f"normalize must be a bool, got {short_repr(normalize)}")
    total = _total(w)
    if normalize:
        w = w / total  # normalize_weights(weights), as an array
    try:
        if w.size == 1:
            return np.zeros(n, dtype=np.int16), np.arange(n, dtype=np.int64)
        chunk = max(_MIN_CHUNK, -(-n // max(1, _LANES // w.size)))
        return _lockstep_blend(w, n, chunk, _WARMUP)
    except MemoryError:
        raise InputError(f"size={n}: the two arrays need {n * 10 / 2**30:.1f} GiB, more than this machine can "
                         "allocate") from None
