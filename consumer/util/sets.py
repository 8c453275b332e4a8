"""Distinct values of an integer array: :func:`distinct`.

``numpy.unique(a)`` without a ``return_*`` option asks ``numpy.ma`` whether ``a`` is masked, which imports
``numpy.ma`` on its first call in a process (25-35 ms here). A first build, a first read or a first query of a
fresh process paid that for a few hundred class or container numbers. :func:`distinct` gives the same answer for
integer arrays from a sort, and loads nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["distinct"]


def distinct(values: Any) -> np.ndarray:
    """The distinct values of the integer array ``values`` (flattened), ascending, in a new array: what
    ``numpy.unique(values)`` gives (see the module docstring)."""
    flat = np.sort(np.asarray(values).ravel())  # a copy: never a view of the caller's array
    if flat.size < 2:
        return flat
    first = np.empty(flat.size, dtype=bool)
    first[0] = True
    np.not_equal(flat[1:], flat[:-1], out=first[1:])
    out: np.ndarray = flat[first]
    return out
