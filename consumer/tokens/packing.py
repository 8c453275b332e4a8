"""The ``packed`` style: whole documents placed into rows by best-fit decreasing (BFD), rows never crossing classes.

Contract (what :func:`packed_arrays` returns, the arrays of a :class:`~consumer.tokens.index.SampleIndex`):

- **Items.** A document of at most ``seqlen`` tokens is one item. A longer one is cut into ``seqlen``-token pieces
  (piece ``k`` starts at ``k * seqlen``): with ``long_files="windows"`` (the default) every piece is an item, so its
  full pieces each fill a row alone and only its last, shorter piece is packed with others; with ``"truncate"`` only
  its first piece (one full row) is kept and the rest is dropped. ``"crop"`` (a diff row's window moved per epoch)
  has no meaning here and is refused. Only documents longer than ``seqlen`` are ever cut.
- **Rows per class.** A row holds items of one class only, so ``{class: n}`` selections, ``class_ptr`` ranges and
  the ``class`` column stay exact.
- **Best-fit decreasing**, within a class: items by length descending, ties by (document, start) ascending; each
  item goes into the open row with the least room left (``seqlen`` minus its tokens) that still fits it; among rows
  of equal room, into the one whose last item was placed first (the row that reached that room first); a new row
  opens when none fits. The plan is a pure function of the lengths, classes and ``seqlen`` (no seed: the sampler
  shuffles rows per epoch with the dataset's seed).
- **Ties.** Items of equal length and class are interchangeable (any permutation of them over their rows is the
  same BFD, row for row the same lengths): the plan gives them out canonically, in (document, start) order to that
  group's rows in ascending row order (a row taking several of them takes consecutive ones). Full items
  (``seqlen`` tokens, a row each) are then ordered, per class, with the documents that have no shorter last piece
  first (item order), then the others by the row of that last piece (:func:`plan_rows` applies the first rule,
  :func:`packed_arrays` this one): both make the store order below a fixed point.
- **Order.** Classes in order, the rows of a class in the order they were opened; inside a row its items in
  (start == 0, document, start) order, i.e. the last piece of a long document (start > 0) first, then whole
  documents by document, from column 0 without gaps (``tiled``), the rest of the row PAD.
- **Store order** (:func:`store_order`, what ``pack`` of a packed dataset writes): documents by the row of their
  last piece, then its place in that row. Planned again over the documents renumbered so (same ``seqlen`` and
  ``long_files``), the index is the same, row for row and id for id (the rows of one length and class are given
  out in store order, which is their rows' order), and every row holding at most one last piece of a long
  document is one contiguous range of the store: that piece ends its document and the row's whole documents
  follow it, in row order. A row with the last pieces of two long documents is not (the second one's full pieces
  lie between).

Algorithm (no Python per document; planning cost about ``n log n`` for ``n`` items plus a constant per distinct
length): the items are taken one distinct length ``l`` at a time, descending, all classes together. Taken in
best-fit order (room ascending, then age), the open rows of a class that fit ``l`` each absorb ``room // l`` items in
turn — once a row absorbed one, its room ``r - l``, when still ``>= l``, is the least room that fits — so a length is
one prefix of that order (``cumsum``/``repeat``), a partly used last row keeps its place, and what is left opens new
rows of ``seqlen // l`` items each. Rows whose room fell below ``l`` wait in runs ordered by room (descending) and
age; they rejoin the candidates (a new layer on top: their rooms are below every candidate's) when ``l`` drops to
their room. Runs and layers merge when of similar size, so each row is sorted ``O(log n)`` times. This is sequential
BFD exactly (``tests/tokens/test_packed_style.py`` checks it against a plain sequential implementation).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .pieces import class_ptr_of, first_pieces, index_dtype, pieces

__all__ = ["PACKED_LONG_FILES", "packed_arrays", "packed_items", "plan_rows", "store_order"]

PACKED_LONG_FILES = ("windows", "truncate")  # the default first: no token lost
_I8 = np.int64
_Arrays7 = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def packed_items(doc_len: np.ndarray, seqlen: int, long_files: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(doc, start, length)`` of every item, in (document, start) order (see the module docstring): each document
    its own stream of ``seqlen`` windows (:func:`~consumer.tokens.pieces.pieces`), or its first piece only
    (``"truncate"``). ``long_files`` is one of :data:`PACKED_LONG_FILES` (``build_index`` checks it)."""
    if long_files == "truncate":
        return first_pieces(doc_len, seqlen)
    doc, start, length, _, _ = pieces(doc_len, np.arange(doc_len.size, dtype=_I8), seqlen)
    return doc, start, length


class _Layer:
    """Open rows that fit the current length, ordered by (class, room, age); ``head .. hi`` the live rows of class
    ``ucls[i]`` (consumption takes each class's smallest rooms first, so what is gone is a prefix)."""

    __slots__ = ("row", "room", "ucls", "head", "hi", "live")

    def __init__(self, row: np.ndarray, room: np.ndarray, cls: np.ndarray):
        self.row, self.room, self.live = row, room, int(row.size)
        cut = np.flatnonzero(cls[1:] != cls[:-1]) + 1
        self.head = np.concatenate(([0], cut)).astype(_I8)
        self.hi = np.concatenate((cut, [row.size])).astype(_I8)
        self.ucls = cls[self.head]

    def compact(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(row, room, class)`` of the live rows, in order."""
        n = self.hi - self.head
        pos = np.repeat(self.head - (np.cumsum(n) - n), n) + np.arange(int(n.sum()), dtype=_I8)
        return self.row[pos], self.room[pos], np.repeat(self.ucls, n)


class _Run:
    """Waiting rows (room below the current length), by room descending then age; ``head`` rows already rejoined."""

    __slots__ = ("row", "neg", "head")

    def __init__(self, row: np.ndarray, room: np.ndarray):
        order = np.argsort(-room, kind="stable")
        self.row, self.neg, self.head = row[order], -room[order], 0

    @property
    def live(self) -> int:
        """Rows of the run not taken yet."""
        return int(self.row.size - self.head)


class _Planner:
    """The state of one BFD plan: open rows in layers (they fit the current length) and runs (they wait)."""

    def __init__(self, seqlen: int, n_items: int, smallest: int):
        self.seqlen, self.smallest = seqlen, smallest  # rows with less room than the smallest item are full
        self.row_class = np.empty(n_items, dtype=_I8)  # rows <= items
        self.n_rows = 0
        self.layers: list[_Layer] = []
        self.runs: list[_Run] = []

    def step(self, length: int, ks: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Place ``counts[i]`` items of ``length`` tokens of class ``ks[i]`` (``ks`` ascending); the row of each item,
        in (class, document, start) order."""
        self._rejoin(length)
        need = counts.astype(_I8)
        taken: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (class, row, items) in best-fit order
        done: list[tuple[np.ndarray, np.ndarray]] = []  # (row, room) of rows that no longer fit this length
        for layer in reversed(self.layers):
            if not need.any():
                break
            self._take(layer, length, ks, need, taken, done)
        self.layers = [layer for layer in self.layers if layer.live]
        if need.any():
            self._open(length, ks, need, taken, done)
        if done:
            self._wait(np.concatenate([d[0] for d in done]), np.concatenate([d[1] for d in done]))
        cls, row, n = (np.concatenate(x) for x in zip(*taken))
        order = np.argsort(cls, kind="stable")  # per class: best-fit order (newest layer first, new rows last)
        return np.repeat(row[order], n[order])

    def _take(self, layer: _Layer, length: int, ks: np.ndarray, need: np.ndarray, taken: list, done: list) -> None:
        """Fill ``layer``'s rows of the classes still in ``need`` (updated), smallest rooms first."""
        at = np.minimum(np.searchsorted(layer.ucls, ks), layer.ucls.size - 1)
        ok = (layer.ucls[at] == ks) & (need > 0) & (layer.hi[at] > layer.head[at])
        k = np.flatnonzero(ok)
        if not k.size:
            return
        li, want = at[k], need[k]
        w = np.minimum(layer.hi[li] - layer.head[li], want)  # every row takes >= 1 item: no more rows than items
        first = np.cumsum(w) - w
        pos = np.repeat(layer.head[li] - first, w) + np.arange(int(w.sum()), dtype=_I8)
        room = layer.room[pos]
        cap = room // length
        before = np.cumsum(cap) - cap
        before -= np.repeat(before[first], w)  # items the class's earlier rows of this window take
        got = np.clip(np.repeat(want, w) - before, 0, cap)
        full = got == cap  # rows left with less room than length (a partly used row keeps its place)
        layer.head[li] += np.add.reduceat(full, first)
        layer.live -= int(full.sum())
        part = (got > 0) & ~full
        layer.room[pos[part]] -= got[part] * length
        need[k] -= np.add.reduceat(got, first)
        used = got > 0
        taken.append((np.repeat(ks[k], w)[used], layer.row[pos[used]], got[used]))
        done.append((layer.row[pos[full]], room[full] - cap[full] * length))

    def _open(self, length: int, ks: np.ndarray, need: np.ndarray, taken: list, done: list) -> None:
        """New rows for what no open row fits: ``seqlen // length`` items each, the last of a class maybe fewer."""
        k = np.flatnonzero(need > 0)
        rest, per = need[k], self.seqlen // length
        n = -(-rest // per)
        total = int(n.sum())
        row = np.arange(self.n_rows, self.n_rows + total, dtype=_I8)
        self.n_rows += total
        cls = np.repeat(ks[k], n)
        self.row_class[row] = cls
        got = np.full(total, per, dtype=_I8)
        got[np.cumsum(n) - 1] = rest - (n - 1) * per
        room = self.seqlen - got * length
        fits = room >= length  # a class's last new row, partly used: the only open row of its class that fits
        taken.append((cls, row, got))
        done.append((row[~fits], room[~fits]))
        if fits.any():
            self._push_layer(_Layer(row[fits], room[fits], cls[fits]))
        need[k] = 0

    def _wait(self, row: np.ndarray, room: np.ndarray) -> None:
        keep = room >= self.smallest  # less room than any item: full for good
        if keep.any():
            self.runs.append(_Run(row[keep], room[keep]))
            while len(self.runs) > 1 and self.runs[-2].live <= 2 * self.runs[-1].live:
                newer, older = self.runs.pop(), self.runs.pop()
                self.runs.append(_Run(np.concatenate((older.row[older.head:], newer.row[newer.head:])),
                                      -np.concatenate((older.neg[older.head:], newer.neg[newer.head:]))))

    def _rejoin(self, length: int) -> None:
        """Waiting rows that fit ``length`` become a new layer (their rooms are below every open row's)."""
        rows, rooms = [], []
        for run in self.runs:  # oldest first: equal rooms stay in age order
            h = int(np.searchsorted(run.neg, -length, side="right"))
            if h > run.head:
                rows.append(run.row[run.head:h])
                rooms.append(-run.neg[run.head:h])
                run.head = h
        self.runs = [run for run in self.runs if run.live]
        if rows:
            row, room = np.concatenate(rows), np.concatenate(rooms)
            cls = self.row_class[row]
            order = np.argsort(cls * (self.seqlen + 1) + room, kind="stable")
            self._push_layer(_Layer(row[order], room[order], cls[order]))

    def _push_layer(self, layer: _Layer) -> None:
        self.layers.append(layer)
        while len(self.layers) > 1 and self.layers[-2].live <= 2 * self.layers[-1].live:
            newer, older = self.layers.pop().compact(), self.layers.pop().compact()
            row, room, cls = (np.concatenate(pair) for pair in zip(newer, older))  # a class's newer rooms are smaller
            order = np.argsort(cls, kind="stable")
            self.layers.append(_Layer(row[order], room[order], cls[order]))


def _stable_order(key: np.ndarray, bound: int) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for ``0 <= key < bound``, as 16-bit radix passes (numpy sorts 16-bit keys by
    radix, wider ones by timsort: several times slower at 10^7 items)."""
    order = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
    for shift in range(16, max(int(bound) - 1, 1).bit_length(), 16):
        digit = ((key[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
    return order


def plan_rows(length: np.ndarray, item_class: np.ndarray, seqlen: int) -> tuple[np.ndarray, np.ndarray]:
    """Best-fit decreasing per class: the row of every item (``length[i] <= seqlen`` tokens of class
    ``item_class[i]``, items in (document, start) order, classes non-decreasing) and the class of every row, rows
    numbered by class, then in the order they were opened; items of equal length and class in item order over
    their rows in ascending order (the tie rule of the module docstring)."""
    n_items = length.size
    if not n_items:
        return np.zeros(0, dtype=_I8), np.zeros(0, dtype=_I8)
    order = _stable_order(seqlen - np.asarray(length, dtype=_I8), seqlen)  # by length descending, then item order
    sorted_len = length[order]
    bounds = np.concatenate(([0], np.flatnonzero(sorted_len[1:] != sorted_len[:-1]) + 1, [n_items]))
    plan = _Planner(seqlen, n_items, int(sorted_len[-1]))
    placed = np.empty(n_items, dtype=_I8)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        cls = np.asarray(item_class[order[a:b]], dtype=_I8)  # ascending: items of one length keep item order
        cut = np.flatnonzero(cls[1:] != cls[:-1]) + 1
        ks = cls[np.concatenate(([0], cut))]
        counts = np.diff(np.concatenate(([0], cut, [b - a])))
        placed[a:b] = plan.step(int(sorted_len[a]), ks, counts)
    row_class = plan.row_class[:plan.n_rows]
    by_class = np.argsort(row_class, kind="stable")  # ids were given in opening order
    rank = np.empty(plan.n_rows, dtype=_I8)
    rank[by_class] = np.arange(plan.n_rows, dtype=_I8)
    placed = rank[placed]
    del rank
    _canonical_ties(placed, sorted_len, np.asarray(item_class[order], dtype=_I8), plan.n_rows)
    del sorted_len
    item_row = np.empty(n_items, dtype=_I8)
    item_row[order] = placed
    return item_row, row_class[by_class]


def _canonical_ties(placed: np.ndarray, sorted_len: np.ndarray, sorted_class: np.ndarray, n_rows: int) -> None:
    """The tie rule, in place: ``placed`` (the rows of the items in (length descending, item) order, hence each
    (length, class) group contiguous and in item order) sorted ascending within every group."""
    n = placed.size
    cut = np.flatnonzero((sorted_len[1:] != sorted_len[:-1]) | (sorted_class[1:] != sorted_class[:-1])) + 1
    down = placed[1:] < placed[:-1]
    down[cut - 1] = False  # a group's first item follows another group's last
    descent = np.flatnonzero(down) + 1  # where a group is not ascending yet
    del down
    if not descent.size:
        return
    bad = np.unique(np.searchsorted(cut, descent, side="right"))  # the groups out of order: only they are sorted
    bounds = np.concatenate(([0], cut, [n]))
    lo, hi = bounds[bad], bounds[bad + 1]
    size = hi - lo
    pos = np.repeat(lo - (np.cumsum(size) - size), size) + np.arange(int(size.sum()), dtype=_I8)
    key = np.repeat(np.arange(bad.size, dtype=_I8) * n_rows, size)
    key += placed[pos]
    key.sort()
    key -= np.repeat(np.arange(bad.size, dtype=_I8) * n_rows, size)
    placed[pos] = key


def packed_arrays(doc_len: np.ndarray, doc_class: np.ndarray, n_classes: int, seqlen: int, *,
                  long_files: str = "windows") -> _Arrays7:
    """The arrays of the packed style's sample index, in the order of ``INDEX_ARRAYS`` (``seg_ptr``, ``seg_doc``,
    ``seg_start``, ``seg_len``, ``seg_col``, ``sample_class``, ``class_ptr``); see the module docstring."""
    doc, start, length = packed_items(doc_len, seqlen, long_files)
    item_row, row_class = plan_rows(length, doc_class[doc], seqlen)
    _full_rows_by_tails(item_row, row_class, doc, start, length, seqlen)
    key = item_row * 2
    key += start == 0
    order = _stable_order(key, 2 * row_class.size)  # by row, a last piece (start > 0) first, then item order
    del key
    counts = np.bincount(item_row, minlength=row_class.size)
    del item_row
    seg_ptr = np.zeros(row_class.size + 1, dtype=_I8)
    np.cumsum(counts, out=seg_ptr[1:])
    seg_len = length[order]
    del length
    col = np.cumsum(seg_len, dtype=_I8)
    col -= seg_len
    col -= np.repeat(col[seg_ptr[:-1]], counts)
    sample_class = row_class.astype(index_dtype(n_classes))
    return (seg_ptr, doc[order], start[order], seg_len, col.astype(index_dtype(seqlen)), sample_class,
            class_ptr_of(sample_class, n_classes))


def _full_rows_by_tails(item_row: np.ndarray, row_class: np.ndarray, doc: np.ndarray, start: np.ndarray,
                        length: np.ndarray, seqlen: int) -> None:
    """The tie rule of full items (``seqlen`` tokens, each a row alone), in place: per class, the full pieces of
    documents without a shorter last piece first, in item order, then those of documents with one, by the row of
    that last piece (then item order), over the class's full rows in ascending order."""
    full = np.flatnonzero(length == seqlen)
    tails = np.flatnonzero((start > 0) & (length < seqlen))  # one per document at most, in document order
    if full.size < 2 or not tails.size:
        return  # the plan's tie rule: item order
    tail_doc = doc[tails]
    at = np.minimum(np.searchsorted(tail_doc, doc[full]), tails.size - 1)
    by = np.where(tail_doc[at] == doc[full], item_row[tails[at]], -1)
    rows = item_row[full]
    item_row[full[np.lexsort((full, by, row_class[rows]))]] = np.sort(rows)  # a class's rows: ids of one range


def store_order(seg_doc: np.ndarray, seg_start: np.ndarray, n_docs: int, seqlen: int) -> np.ndarray:
    """The store order of a packed index (its ``seg_doc`` / ``seg_start``, ``n_docs`` documents of ``seqlen``-token
    pieces; see the module docstring): the documents by the row of their last piece, then its place in that row
    (a permutation of ``range(n_docs)``; classes stay grouped, rows never cross them)."""
    pieces = np.bincount(seg_doc, minlength=n_docs)
    if pieces.size != n_docs or not (pieces > 0).all():
        raise InputError(f"store_order needs every one of {n_docs} documents in the index at least once")
    last = np.asarray(seg_start, dtype=_I8) == (pieces[seg_doc].astype(_I8) - 1) * seqlen
    return np.asarray(seg_doc[last], dtype=_I8)  # segments are in (row, place) order: the documents at their last
