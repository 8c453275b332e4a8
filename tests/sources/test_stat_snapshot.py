"""``consumer.sources.stat_snapshot``: the ``struct stat`` of an open file as bytes, compared with a snapshot, sees
every change ``os.fstat``'s version fields see (written in place with the mtime restored, appended to, truncated,
renamed over, its mode changed) and none when nothing changed."""

from __future__ import annotations

import os
import sys
import time

import pytest

from consumer.sources.stat_snapshot import StatSnapshot


def _glibc_with_fstat() -> bool:
    """glibc 2.33 or later (the first to export ``fstat``): the snapshot must be had there."""
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()
    except (AttributeError, ValueError, OSError):
        return False
    return name == "glibc" and tuple(int(p) for p in version.split(".")[:2]) >= (2, 33)


def _write(path, data: bytes, at: int = 0) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def _change(path, kind: str) -> None:
    st = os.stat(path)
    if kind == "in place, mtime restored":
        _write(path, b"Z", 3)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif kind == "appended":
        with open(path, "ab") as f:
            f.write(b"more")
    elif kind == "truncated":
        os.truncate(path, st.st_size - 1)
    elif kind == "renamed over":
        other = str(path) + ".new"
        with open(other, "wb") as f:
            f.write(b"x" * st.st_size)
        os.replace(other, path)
    elif kind == "mode":
        os.chmod(path, 0o600 if st.st_mode & 0o777 != 0o600 else 0o644)


@pytest.fixture
def opened(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 64)
    fd = os.open(path, os.O_RDONLY)
    yield path, fd
    os.close(fd)


def test_an_unchanged_file_is_unchanged_and_the_snapshot_is_its_stat(opened):
    path, fd = opened
    stat = StatSnapshot(fd)
    snapshot = stat.take()
    if snapshot is None:
        assert not _glibc_with_fstat() and sys.platform != "darwin"
        pytest.skip("libc's fstat is not to be had through ctypes here")
    st = os.fstat(fd)
    order = sys.byteorder
    assert st.st_ino.to_bytes(8, order) in snapshot and st.st_size.to_bytes(8, order) in snapshot
    for _ in range(3):
        assert not stat.changed(snapshot)
    os.pread(fd, 100, 0)  # a read (the access time may move once: then it is a change, never the reverse)
    assert stat.changed(snapshot) == (os.fstat(fd).st_atime_ns != st.st_atime_ns)


@pytest.mark.parametrize("kind", ["in place, mtime restored", "appended", "truncated", "renamed over", "mode"])
def test_every_change_of_the_open_file_is_seen(opened, kind):
    path, fd = opened
    stat = StatSnapshot(fd)
    snapshot = stat.take()
    if snapshot is None:
        pytest.skip("libc's fstat is not to be had through ctypes here")
    before = os.fstat(fd)
    time.sleep(0.02)  # a later change time than the file's creation
    _change(path, kind)
    after = os.fstat(fd)  # what os.fstat of the same descriptor says: it changed
    assert (after.st_ctime_ns, after.st_mtime_ns, after.st_size, after.st_nlink) != \
        (before.st_ctime_ns, before.st_mtime_ns, before.st_size, before.st_nlink)
    assert stat.changed(snapshot)
    assert not stat.changed(stat.take())  # a fresh snapshot is the file as it is now


def test_no_descriptor_no_snapshot():
    assert StatSnapshot(-1).take() is None
