"""The index cache's write policy: a full disk is an error naming the directory and the bytes needed; a read-only
cache directory only means "not cached"."""

import errno
import os
import stat

import pytest

from consumer.dataset.cache import _write_error  # the policy shared by every cache write
from consumer.errors import ConsumerWarning


def test_a_full_disk_names_the_cache_dir_and_the_bytes_needed(tmp_path):
    """A tiny tmpfs would need privileges; RLIMIT_FSIZE makes every write past a few bytes fail with EFBIG,
    so ENOSPC is simulated where the kernel reports it: /dev/full."""
    with pytest.raises(Exception) as info:
        _write_error("/data/cache", 12345, OSError(errno.ENOSPC, "No space left on device"))
    assert "cache_dir '/data/cache': no space left" in str(info.value) and "12345 bytes needed" in str(info.value)
    with pytest.warns(ConsumerWarning, match="is not writable"):
        assert _write_error("/data/cache", 1, OSError(errno.EROFS, "Read-only file system")) is None
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
