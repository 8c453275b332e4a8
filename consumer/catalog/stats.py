"""The content statistics of one version of one file, and the histogram blob the catalog stores.

One pass over a file's bytes gives, together:

- ``sha256``: hex digest of the whole content;
- ``histogram``: the 256 counts of each byte value (``numpy.uint64[256]``);
- ``entropy``: Shannon entropy of the byte histogram in bits per byte, ``-sum(p * log2 p)`` over the
  byte values that occur, between 0 (one repeated byte) and 8 (every value equally often);
- ``printable``: fraction of bytes in ``0x20..0x7E`` or one of ``\\t \\n \\x0b \\x0c \\r`` (9..13);
- ``zeros``: fraction of ``0x00`` bytes.

An empty file has the sha256 of ``b""``, an all-zero histogram and entropy, printable and zeros all
defined as ``0.0`` (there is no byte to take a fraction of).

Histogram blob (the catalog's ``histogram`` column and the argument of the SQL functions of
:mod:`consumer.query.functions`): 256 little-endian unsigned integers, count of byte 0 first, in the
narrowest width that holds the largest count; the width is given by the blob's length::

    512 bytes  -> 256 x uint16  (largest count < 65,536)
    1024 bytes -> 256 x uint32  (largest count < 4,294,967,296)
    2048 bytes -> 256 x uint64

:func:`encode_histogram` and :func:`decode_histogram` convert; the encoding of a histogram is unique.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError, short_repr

__all__ = ["PRINTABLE_BYTES", "ContentStats", "decode_histogram", "encode_histogram", "entropy_bits",
           "printable_fraction", "zeros_fraction"]

_WIDTHS = ((np.dtype("<u2"), 0xFFFF), (np.dtype("<u4"), 0xFFFFFFFF), (np.dtype("<u8"), None))
_BY_LENGTH = {256 * dt.itemsize: dt for dt, _ in _WIDTHS}

PRINTABLE_BYTES = np.zeros(256, dtype=bool)
PRINTABLE_BYTES[0x20:0x7F] = True
PRINTABLE_BYTES[0x09:0x0E] = True  # \t \n \x0b \x0c \r
PRINTABLE_BYTES.setflags(write=False)
_PRINTABLE_ONES = PRINTABLE_BYTES.astype(np.uint64)
_PRINTABLE_ONES.setflags(write=False)


@dataclass(frozen=True)
class ContentStats:
    """The content statistics of one version of one file (see the module docstring).

    ``size`` is the number of bytes read and ``mtime_ns`` the file's change stamp ``max(mtime, ctime)``
    (ns) while it was read: the identity of the version the statistics describe. ``entropy``,
    ``printable`` and ``zeros`` are exactly what :func:`entropy_bits`, :func:`printable_fraction` and
    :func:`zeros_fraction` give for ``histogram``.
    """

    path: str
    size: int
    mtime_ns: int
    sha256: str
    histogram: np.ndarray
    entropy: float
    printable: float
    zeros: float

    def histogram_blob(self) -> bytes:
        """The histogram in the blob layout of the catalog (see :func:`encode_histogram`)."""
        return encode_histogram(self.histogram)


def _as_histogram(hist, what: str = "histogram") -> np.ndarray:
    h = np.asarray(hist)
    if h.shape != (256,) or h.dtype.kind not in "iu" or (h.dtype.kind == "i" and h.size and int(h.min()) < 0):
        raise InputError(f"{what} must be 256 non-negative integer counts, got {short_repr(hist)}")
    return h.astype(np.uint64, copy=False)


def _columns(hists: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entropy (bits per byte), printable and zeros fractions of a ``(k, 256)`` stack of histograms,
    vectorised. The one implementation behind every entropy and fraction in the package, so that a
    value computed per file, per batch or by an SQL function is the same float."""
    h = hists.astype(np.float64)  # exact: counts stay far below 2**53, so every sum of counts is exact too
    total = h.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)
    p = h
    p /= safe[:, None]  # in place: h is a fresh array
    terms = np.log2(p, out=np.zeros_like(p), where=p > 0)  # log2 p where a value occurs, 0 elsewhere
    terms *= p  # p log2 p; 0 * 0 = 0.0 where a value does not occur
    entropy = np.clip(-terms.sum(axis=1), 0.0, 8.0) + 0.0  # rounding never leaves [0, 8]; no -0.0
    printable = (hists @ _PRINTABLE_ONES).astype(np.float64) / safe  # an integer count: exact in any order
    zeros = hists[:, 0].astype(np.float64) / safe
    return entropy, printable, zeros


def entropy_bits(hist) -> float:
    """Shannon entropy in bits per byte of a 256-count byte histogram: ``-sum(p log2 p)`` over the
    values that occur, ``p = count / total``. 0.0 for an empty histogram."""
    return float(_columns(_as_histogram(hist)[None])[0][0])


def printable_fraction(hist) -> float:
    """Fraction of bytes in 0x20..0x7E or 9..13 (``\\t \\n \\x0b \\x0c \\r``); 0.0 for an empty histogram."""
    return float(_columns(_as_histogram(hist)[None])[1][0])


def zeros_fraction(hist) -> float:
    """Fraction of 0x00 bytes; 0.0 for an empty histogram."""
    return float(_columns(_as_histogram(hist)[None])[2][0])


def encode_histogram(hist) -> bytes:
    """256 counts as a blob: little-endian uint16, uint32 or uint64, the narrowest that fits."""
    h = _as_histogram(hist)
    top = int(h.max())
    for dtype, limit in _WIDTHS[:-1]:
        if top <= limit:
            return h.astype(dtype).tobytes()
    return h.astype(_WIDTHS[-1][0]).tobytes()


def decode_histogram(blob) -> np.ndarray:
    """The ``uint64[256]`` counts of a histogram blob (512, 1024 or 2048 bytes; see the module docstring)."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise InputError(f"histogram must be a blob of 512, 1024 or 2048 bytes, got {short_repr(blob)}")
    dtype = _BY_LENGTH.get(len(blob))
    if dtype is None:
        raise InputError(f"histogram must be a blob of 512, 1024 or 2048 bytes, got {len(blob)} bytes")
    return np.frombuffer(blob, dtype=dtype).astype(np.uint64)
