"""SQL functions over the content columns, registered on a sqlite3 connection.

Every function is deterministic and read-only (registered with ``deterministic=True``, so SQLite may
use them in indexes and constant folding), takes the ``histogram`` blob of the ``files`` view (layout
in :mod:`consumer.catalog.content`) and returns NULL when a histogram argument is NULL (content not computed).

=============================  =======================================================================
``hist_entropy(h)``            Shannon entropy in bits per byte (0..8), the same value as ``entropy``
``hist_total(h)``              number of bytes counted (the file size)
``hist_count(h, lo, hi)``      number of bytes with a value in ``lo..hi`` (inclusive, 0..255)
``hist_fraction(h, lo, hi)``   the same as a fraction of all bytes (0.0 for an empty file)
``hist_mode(h)``               the most frequent byte value (the smallest on ties); NULL when empty
``hist_distance(a, b)``        Jensen-Shannon distance of the normalised histograms: the square root
                               of the JS divergence with base-2 logarithms, a metric in 0..1 (0: same
                               byte distribution, 1: no byte value in common). Two empty histograms
                               are at distance 0, an empty and a non-empty one at distance 1.
``hist_l1(a, b)``              L1 distance of the normalised histograms, 0..2 (same rules when empty)
``hist_json(h)``               the 256 counts as a JSON array (for ``json_each`` and friends)
=============================  =======================================================================

A bad argument (not a histogram blob, a byte value outside 0..255) makes the statement fail; the
message is kept in :attr:`FunctionErrors.last` so the caller can report it (SQLite itself only says
"user-defined function raised exception").
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from ..catalog.content import decode_histogram, entropy_bits
from ..errors import ConsumerError, InputError, short_repr

__all__ = ["FUNCTIONS", "SIGNATURES", "FunctionErrors", "js_distance", "l1_distance", "register_functions", "wrapped"]


class FunctionErrors:
    """The last error message a registered function raised on one connection (None if none yet)."""

    def __init__(self) -> None:
        self.last: str | None = None


def _normalised(h: np.ndarray) -> np.ndarray | None:
    total = float(h.sum(dtype=np.float64))
    return h.astype(np.float64) / total if total else None


def js_distance(a: ArrayLike, b: ArrayLike) -> float:
    """Jensen-Shannon distance (base 2, 0..1) between two 256-count histograms (see the module docstring)."""
    p, q = _normalised(np.asarray(a)), _normalised(np.asarray(b))
    if p is None or q is None:
        return 0.0 if p is None and q is None else 1.0
    m = (p + q) / 2

    def kl(x: np.ndarray) -> float:
        nz = x > 0
        return float((x[nz] * np.log2(x[nz] / m[nz])).sum())

    divergence = (kl(p) + kl(q)) / 2
    return float(np.sqrt(min(1.0, max(0.0, divergence))))


def l1_distance(a: ArrayLike, b: ArrayLike) -> float:
    """L1 distance (0..2) between two normalised 256-count histograms (see the module docstring)."""
    p, q = _normalised(np.asarray(a)), _normalised(np.asarray(b))
    if p is None or q is None:
        return 0.0 if p is None and q is None else 2.0
    return float(np.abs(p - q).sum())


def _byte_value(v: object, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 255:
        raise InputError(f"{what} must be a byte value 0..255, got {short_repr(v)}")
    return v


def _range(h: bytes, lo: object, hi: object, name: str) -> tuple[np.ndarray, int, int]:
    lo, hi = _byte_value(lo, f"{name}(h, lo, hi): lo"), _byte_value(hi, f"{name}(h, lo, hi): hi")
    if lo > hi:
        raise InputError(f"{name}(h, lo, hi): lo must be <= hi, got lo={lo}, hi={hi}")
    return decode_histogram(h), lo, hi


def _hist_count(h: bytes, lo: object, hi: object) -> int:
    counts, lo, hi = _range(h, lo, hi, "hist_count")
    return int(counts[lo:hi + 1].sum(dtype=np.uint64))


def _hist_fraction(h: bytes, lo: object, hi: object) -> float:
    counts, lo, hi = _range(h, lo, hi, "hist_fraction")
    total = int(counts.sum(dtype=np.uint64))
    return int(counts[lo:hi + 1].sum(dtype=np.uint64)) / total if total else 0.0


def _hist_mode(h: bytes) -> int | None:
    counts = decode_histogram(h)
    return int(np.argmax(counts)) if counts.any() else None


SQLValue = str | bytes | int | float | None
"""What a registered function returns (a value SQLite and DuckDB both take)."""

FUNCTIONS: dict[str, tuple[int, Callable[..., SQLValue]]] = {
    "hist_entropy": (1, lambda h: entropy_bits(decode_histogram(h))),
    "hist_total": (1, lambda h: int(decode_histogram(h).sum(dtype=np.uint64))),
    "hist_count": (3, _hist_count),
    "hist_fraction": (3, _hist_fraction),
    "hist_mode": (1, _hist_mode),
    "hist_distance": (2, lambda a, b: js_distance(decode_histogram(a), decode_histogram(b))),
    "hist_l1": (2, lambda a, b: l1_distance(decode_histogram(a), decode_histogram(b))),
    "hist_json": (1, lambda h: json.dumps(decode_histogram(h).tolist(), separators=(",", ":"))),
}


SIGNATURES: dict[str, tuple[tuple[str, ...], str]] = {
    "hist_entropy": (("BLOB",), "DOUBLE"),
    "hist_total": (("BLOB",), "BIGINT"),
    "hist_count": (("BLOB", "BIGINT", "BIGINT"), "BIGINT"),
    "hist_fraction": (("BLOB", "BIGINT", "BIGINT"), "DOUBLE"),
    "hist_mode": (("BLOB",), "BIGINT"),
    "hist_distance": (("BLOB", "BLOB"), "DOUBLE"),
    "hist_l1": (("BLOB", "BLOB"), "DOUBLE"),
    "hist_json": (("BLOB",), "VARCHAR"),
}
"""Argument and result types of :data:`FUNCTIONS` in DuckDB's type names (the DuckDB engine registers them
with these; SQLite needs none)."""


def wrapped(name: str, errors: FunctionErrors) -> Callable[..., SQLValue]:
    """The function ``name`` of :data:`FUNCTIONS` as registered: NULL in, NULL out; its error message kept
    in ``errors``."""
    return _wrap(name, FUNCTIONS[name][1], errors)


def _wrap(name: str, fn: Callable[..., SQLValue], errors: FunctionErrors) -> Callable[..., SQLValue]:
    def call(*args: object) -> SQLValue:
        if any(a is None for a in args[:1 if name not in ("hist_distance", "hist_l1") else 2]):
            return None  # content not computed: NULL in, NULL out
        try:
            return fn(*args)
        except ConsumerError as e:
            errors.last = str(e) if str(e).startswith(name) else f"{name}(): {e}"
            raise

    call.__name__ = name
    return call


def register_functions(conn: sqlite3.Connection) -> FunctionErrors:
    """Register every function of :data:`FUNCTIONS` on ``conn`` (deterministic); returns the holder
    of the last error message they raised."""
    errors = FunctionErrors()
    for name, (n_args, fn) in FUNCTIONS.items():
        conn.create_function(name, n_args, _wrap(name, fn, errors), deterministic=True)
    return errors
