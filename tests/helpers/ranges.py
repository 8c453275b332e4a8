"""Malformed ``read_ranges`` calls every byte source refuses, with the words of the refusal.

The rows are for a source of 6 files (or documents) whose file 2 holds 5,000 bytes: ``(ids, offsets, lengths, out,
at, match)``. The last two rows reach numpy's checks rather than the plain-int checks of a few ranges."""

from __future__ import annotations

import numpy as np

MALFORMED_RANGES = [
    ([9], [0], [1], np.zeros(4, np.uint8), [0], r"file ids in \[0, 6\)"),
    ([2], [4999], [2], np.zeros(4, np.uint8), [0], "outside its 5000 bytes"),
    ([2], [-1], [1], np.zeros(4, np.uint8), [0], "outside its"),
    ([2], [0], [8], np.zeros(4, np.uint8), [0], "inside out"),
    ([2], [0], [1], np.zeros(4, np.int64), [0], "writable 1-D numpy uint8"),
    ([2, 3], [0], [1], np.zeros(4, np.uint8), [0], "1-D of one length"),
    ([[2]], [[0]], [[1]], np.zeros(4, np.uint8), [[0]], "1-D of one length"),
    ([2] * 12, [0] * 12, [1] * 12, np.zeros(4, np.uint8), list(range(12)), "inside out"),  # past FEW_RANGES
]
