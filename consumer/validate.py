"""Argument checks shared by every module: one home for "an int but not a bool" and friends.

Each check raises :class:`~consumer.errors.InputError` naming the argument and echoing the bad value,
and returns the value normalised (numpy scalars become Python ints, so they are JSON-able and hash
the same in cache keys).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .errors import InputError, short_repr

__all__ = ["is_int", "check_int", "check_bool", "check_choice", "check_fraction", "int_vector"]


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer (Python or numpy) and not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as a Python int within ``[minimum, maximum]`` (either bound optional)."""
    if not is_int(value) or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        lo = "" if minimum is None else f" >= {minimum}"
        hi = "" if maximum is None else f"{' and' if lo else ''} <= {maximum}"
        raise InputError(f"{name} must be an int{lo}{hi}, got {short_repr(value)}")
    return int(value)


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is a bool (numpy bools included)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} must be a bool, got {short_repr(value)}")
    return bool(value)


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices`` (the error lists them)."""
    options = list(choices)
    try:
        ok = value in options
    except TypeError:  # unhashable or incomparable values are simply not a choice
        ok = False
    if not ok:
        raise InputError(f"{name} must be one of {options}, got {short_repr(value)}")
    return value


def check_fraction(name: str, value: Any) -> float:
    """``value`` as a float in ``[0, 1]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(value) <= 1.0:
        raise InputError(f"{name} must be a number in [0, 1], got {short_repr(value)}")
    return float(value)


def int_vector(name: str, values: Any) -> np.ndarray:
    """A 1-D int64 array of ``values`` (a list, tuple, array or torch tensor of integers); empty is fine."""
    if hasattr(values, "detach"):  # a torch tensor, without importing torch
        values = values.detach().cpu().numpy()
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"{name} must be a 1-D integer array, got {short_repr(values)}")
    if arr.dtype == np.uint64 and int(arr.max()) > np.iinfo(np.int64).max:
        raise InputError(f"{name} holds a value too large for int64: {short_repr(int(arr.max()))}")
    return arr.astype(np.int64, copy=False)
