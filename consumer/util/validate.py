"""Argument checks shared by every layer: one home for "an int but not a bool" and integer vectors.

- :func:`check_int`: a Python or numpy integer (never a ``bool``, never a float that happens to be whole),
  optionally within ``[minimum, maximum]``; returns a Python ``int``, so no later numpy conversion can
  overflow or wrap;
- :func:`check_bool`: a real ``bool`` (or ``numpy.bool_``), not ``0``/``1``/``"yes"``;
- :func:`int_vector`: a 1-D sequence/array of integers as ``int64``, refusing floats, bools and values
  outside int64 (``[2**64 - 1]`` as ``uint64`` must not become ``-1``) before any cast;
- :func:`check_class_to_id`: a ``{class: id}`` mapping, ids distinct ints in ``[0, 2**63 - 1]``, naming
  where the mapping came from (an argument or a file).

Every error is an :class:`~consumer.errors.InputError` (or the class the caller passes) naming the value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError, short_repr

__all__ = ["INT64_MAX", "is_int", "check_bool", "check_choice", "check_class_to_id", "check_int",
           "int_vector"]

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def is_int(value: object) -> bool:
    """Whether ``value`` is an integer (Python or numpy) and not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))



def check_choice(name: str, value: Any, choices: Any) -> Any:
    """``value`` if it is one of ``choices`` (the error lists them)."""
    options = list(choices)
    try:
        ok = value in options
    except TypeError:  # unhashable or incomparable values are simply not a choice
        ok = False
    if not ok:
        raise InputError(f"{name} must be one of {options}, got {short_repr(value)}")
    return value


def _bounds(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an int in [{minimum}, {maximum}]"
    if minimum is not None:
        return f"an int >= {minimum}"
    if maximum is not None:
        return f"an int <= {maximum}"
    return "an int"


def check_int(name: str, value: object, minimum: int | None = None, maximum: int | None = None,
              error: type[Exception] = InputError) -> int:
    """``value`` as a Python int if it is an integer (not a bool) within ``[minimum, maximum]``.

    Raises ``error`` (default :class:`InputError`) naming ``name`` and echoing the value otherwise.
    """
    if not is_int(value):
        raise error(f"{name} must be {_bounds(minimum, maximum)}, got {short_repr(value)}")
    out = int(value)  # type: ignore[call-overload]  # an integer: checked above
    if (minimum is not None and out < minimum) or (maximum is not None and out > maximum):
        raise error(f"{name} must be {_bounds(minimum, maximum)}, got {out}")
    return out


def check_bool(name: str, value: object, error: type[Exception] = InputError) -> bool:
    """``value`` as a bool if it is one (``True``/``False`` or ``numpy.bool_``); ``error`` naming ``name`` otherwise."""
    if not isinstance(value, (bool, np.bool_)):
        raise error(f"{name} must be a bool (True or False), got {short_repr(value)}")
    return bool(value)


def int_vector(name: str, values: Any, minimum: int | None = None, maximum: int | None = None,
               error: type[Exception] = InputError, *, keep_int32: bool = False) -> np.ndarray:
    """``values`` (list, tuple, numpy array or torch tensor) as a 1-D ``int64`` array (``keep_int32``: an int32
    array is returned as it is, e.g. a memory map of 10^8 lengths, not copied into 800 MB of int64).

    Refused with ``error`` naming ``name`` and the first bad value: anything not 1-D, floats (even whole
    ones: ``[1.0]`` is almost always a mistake), bools, other objects, and values outside
    ``[minimum, maximum]`` (default: the int64 range). The range is checked before the cast to int64, so a
    ``uint64`` ``2**64 - 1`` or a Python ``10**20`` is refused, never wrapped.
    """
    if hasattr(values, "detach"):  # a torch tensor, without importing torch
        values = values.detach().cpu().numpy()
    lo = INT64_MIN if minimum is None else max(minimum, INT64_MIN)
    hi = INT64_MAX if maximum is None else min(maximum, INT64_MAX)
    try:
        arr = np.asarray(values)
        if arr.dtype.kind in "fO" and isinstance(values, (list, tuple)) and all(is_int(v) for v in values):
            arr = np.array([int(v) for v in values], dtype=object)  # int mixed with uint64 became float64: exact
    except (ValueError, TypeError, OverflowError) as exc:  # ragged nesting, unconvertible objects
        raise error(f"{name} must be a 1-D integer array, got {short_repr(values)} ({exc})") from None
    if arr.ndim != 1:
        raise error(f"{name} must be a 1-D integer array, got shape {arr.shape}: {short_repr(values)}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype == object:
        bad = next((v for v in arr.tolist() if not is_int(v)), None)
        if bad is not None:
            raise error(f"{name} must be a 1-D integer array, got {short_repr(bad)} in {short_repr(values)}")
        out_of_range = next((v for v in arr.tolist() if not lo <= v <= hi), None)
        if out_of_range is not None:
            raise error(f"{name}: expected integers in [{lo}, {hi}], got {out_of_range}")
        return arr.astype(np.int64)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        first = arr.reshape(-1)[0].item()
        raise error(f"{name} must be a 1-D integer array, got dtype {arr.dtype} (e.g. {short_repr(first)}) "
                    f"in {short_repr(values)}")
    amin, amax = int(arr.min()), int(arr.max())  # Python ints: exact for uint64 too
    if amin < lo or amax > hi:
        raise error(f"{name}: expected integers in [{lo}, {hi}], got {amin if amin < lo else amax}")
    return arr if keep_int32 and arr.dtype == np.int32 else arr.astype(np.int64, copy=False)


def check_class_to_id(class_to_id: object, classes: list[str], what: str = "class_to_id") -> dict[str, int]:
    """A validated ``{class: id}`` for ``classes`` (default ``0..C-1`` by sorted position when ``None``).

    Every class must be present with a distinct int id in ``[0, 2**63 - 1]``. ``what`` names the source in
    messages: the argument (``"class_to_id"``) or, for a mapping read from a file, that file (e.g.
    ``"class_to_id in /data/x.consumer.json"``), so users are never blamed for an argument they did not pass.
    """
    if class_to_id is None:
        return {c: i for i, c in enumerate(classes)}
    if not isinstance(class_to_id, dict):
        raise InputError(f"{what} must be a dict {{class: int}}, got {short_repr(class_to_id)}")
    missing = [c for c in classes if c not in class_to_id]
    if missing:
        raise InputError(f"{what} misses class(es) {short_repr(missing)}; it has "
                         f"{short_repr(sorted(map(str, class_to_id)))}")
    out = {c: check_int(f"{what}[{c!r}]", v, 0, INT64_MAX if is_int(v) and v > INT64_MAX else None)
           for c, v in class_to_id.items()}
    ids = [out[c] for c in classes]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise InputError(f"{what} gives the same id to several classes: duplicate ids {dup}")
    return out
