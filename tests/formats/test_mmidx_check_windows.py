"""The ``.idx`` checks run a window of sequences at a time (no temporary of the index's size at 10^8 sequences):
a bad pointer or document index past the first window is found and named like one in it."""

from __future__ import annotations

import numpy as np
import pytest

from consumer.errors import FormatError
from consumer.formats.mmidx import _CHECK_WINDOW, _MEGATRON_HEADER, IndexedReader, IndexedWriter

N = _CHECK_WINDOW + 1000  # two windows


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    prefix = str(tmp_path_factory.mktemp("windows") / "s")
    lengths = np.full(N, 2, dtype=np.int64)
    lengths[::7] = 1
    with IndexedWriter(prefix, np.uint16) as w:
        w.add_segments(np.zeros(int(lengths.sum()), dtype=np.uint16), lengths, np.ones(N, dtype=bool))
        w.end_document()
    return prefix


def _patched(store: str, tmp_path, offset: int, value: int) -> str:
    out = str(tmp_path / "bad")
    for suffix in (".bin", ".idx"):
        with open(store + suffix, "rb") as f:
            data = bytearray(f.read())
        if suffix == ".idx":
            data[offset:offset + 8] = int(value).to_bytes(8, "little", signed=True)
        with open(out + suffix, "wb") as f:
            f.write(data)
    return out


def test_a_whole_index_of_two_windows_checks(store: str) -> None:
    reader = IndexedReader(store)
    assert len(reader) == N and int(reader.pointers[-1]) == 2 * (int(reader.lengths.sum()) - int(reader.lengths[-1]))


def test_a_bad_pointer_past_the_first_window_is_named(store: str, tmp_path) -> None:
    i = _CHECK_WINDOW + 5
    pointers = _MEGATRON_HEADER + 4 * N
    expected = int(IndexedReader(store).pointers[i])
    bad = _patched(store, tmp_path, pointers + 8 * i, expected + 2)
    with pytest.raises(FormatError, match=rf"pointers\[{i}\]: expected {expected} .*got {expected + 2}"):
        IndexedReader(bad)


def test_a_decreasing_document_index_past_the_first_window_is_named(store: str, tmp_path) -> None:
    i = _CHECK_WINDOW  # the first entry of the second window, compared with the last of the first
    doc_idx = _MEGATRON_HEADER + 12 * N
    bad = _patched(store, tmp_path, doc_idx + 8 * i, i - 2)
    with pytest.raises(FormatError, match=rf"document_indices\[{i}\] >= {i - 1}, got {i - 2}"):
        IndexedReader(bad)
