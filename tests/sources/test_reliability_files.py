"""File-system helpers behind the reliability checks: JSON depth, directories, the open/probe mask."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import FormatError, InputError
from consumer.sources.corpus import stat_files
from consumer.util.fileio import check_path, ensure_directory, json_depth, load_json_bounded

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(alphabet='[]{}"\\ab,:', max_size=6),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=3), c, max_size=3),
    max_leaves=30,
)


def nesting(obj: object) -> int:
    if isinstance(obj, list):
        return 1 + max((nesting(x) for x in obj), default=0)
    if isinstance(obj, dict):
        return 1 + max((nesting(x) for x in obj.values()), default=0)
    return 0


@settings(max_examples=400, deadline=None)
@given(obj=json_values, indent=st.sampled_from([None, 1]))
def testjson_depth_matches_the_structure(obj: object, indent: int | None) -> None:
    """Brackets and quotes inside strings (escaped or not) never count: the scan agrees with the parsed value."""
    text = json.dumps(obj, indent=indent)
    assert json_depth(text.encode()) == nesting(obj)
    assert load_json_bounded(text, "x.json") == obj


def test_depth_cap_is_inclusive() -> None:
    assert load_json_bounded("[" * 3 + "]" * 3, "x", max_depth=3) == [[[]]]
    with pytest.raises(FormatError, match="nested 4 levels deep, more than the cap of 3"):
        load_json_bounded("[" * 4 + "]" * 4, "x", max_depth=3)


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
