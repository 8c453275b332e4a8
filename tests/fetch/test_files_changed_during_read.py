"""A source file rewritten while the raw reader reads it: its bytes are never served (old and new halves).

The write lands for real while the reader thread is inside ``preadv`` (``tests/helpers/racing.py`` watches the
thread's current system call through ``/proc`` and checks it was still there when the write was done), with
the mtime set back as ``touch -r`` would. The fetch must raise :class:`FileChangedError`.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import FileChangedError

from ..conftest import write
from ..helpers.racing import PREADV, race_preadv

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or PREADV is None,
                                reason="watches the reader thread's system call through /proc")

SIZE = 32 << 20  # one preadv of 32 MiB: long enough to be seen in progress
ATTEMPTS = 30
RACED_NEEDED = 2


def _attempts(base: Path, data: bytes) -> tuple[int, int, int]:
    """Race fetches of a file under ``base``; (raced, seen waiting in preadv, attempts) after enough raced ones."""
    raced = seen = 0
    for attempt_no in range(ATTEMPTS):
        folder = base / f"d{attempt_no}" / "a"
        folder.mkdir(parents=True)
        path = write(folder / "big.bin", data)
        ds = Consumer(str(folder.parent), cache_dir=False, metadata=None, n_bytes=2, seqlen=SIZE // 2 + 8)
        assert len(ds) == 1
        attempt = race_preadv(path, lambda d=ds: d.fetch_numpy(np.arange(1), ["input_array"], out_dtype=np.int32),
                              SIZE - 4096, b"\xff" * 4096)
        seen += attempt.seen
        if attempt.raced:
            raced += 1
            assert isinstance(attempt.error, FileChangedError), attempt.error or "served"
            assert "changed while it was read" in str(attempt.error) and path in str(attempt.error)
        ds.close()
        shutil.rmtree(folder.parent)
        if raced >= RACED_NEEDED or (attempt_no >= 2 and not seen):
            break
    return raced, seen, attempt_no + 1


def test_a_file_rewritten_during_the_read_is_not_served(tmp_path):
    data = np.random.default_rng(0).integers(0, 255, SIZE, dtype=np.uint8).tobytes()
    # a read waits for the disk (and shows in /proc) only where the file's pages can be evicted: not on a tmpfs,
    # so where the temporary folder is one, the file goes to /var/tmp
    for base in (tmp_path, Path("/var/tmp") / f"consumer-race-{uuid.uuid4().hex}"):
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        try:
            raced, seen, tried = _attempts(base, data)
        finally:
            if base != tmp_path:
                shutil.rmtree(base, ignore_errors=True)
        if seen:
            assert raced >= RACED_NEEDED, f"only {raced} of {tried} attempts raced the reader"
            return
    pytest.skip("no read was ever seen waiting for the disk here (every file system tried keeps files in memory)")
