"""File-system helpers behind the reliability checks: directories, paths, the open/probe mask."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from consumer.errors import InputError
from consumer.sources.corpus import stat_files
from consumer.util.fileio import check_path, ensure_directory


def test_ensure_directory(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    assert ensure_directory(target, "cache_dir") == str(target)
    assert target.is_dir()
    assert ensure_directory(str(target), "cache_dir") == str(target)  # exists: fine
    with pytest.raises(InputError, match="cache_dir: a path cannot contain a NUL byte"):
        ensure_directory(str(tmp_path / "x\x00y"), "cache_dir")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(InputError, match=r"cannot use '.*/file/c/d' as a directory: '.*/file' is a file"):
        ensure_directory(tmp_path / "file" / "c" / "d", "cache_dir")


def test_check_path_bytes_and_str() -> None:
    assert check_path(b"/tmp/a", "p") == b"/tmp/a"
    assert check_path(Path("/tmp/a"), "p") == "/tmp/a"
    with pytest.raises(InputError, match=r"p: a path cannot contain a NUL byte, got b'/tmp/\\x00'"):
        check_path(b"/tmp/\x00", "p")


def test_check_open_mask_still_probes_size_zero(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"abc")
    paths = [str(tmp_path / "a"), "/proc/self/status"]
    with pytest.raises(InputError, match="reports size 0 but has content"):
        stat_files(paths, check_open=np.zeros(2, dtype=bool))
    sizes, _ = stat_files(paths[:1], check_open=np.zeros(1, dtype=bool))
    assert sizes.tolist() == [3]
    with pytest.raises(InputError, match=r"check_open must hold one bool per path \(1\), got shape \(2,\)"):
        stat_files(paths[:1], check_open=[True, False])


def test_empty_files_stay_valid(tmp_path: Path) -> None:
    """A real empty file (the probe reads nothing) is fine, and so is a symlink to it."""
    (tmp_path / "empty").write_bytes(b"")
    os.symlink(tmp_path / "empty", tmp_path / "link")
    sizes, _ = stat_files([str(tmp_path / "link")])
    assert sizes.tolist() == [0]
