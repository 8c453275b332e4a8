"""How deeply JSON records nest arrays and objects, held to :data:`~.options.MAX_JSON_DEPTH`: :func:`too_deep`,
:func:`records_too_deep`, and :func:`fresh_stack` for msgspec's recursion.

msgspec's decoder (the scanner's second and third tiers, and every read of a plain container's texts) recurses once
a level of nesting, skipped fields included, within Python's recursion limit less the stack of its caller (a
``RecursionError`` past it); Arrow's reader (the scanner's first tier) takes any depth. A record nested 1000 deep
was indexed by Arrow, then every read of it raised ``RecursionError``. The scanner refuses a record nested deeper
than the limit as a bad record (:mod:`.jsonl`), so every record indexed decodes when read. The depth counts the
record's own object as level 1 (``{"text": "x"}`` is 1, ``{"text": "x", "y": [[]]}`` is 3), as
:func:`consumer.util.fileio.load_json_bounded` does.

The check costs nothing where nothing can be deep, and little elsewhere:

- a parsed block's records are checked (:func:`records_too_deep`) only where a line has more than ``limit`` bytes
  beside its text's JSON (the text takes at least its UTF-8 bytes and two quotes, and holds no bracket that
  counts): in most corpora no line;
- a record nested ``d`` deep holds ``d`` opening brackets (``[`` or ``{``): the opening brackets of the lines looked
  at are counted per 1 KiB window (a numpy mask a MiB at a time, summed eight bytes a word), and a line whose
  windows hold at most ``limit`` of them nests at most that deep;
- the lines left (more than ``limit`` brackets: long source code in a text, say) are measured exactly, a MiB of
  lines at a time (:func:`_depths`; a longer line alone, a MiB at a time: :func:`depth`): the running count of
  opening less closing brackets outside strings (bounded by quotes that are not escaped), at its highest.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .json_strings import escape_starts

__all__ = ["depth", "too_deep", "records_too_deep", "fresh_stack"]

_WINDOW = 1024  # bytes a window: 128 words of 8 bytes, so each byte lane of their sum stays under 256
_SLICE = 1 << 20  # bytes masked at a time (the scratch arrays stay in the cache)


def _window_counts(block: np.ndarray) -> np.ndarray:
    """The number of ``[`` and ``{`` bytes in each ``_WINDOW``-byte window of ``block`` (the last one short)."""
    n = block.size
    counts = np.empty(-(-n // _WINDOW), dtype=np.int64)
    cap = -(-min(n, _SLICE) // _WINDOW) * _WINDOW
    low = np.empty(cap, dtype=np.uint8)
    mask = np.empty(cap, dtype=np.bool_)
    for lo in range(0, n, _SLICE):
        k = min(_SLICE, n - lo)
        padded = -(-k // _WINDOW) * _WINDOW
        np.bitwise_or(block[lo:lo + k], 0x20, out=low[:k])  # [ (0x5B) and { (0x7B) both become 0x7B, nothing else
        np.equal(low[:k], 0x7B, out=mask[:k])
        mask[k:padded] = False
        lanes = mask[:padded].view(np.uint64).reshape(-1, _WINDOW // 8).sum(axis=1, dtype=np.uint64)  # 8 lanes <= 128
        lanes = (lanes & 0x00FF00FF00FF00FF) + ((lanes >> 8) & 0x00FF00FF00FF00FF)  # 4 lanes of 16 bits
        counts[lo // _WINDOW:(lo + padded) // _WINDOW] = (lanes * 0x0001000100010001) >> 48  # their sum
    return counts


def depth(line: np.ndarray) -> int:
    """How deep the JSON of ``line`` (uint8) nests arrays and objects: the highest count of brackets open outside
    strings (an object holding a string is 1). For a line that is not JSON, how deep a parser would get. Read a
    MiB at a time (memory stays a few MiB for a line of 256 MiB of brackets), carrying the count, whether a string
    is open and whether the slice's first byte is escaped."""
    best = level = 0
    inside = escaped = False
    for lo in range(0, line.size, _SLICE):
        part = line[lo:lo + _SLICE]
        skip = int(escaped)  # the byte after a backslash that starts an escape at the end of the last slice
        esc = escape_starts(part[skip:]) + skip
        escaped = bool(esc.size) and int(esc[-1]) == part.size - 1
        low = part | 0x20
        opens = np.flatnonzero(low == 0x7B)  # [ (0x5B) and { (0x7B)
        closes = np.flatnonzero(low == 0x7D)  # ] (0x5D) and } (0x7D)
        quotes = np.flatnonzero(part[skip:] == 0x22) + skip
        if quotes.size and esc.size:  # a quote right after an escape's backslash is text
            at = np.minimum(np.searchsorted(esc, quotes - 1), esc.size - 1)
            quotes = quotes[esc[at] != quotes - 1]
        if opens.size or closes.size:
            pos = np.concatenate([opens, closes])
            step = np.concatenate([np.ones(opens.size, np.int64), np.full(closes.size, -1, np.int64)])
            outside = (np.searchsorted(quotes, pos) & 1) == int(inside)  # an even number of quotes before it
            run = np.cumsum(step[outside][np.argsort(pos[outside], kind="stable")])
            if run.size:
                best = max(best, level + int(run.max()))
                level += int(run[-1])
        inside ^= bool(quotes.size & 1)
    return best


def _real_quotes(region: np.ndarray) -> np.ndarray:
    """Positions of the quotes of ``region`` that are not escaped (not after an odd run of backslashes). The runs
    before the quotes are measured a step back at a time (a JSON text's runs are short: ``\\"``, ``\\\\"``); past
    32 steps, by :func:`~.json_strings.escape_starts` over the whole region."""
    quotes = np.flatnonzero(region == 0x22)
    after = np.flatnonzero(region[np.maximum(quotes - 1, 0)] == 0x5C)  # after a backslash (quotes[0] - 1 may be -1)
    after = after[quotes[after] > 0]
    if not after.size:
        return quotes
    odd = np.ones(after.size, dtype=bool)  # the run of backslashes before each is odd: the quote is escaped
    pending = np.arange(after.size)
    for back in range(2, 34):
        at = quotes[after[pending]] - back
        more = at >= 0
        more[more] = region[at[more]] == 0x5C
        pending = pending[more]
        if not pending.size:
            keep = np.ones(quotes.size, dtype=bool)
            keep[after[odd]] = False
            return quotes[keep]
        odd[pending] ^= True
    esc = escape_starts(region)
    at = np.minimum(np.searchsorted(esc, quotes - 1), esc.size - 1)
    real: np.ndarray = quotes[esc[at] != quotes - 1]
    return real


def _depths(region: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The depth (:func:`depth`) of each line ``region[starts[k]:ends[k]]`` (the byte before each but the first is
    not a backslash: a newline, or the comma msgspec's tier wrote over it), all at once: the line's quotes that are
    not escaped bound its strings, the bytes between strings (few in a record: keys, punctuation, numbers) are
    gathered, and the running count of their brackets (one cumulative sum, less its value where each line starts)
    is taken at its highest."""
    out = np.zeros(starts.size, dtype=np.int64)
    quotes = _real_quotes(region)
    line = np.searchsorted(starts, quotes, side="right") - 1
    inside = (line >= 0) & (quotes < ends[np.maximum(line, 0)])  # not in the bytes between lines
    quotes, line = quotes[inside], line[inside]
    nth = np.arange(quotes.size) - np.searchsorted(quotes, starts)[line]  # the quote's number in its line
    counts = np.bincount(line, minlength=starts.size)
    # each line's bounds: its start, its quotes (a closing one + 1), its end unless a string is left open; in pairs
    # these are the spans between strings (the lines' bounds lie in their own lines: sorting keeps them in order)
    bounds = np.sort(np.concatenate([starts, quotes + (nth & 1), ends[(counts & 1) == 0]])).reshape(-1, 2)
    lo, n = bounds[:, 0], bounds[:, 1] - bounds[:, 0]
    total = int(n.sum())
    if not total:
        return out
    at = np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(n) - n), n)  # the bytes between strings
    low = region[at] | 0x20
    bracket = (low == 0x7B) | (low == 0x7D)  # [ { ] }
    events = at[bracket]
    if not events.size:
        return out
    line = np.searchsorted(starts, events, side="right") - 1
    level = np.cumsum(np.where(low[bracket] == 0x7B, 1, -1))
    first = np.searchsorted(line, np.arange(starts.size))  # each line's first event (its end: the next line's)
    level -= np.where(first > 0, level[np.maximum(first - 1, 0)], 0)[line]
    some = np.flatnonzero(first < np.append(first[1:], events.size))  # lines with an event
    out[some] = np.maximum.reduceat(level, first[some])
    return out


def too_deep(block: np.ndarray, starts: np.ndarray, ends: np.ndarray, limit: int) -> dict[int, int]:
    """The lines ``block[starts[k]:ends[k]]`` nested deeper than ``limit``: ``{k: depth}`` (see the module
    docstring). The byte before each line is not a backslash (a newline, or the comma msgspec's tier wrote over
    it)."""
    long = np.flatnonzero(ends - starts > limit)
    if not long.size:
        return {}
    lo, hi = int(starts[long[0]]), int(ends[long[-1]])
    counts = np.zeros(-(-(hi - lo) // _WINDOW) + 1, dtype=np.int64)
    np.cumsum(_window_counts(block[lo:hi]), out=counts[1:])
    first = (starts[long] - lo) // _WINDOW
    last = (ends[long] - 1 - lo) // _WINDOW
    maybe = long[counts[last + 1] - counts[first] > limit].tolist()
    out: dict[int, int] = {}
    k = 0
    while k < len(maybe):  # runs of lines measured together, up to _SLICE bytes; a longer line alone, by slices
        a, j = maybe[k], k + 1
        while j < len(maybe) and int(ends[maybe[j]]) - int(starts[a]) <= _SLICE:
            j += 1
        b = maybe[j - 1]
        if int(ends[b]) - int(starts[a]) > _SLICE:
            got = np.array([depth(block[int(starts[a]):int(ends[a])])])
        else:
            got = _depths(block[int(starts[a]):int(ends[b])], starts[a:b + 1] - starts[a],
                          ends[a:b + 1] - starts[a])
        for m in maybe[k:j]:
            if got[m - a] > limit:
                out[m] = int(got[m - a])
        k = j
    return out


def records_too_deep(block: np.ndarray, starts: np.ndarray, ends: np.ndarray, texts: np.ndarray, limit: int) -> bool:
    """Whether a record ``block[starts[k]:ends[k]]``, parsed, its text field ``texts[k]`` bytes of UTF-8, nests
    deeper than ``limit``. Its brackets lie outside its strings, so outside its text's JSON, which takes at least the
    text's bytes and two quotes: only a line with more than ``limit`` other bytes is looked at (:func:`too_deep`),
    which in most corpora is none (an id, a language, a few short fields beside the text)."""
    other = np.flatnonzero((ends - starts) - texts - 2 > limit)
    return bool(other.size) and bool(too_deep(block, starts[other], ends[other], limit))


def fresh_stack(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; where it runs out of Python's recursion limit (msgspec on a record nested near the limit, called
    from a deep stack) called again on a new thread, whose stack is empty. A ``RecursionError`` there is raised."""
    try:
        return fn(*args)
    except RecursionError:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="consumer-json-depth") as pool:
            return pool.submit(fn, *args).result()


def why_too_deep(depth: int | None) -> str:
    """What is wrong with a record nested ``depth`` levels deep (None: msgspec ran out of Python's recursion limit
    on it even on a fresh thread), in the user's terms."""
    from . import options as limits  # noqa: PLC0415  (read at call time: tests lower the limit)

    limit = limits.MAX_JSON_DEPTH
    if depth is None:
        return (f"the record nests arrays and objects too deep for msgspec's decoder under Python's recursion limit "
                f"of {sys.getrecursionlimit()} (records may nest {limit} levels, MAX_JSON_DEPTH)")
    return (f"the record nests arrays and objects {depth} levels deep (its own object is level 1), deeper than the "
            f"limit of {limit} (MAX_JSON_DEPTH)")
