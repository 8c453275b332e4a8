"""Selections (the WHERE part): turn a ``ds[...]`` key into sample ids (an int64 array).

Forms (gperc's I0–I6):

- ``None`` (I0): the next batch of the order made by ``create_batches`` (resolved by the caller);
- an integer (I1): python ``int``, numpy or torch integer scalar; negative counts from the end;
- a slice (I2);
- a list / tuple of ints, an int array or tensor (I3), or a boolean array of length ``len(ds)``;
- ``{class: n}`` (I4): ``n`` random samples of that class, without replacement;
- ``{class: [i, ...]}`` (I5): samples by index *within* that class (negative allowed);
  int and list values may be mixed in one dict;
- ``(selection, query)`` (I6): :func:`split_key` separates the two.

Errors: an index out of range raises :class:`SampleIndexError` (an ``IndexError``); an unknown class
or asking a class for more samples than it has raises :class:`SelectionError` (a ``KeyError``);
an unsupported key type raises ``TypeError``. Every message names the bad value. Ranges are checked on
the exact values before any cast to int64, so ``10**20`` or ``numpy.uint64(2**64 - 1)`` is out of range,
never wrapped onto another sample.

:func:`as_sample_ids` is the stricter form behind ``ds.fetch(sample_ids)``: integers in ``[0, n)`` only.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..errors import InputError, SampleIndexError, SelectionError, short_repr
from ..util.validate import INT64_MAX, int_vector

__all__ = ["NEXT", "as_sample_ids", "resolve", "split_key"]

_INT64 = np.dtype(np.int64)
NEXT = object()  # marker: "the next batch" (I0), resolved by the caller's batcher


def _is_query(x: object) -> bool:
    return x is None or isinstance(x, str) or (
        isinstance(x, (list, tuple)) and len(x) > 0 and all(isinstance(c, str) for c in x))


def split_key(key: object) -> tuple[object, object, bool]:
    """Split a ``ds[...]`` key into ``(selection, query, query_given)``.

    ``ds[sel, query]`` arrives as a 2-tuple whose second item is a query (None, a preset name or a
    list of column names). A tuple that is not of that shape is refused with a hint, since
    ``ds[1, 2]`` is ambiguous (use ``ds[[1, 2]]``).
    """
    if isinstance(key, tuple):
        if len(key) == 2 and _is_query(key[1]):
            return key[0], key[1], True
        if len(key) == 1:
            return key[0], None, False
        raise TypeError(
            f"key {short_repr(key)}: a tuple key must be (selection, query) with query None, a preset "
            "name or a list of column names; to select several samples use a list, e.g. ds[[1, 2]]")
    return key, None, False


def _as_index(x: Any) -> int | None:
    if isinstance(x, (bool, np.bool_)):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def _check_range(ids: np.ndarray, n: int, what: str) -> np.ndarray:
    if ids.size <= 8:  # a few ids: Python ints cost less than three vectorised passes
        listed = ids.tolist()
        if all(0 <= i < n for i in listed):
            return ids
    bad = (ids < -n) | (ids >= n)
    if bad.any():
        raise SampleIndexError(f"{what}: index {int(ids[bad][0])} out of range for {n} samples")
    return np.where(ids < 0, ids + n, ids)


def _int_array(x: object, what: str) -> np.ndarray:
    """A 1-D bool array, or int64 indices checked to fit int64 before the cast (out of range otherwise)."""
    if hasattr(x, "detach"):  # a torch tensor, without importing torch
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x)
        if arr.dtype.kind in "fO" and isinstance(x, (list, tuple)) and all(_as_index(v) is not None for v in x):
            arr = np.array([operator.index(v) for v in x], dtype=object)  # int mixed with uint64 became float64
    except (ValueError, TypeError, OverflowError):
        raise TypeError(f"{what}: expected a 1-D list/array of integers, got {short_repr(x)}") from None
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim == 1 and arr.dtype == np.bool_:
        return arr
    if arr.ndim == 1 and arr.dtype == object and all(_as_index(v) is not None for v in arr.tolist()):
        values = [operator.index(v) for v in arr.tolist()]
        big = next((v for v in values if not -INT64_MAX <= v <= INT64_MAX), None)
        if big is not None:
            raise SampleIndexError(f"{what}: index {big} out of range")
        return np.array(values, dtype=np.int64)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{what}: expected a 1-D list/array of integers, got {short_repr(x)}")
    if arr.dtype.kind == "u" and int(arr.max()) > INT64_MAX:
        raise SampleIndexError(f"{what}: index {int(arr.max())} out of range")
    return arr.astype(np.int64, copy=False)


def as_sample_ids(values: Any, n: int) -> np.ndarray:
    """Sample ids (int64) for ``ds.fetch``: one int or a 1-D sequence/array/tensor of ints in ``[0, n)``.

    :class:`InputError` naming ``sample_ids`` and the value for floats (``0.5`` is not sample 0), bools,
    other objects, or ids outside ``[0, n)`` (checked before any cast: ``2**64 - 1`` never becomes ``-1``).
    """
    if type(values) is np.ndarray and (values.dtype is _INT64 or values.dtype == np.int64) and values.ndim == 1:
        if values.size <= 8:  # a few ids: min/max of Python ints cost less than two numpy reductions
            listed = values.tolist()
            if not listed or (min(listed) >= 0 and max(listed) < n):
                return values
        elif values.min() >= 0 and values.max() < n:
            return values  # what int_vector returns for it, without the per-call checks of other forms
    if type(values) is list and 0 < len(values) <= 8 and all(type(v) is int for v in values):
        if min(values) >= 0 and max(values) < n:  # a few Python ints in range: what an int64 array costs
            return np.array(values, dtype=np.int64)
    if _as_index(values) is not None:
        values = [values]
    elif np.ndim(values) == 0 and not isinstance(values, (list, tuple)):
        raise InputError(f"sample_ids must be an int or a 1-D sequence of ints, got {short_repr(values)}")
    return int_vector("sample_ids", values, 0, n - 1)


def resolve(selection: object, n: int, class_ptr: np.ndarray, class_names: list[str],
            rng: np.random.Generator) -> np.ndarray:
    """Sample ids (int64, in request order) of a selection other than ``None``.

    ``class_ptr`` gives each class's contiguous sample range; ``rng`` draws I4 samples.
    """
    i = _as_index(selection)
    if i is not None:
        if not -n <= i < n:  # on the Python int: 10**20 is out of range, not an OverflowError
            raise SampleIndexError(f"ds[i]: index {i} out of range for {n} samples")
        return np.array([i + n if i < 0 else i], dtype=np.int64)
    if isinstance(selection, slice):
        if selection.step == 0:
            raise InputError(f"ds[{selection.start}:{selection.stop}:0]: slice step cannot be zero")
        return np.arange(*selection.indices(n), dtype=np.int64)
    if isinstance(selection, dict):
        if n and not class_ptr[-1]:  # samples exist but no class owns any: Megatron's order crosses classes
            raise SelectionError(
                f"class selections such as {short_repr(selection)} are not supported with sampling='megatron' "
                "(its samples cross files and classes, so no class owns a sample); select by sample id "
                "(an int, a slice, a list) or ds[None], or use sampling='consumer'")
        return _resolve_dict(selection, class_ptr, class_names, rng)
    if isinstance(selection, (list, tuple, np.ndarray)) or hasattr(selection, "detach"):
        arr = _int_array(selection, "ds[[...]]")
        if arr.dtype == np.bool_:
            if arr.size != n:
                raise SampleIndexError(f"ds[mask]: boolean mask has length {arr.size}, expected {n}")
            return np.flatnonzero(arr).astype(np.int64)
        return _check_range(arr, n, "ds[[...]]")
    raise TypeError(
        f"unsupported selection {type(selection).__name__}: {short_repr(selection)}; use None, an int, "
        "a slice, a list of ints, {class: n} or {class: [indices]}")


def _resolve_dict(selection: dict[Any, Any], class_ptr: np.ndarray, class_names: list[str],
                  rng: np.random.Generator) -> np.ndarray:
    lookup = {name: c for c, name in enumerate(class_names)}
    parts = []
    for name, want in selection.items():
        c = lookup.get(name) if isinstance(name, str) else None
        if c is None:
            raise SelectionError(f"unknown class {short_repr(name)}; classes are {short_repr(class_names)}")
        lo, hi = int(class_ptr[c]), int(class_ptr[c + 1])
        size = hi - lo
        count = _as_index(want)
        if count is not None:
            if count < 0 or count > size:
                raise SelectionError(
                    f"class {name!r}: asked for {count} random samples, it has {size} (0..{size} allowed)")
            parts.append(lo + rng.choice(size, size=count, replace=False).astype(np.int64))
            continue
        if isinstance(want, (list, tuple, np.ndarray)) or hasattr(want, "detach"):
            arr = _int_array(want, f"class {name!r}")
            if arr.dtype == np.bool_:
                raise TypeError(f"class {name!r}: expected indices, got a boolean array")
            parts.append(lo + _check_range(arr, size, f"class {name!r}"))
            continue
        raise TypeError(f"class {name!r}: value must be a count (int) or a list of indices, got {short_repr(want)}")
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
