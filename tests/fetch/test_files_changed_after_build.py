"""Never serve bytes that do not match the catalog: files rewritten in place (size and mtime restored),
appended to, or swapped for a symlink to /dev/zero or /proc/self/environ after the build."""

from __future__ import annotations

import os

import numpy as np
import pytest

from consumer import Consumer, FileChangedError

from ..conftest import write_corpus

SIZES = {"cat": [300, 40, 12], "dog": [500, 9]}


def _victim(ds: Consumer) -> int:
    return int(np.argmax(ds.documents.doc_size))


def _rewrite_keeping_size_and_mtime(path: str) -> None:
    st = os.stat(path)
    with open(path, "r+b") as f:
        data = f.read()
        f.seek(0)
        f.write(bytes(reversed(data)))  # same size, other content
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # what `touch -r` does: the mtime is restored


@pytest.mark.parametrize("change, message", [
    ("rewrite", "changed since the build: modified at"),
    ("append", "longer than at build time"),
    ("dev-zero", "cannot read .*a device now"),
    ("environ", "shorter than at build time"),
])
@pytest.mark.parametrize("cache", ["off", "on"])
def test_changed_files_are_refused_naming_the_path(tmp_path, change, message, cache):
    fps = write_corpus(tmp_path / "data", SIZES)
    cache_dir = False if cache == "off" else tmp_path / "cache"
    ds = Consumer(fps, cache_dir=cache_dir, seqlen=64, style="concat")
    path = ds.files[_victim(ds)]
    if change == "rewrite":
        _rewrite_keeping_size_and_mtime(path)
    elif change == "append":
        with open(path, "ab") as f:
            f.write(b"more")
    else:
        os.remove(path)
        os.symlink("/dev/zero" if change == "dev-zero" else "/proc/self/environ", path)
    with pytest.raises(FileChangedError, match=message) as info:
        ds.fetch_numpy(np.arange(len(ds)))
    assert os.path.basename(path) in str(info.value)


def test_a_rewritten_file_gets_a_new_header_and_index_not_the_cached_ones(tmp_path):
    """Same size, restored mtime: the change time differs, so the cache misses and libmagic runs again."""
    root = tmp_path / "data"
    (root / "t").mkdir(parents=True)
    path = root / "t" / "a.dat"
    path.write_bytes(b"#!/bin/sh\necho hello world, this is a shell script\n")
    first = Consumer(str(root), cache_dir=tmp_path / "c", seqlen=128)
    assert "shell script" in first.documents.header_text(0)
    st = os.stat(path)
    path.write_bytes(bytes(range(256))[: st.st_size])  # binary now, same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = Consumer(str(root), cache_dir=tmp_path / "c", seqlen=128)
    assert again.build_info["cache"] == "miss" and again.build_info["libmagic_calls"] == 1
    assert "shell script" not in again.documents.header_text(0)
    assert again.decode(again.fetch_numpy(np.array([0]))["input_array"][0]).endswith(path.read_bytes())
