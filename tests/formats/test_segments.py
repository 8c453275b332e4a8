"""Many documents in one write (``add_segments``): the same files as one call per document, and exact errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.errors import InputError
from consumer.formats.mmidx import IndexedWriter
from consumer.formats.pbin import PbinWriter


def _chunks(docs: list[np.ndarray], cut: int):
    """The documents' tokens back to back, cut every ``cut`` tokens, as (tokens, lengths, first) segments."""
    stream = np.concatenate(docs) if docs else np.zeros(0, np.uint16)
    ends = np.cumsum([d.size for d in docs])
    starts = ends - np.array([d.size for d in docs], dtype=np.int64)
    total = int(ends[-1]) if docs else 0
    for g0 in range(0, max(total, 1), cut):
        g1 = min(g0 + cut, total)
        keep = (ends > g0) & (starts < g1) | ((starts == ends) & (starts >= g0) & (starts < g1 + (g1 == total)))
        d = np.flatnonzero(keep)
        lo, hi = np.maximum(starts[d], g0), np.minimum(ends[d], g1)
        yield stream[g0:g1], hi - lo, starts[d] >= g0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 40), min_size=1, max_size=30), cut=st.integers(1, 64))
def test_segments_write_the_files_of_one_call_per_document(tmp_path, sizes, cut):
    rng = np.random.default_rng(len(sizes) * 100 + cut)
    docs = [rng.integers(0, 60000, n).astype(np.uint16) for n in sizes]
    a, b = tmp_path / f"one{cut}", tmp_path / f"many{cut}"
    for p in (a, b):
        for suffix in (".bin", ".idx", ".pbin"):
            Path(str(p) + suffix).unlink(missing_ok=True)
    with IndexedWriter(str(a), np.uint16) as w:
        for d in docs:
            w.add_document(d)
    with IndexedWriter(str(b), np.uint16) as w:
        for tokens, lengths, first in _chunks(docs, cut):
            w.add_segments(tokens, lengths, first)
        if w.open_document():
            w.end_document()
    for suffix in (".bin", ".idx"):
        assert Path(str(a) + suffix).read_bytes() == Path(str(b) + suffix).read_bytes(), suffix
    with PbinWriter(str(a) + ".pbin", 2) as w:
        for d in docs:
            w.add_document(d)
    with PbinWriter(str(b) + ".pbin", 2) as w:
        for tokens, lengths, first in _chunks(docs, cut):
            w.add_segments(tokens, lengths, first)
    assert Path(str(a) + ".pbin").read_bytes() == Path(str(b) + ".pbin").read_bytes()


@pytest.mark.parametrize(("lengths", "first", "message"), [
    ([2, 2], [True, True], r"lengths: expected 2 non-negative lengths summing to len\(tokens\) = 5, got \[2, 2\]"),
    ([6, -1], [True, True], r"non-negative lengths .* got \[6, -1\]"),
    ([2, 3], [True], r"expected 1 non-negative lengths"),
    ([2, 3], [True, False], r"first: only the first segment of a call may continue a sequence, got False at 2"),
])
def test_malformed_segments_are_refused(tmp_path, lengths, first, message):
    with IndexedWriter(str(tmp_path / "s"), np.uint16) as w:
        with pytest.raises(InputError, match=message):
            w.add_segments(np.arange(5, dtype=np.uint16), lengths, first)
        w.add_document(np.arange(3, dtype=np.uint16))
