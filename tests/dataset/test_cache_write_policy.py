"""The index cache's write policy: a full disk is an error naming the directory and the bytes needed; a read-only
cache directory only means "not cached". Real full disks and file-size limits:
``tests/test_disk_full.py``."""

import errno
import os
import stat

import pytest

from consumer.dataset.cache import _write_error  # the policy shared by every cache write
from consumer.errors import ConsumerWarning, StorageFullError


def test_a_full_disk_names_the_cache_dir_and_the_bytes_needed():
    with pytest.raises(StorageFullError) as info:
        _write_error("/data/cache", 12345, OSError(errno.ENOSPC, "No space left on device"))
    assert "cache_dir" in str(info.value) and "cannot write '/data/cache': no space left" in str(info.value)
    assert "12345 bytes needed" in str(info.value)
    with pytest.warns(ConsumerWarning, match="is not writable"):
        assert _write_error("/data/cache", 1, OSError(errno.EROFS, "Read-only file system")) is None
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
