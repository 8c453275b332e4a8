"""A file rewritten while the content pass reads it: never a mixed answer (old and new halves).

The writer really rewrites the file from another thread while the read is under way (``tests/helpers/racing.py``
watches the bytes the reader thread has read through ``/proc`` and checks afterwards that the write landed in the
middle of the read), and sets the mtime back as ``touch -r`` would: only the ctime tells. Each raced attempt
must end in :class:`FileChangedError`; an attempt that did not race must give the statistics of one whole
version of the file.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys

import numpy as np
import pytest

from consumer.catalog.catalog import Catalog
from consumer.catalog.content import content_stats
from consumer.errors import FileChangedError

from ..conftest import identity, write
from ..helpers.racing import race_sequential_read

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="watches the reader through /proc")

SIZE = 8 << 20  # 2048 reads of 4 KiB: long enough to be caught in its first half
PATCH = b"\xff" * 4096
ATTEMPTS = 40
RACED_NEEDED = 3


def _versions(path: str, old: bytes) -> set[str]:
    """sha256 of the two whole versions a read may describe: before and after the overwrite."""
    new = bytearray(old)
    at = len(old) * 3 // 4
    new[at:at + len(PATCH)] = PATCH
    return {hashlib.sha256(old).hexdigest(), hashlib.sha256(bytes(new)).hexdigest()}


def _data(seed: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 255, SIZE, dtype=np.uint8).tobytes()  # no 0xff: the patch shows


def test_content_stats_of_a_file_rewritten_while_read_is_never_mixed(tmp_path):
    raced = 0
    for attempt_no in range(ATTEMPTS):
        old = _data(attempt_no)
        path = write(tmp_path / f"f{attempt_no}.bin", old)
        attempt = race_sequential_read(path, lambda p=path: content_stats(p, chunk=4096), PATCH)
        if attempt.raced:
            raced += 1
            assert isinstance(attempt.error, FileChangedError), attempt.error or attempt.value
            assert re.search("changed (while it was read|since the build)", str(attempt.error)), attempt.error
            assert path in str(attempt.error)
        else:  # the write came after the read, or not at all: one whole version
            assert attempt.error is None or isinstance(attempt.error, FileChangedError)
            if attempt.error is None:
                assert attempt.value.sha256 in _versions(path, old)
        os.unlink(path)
        if raced >= RACED_NEEDED:
            break
    assert raced >= RACED_NEEDED, f"only {raced} of {attempt_no + 1} attempts raced the reader"


def test_the_catalog_content_pass_fails_then_recomputes_the_new_version(tmp_path):
    """Through the catalog (what ``ds.sql`` runs for a content column): the pass fails with FileChangedError
    naming the file, stores nothing for it (nor a stale or mixed row), and the next pass over the new
    version stores that version's hash."""
    small = [write(tmp_path / f"s{i}.txt", b"small %d" % i) for i in range(3)]
    db = str(tmp_path / "cache" / "catalog.sqlite")
    raced = 0
    for attempt_no in range(ATTEMPTS):
        old = _data(100 + attempt_no)
        path = write(tmp_path / f"big{attempt_no}.bin", old)
        paths = [*small, path]
        sizes, stamps = identity(paths)
        catalog = Catalog(db)
        attempt = race_sequential_read(
            path, lambda c=catalog, p=paths, s=sizes, t=stamps: c.ensure_content(p, s, t, chunk=4096, workers=1),
            PATCH)
        if attempt.raced:
            raced += 1
            assert isinstance(attempt.error, FileChangedError) and path in str(attempt.error), attempt.error
            assert catalog.content_rows([path], sizes[-1:], stamps[-1:]) == [None]  # nothing under the old version
            new_sizes, new_stamps = identity(paths)
            assert new_stamps[-1] != stamps[-1]  # the ctime moved though the mtime was set back
            assert catalog.content_rows([path], new_sizes[-1:], new_stamps[-1:]) == [None]
            assert catalog.ensure_content(paths, new_sizes, new_stamps) >= 1  # the row is computed for the new version
            (row,) = catalog.content_rows([path], new_sizes[-1:], new_stamps[-1:])
            with open(path, "rb") as f:
                assert row[0] == hashlib.sha256(f.read()).hexdigest()
        elif attempt.error is None:
            (row,) = catalog.content_rows([path], sizes[-1:], stamps[-1:])
            assert row is None or row[0] in _versions(path, old)
        catalog.close()
        os.unlink(path)
        if raced >= RACED_NEEDED:
            break
    assert raced >= RACED_NEEDED, f"only {raced} of {attempt_no + 1} attempts raced the content pass"


def test_a_file_whose_ctime_is_newer_than_its_mtime_gets_its_content_columns(tmp_path):
    """``chmod`` after writing (or ``touch -r``) leaves ctime > mtime: the dataset keys the file on
    ``max(mtime, ctime)``, and the content pass must describe it under that same stamp (it used to raise
    FileChangedError for a file that never changed)."""
    from consumer import Consumer

    root = tmp_path / "data" / "a"
    root.mkdir(parents=True)
    paths = [write(root / f"f{i}", bytes([i]) * (100 + i)) for i in range(3)]
    st = os.stat(paths[0])
    os.utime(paths[0], ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))  # mtime a second back: ctime is newer
    os.chmod(paths[1], 0o600)
    ds = Consumer(str(tmp_path / "data"), cache_dir=tmp_path / "cache", seqlen=64, metadata=None)
    rows = ds.sql("SELECT path, sha256 FROM files ORDER BY path")
    assert [r[1] for r in rows] == [hashlib.sha256(bytes([i]) * (100 + i)).hexdigest() for i in range(3)]
