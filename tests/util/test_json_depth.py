"""Bounded JSON loading: the nesting depth is measured without parsing (a hostile file cannot exhaust the
stack), and agrees with the parsed value."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import FormatError
from consumer.util.fileio import _json_depth, load_json_bounded

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
def test_json_depth_matches_the_structure(obj: object, indent: int | None) -> None:
    """Brackets and quotes inside strings (escaped or not) never count: the scan agrees with the parsed value."""
    text = json.dumps(obj, indent=indent)
    assert _json_depth(text.encode()) == nesting(obj)
    assert load_json_bounded(text, "x.json") == obj


def test_depth_cap_is_inclusive() -> None:
    assert load_json_bounded("[" * 3 + "]" * 3, "x", max_depth=3) == [[[]]]
    with pytest.raises(FormatError, match="nested 4 levels deep, more than the cap of 3"):
        load_json_bounded("[" * 4 + "]" * 4, "x", max_depth=3)
