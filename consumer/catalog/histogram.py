"""The 256 byte counts of a buffer, the histogram of the content pass: :func:`byte_histogram`.

``numpy.bincount`` first converts its input to int64 (8 bytes written per byte counted), which makes it the slow
half of the content pass next to ``hashlib.sha256``. Pillow's ``Image.histogram`` counts the bytes of an ``"L"``
(8-bit) image in one C loop, without that conversion, over the buffer as it is (``Image.frombuffer`` shares the
memory). Measured on one 256 MiB buffer (``benchmarks/probes/content_floor.py``; figures in
``docs/benchmarks.md``) it is several times faster than ``bincount`` over bytes and over byte pairs. Without Pillow
the pair count below is used: the same counts, more slowly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["byte_histogram", "numpy_histogram", "pillow_histogram"]

_PAIR_MIN = 1 << 16  # from this many bytes on, numpy counts byte pairs
_PIL_MIN = 1 << 12  # below this many bytes Pillow's per-call set-up costs more than bincount
_PIL_PART = 1 << 30  # bytes per Pillow image (its sizes are C ints)


def numpy_histogram(data: np.ndarray) -> np.ndarray:
    """The 256 byte counts (int64) of a uint8 array with numpy alone.

    Large inputs are counted as little-endian uint16 pairs into 65,536 bins, folded back (a byte value ``v``
    occurs ``row v + column v`` times in the 256 x 256 pair table): half the increments of a plain ``bincount``.
    Small inputs use a plain ``bincount``.
    """
    n = data.size
    if n < _PAIR_MIN:
        return np.bincount(data, minlength=256)
    even = n & ~1
    pairs = np.bincount(data[:even].view("<u2"), minlength=65536).reshape(256, 256)
    counts = pairs.sum(axis=0) + pairs.sum(axis=1)
    if even != n:
        counts[data[-1]] += 1
    return counts


def _pillow() -> Any:
    """Pillow's ``Image`` module, or None when Pillow is not installed."""
    try:
        from PIL import Image  # noqa: PLC0415  (optional: the numpy count is the fallback)
    except ImportError:
        return None
    return Image


def pillow_histogram(data: np.ndarray, image: Any) -> np.ndarray:
    """The 256 byte counts (int64) of a contiguous uint8 array, counted by Pillow's ``Image`` module ``image``
    (one 8-bit image of one row per part of at most 1 GiB, sharing the array's memory)."""
    counts = np.zeros(256, dtype=np.int64)
    for at in range(0, data.size, _PIL_PART):
        part = data[at:at + _PIL_PART]
        counts += np.asarray(image.frombuffer("L", (part.size, 1), part.data, "raw", "L", 0, 1).histogram(),
                             dtype=np.int64)
    return counts


def byte_histogram(data: np.ndarray) -> np.ndarray:
    """The 256 byte counts (int64) of ``data`` (a 1-D uint8 array): equal to ``np.bincount(data, minlength=256)``,
    counted by the fastest kernel available (see the module docstring)."""
    data = np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
    if data.size < _PIL_MIN:
        return np.bincount(data, minlength=256)
    image = _pillow()  # an import already made: a look-up in sys.modules
    return numpy_histogram(data) if image is None else pillow_histogram(data, image)
