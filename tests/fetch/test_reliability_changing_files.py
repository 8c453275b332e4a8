"""A source file rewritten while the raw reader reads it: its bytes are never served (old and new halves).

The write lands for real while the reader thread is inside ``preadv`` (``tests/racing.py`` watches the
thread's current system call through ``/proc`` and checks it was still there when the write was done), with
the mtime set back as ``touch -r`` would. The fetch must raise :class:`FileChangedError`.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import FileChangedError

from ..conftest import write
from ..racing import PREADV, race_preadv

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or PREADV is None,
                                reason="watches the reader thread's system call through /proc")

SIZE = 32 << 20  # one preadv of 32 MiB: long enough to be seen in progress
ATTEMPTS = 30
RACED_NEEDED = 2


def test_a_file_rewritten_during_the_read_is_not_served(tmp_path):
    data = np.random.default_rng(0).integers(0, 255, SIZE, dtype=np.uint8).tobytes()
    raced = 0
    for attempt_no in range(ATTEMPTS):
        folder = tmp_path / f"d{attempt_no}" / "a"
        folder.mkdir(parents=True)
        path = write(folder / "big.bin", data)
        ds = Consumer(str(folder.parent), cache_dir=False, metadata=None, n_bytes=2, seqlen=SIZE // 2 + 8)
        assert len(ds) == 1
        attempt = race_preadv(path, lambda d=ds: d.fetch_numpy(np.arange(1), ["input_array"], out_dtype=np.int32),
                              SIZE - 4096, b"\xff" * 4096)
        if attempt.raced:
            raced += 1
            assert isinstance(attempt.error, FileChangedError), attempt.error or "served"
            assert "changed while it was read" in str(attempt.error) and path in str(attempt.error)
        ds.close()
        if raced >= RACED_NEEDED:
            break
    assert raced >= RACED_NEEDED, f"only {raced} of {attempt_no + 1} attempts raced the reader"
