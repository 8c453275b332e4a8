"""Containers indexed on a local pool of worker processes (what a local build does for a large corpus of several
local containers): the same scans and decoded texts as one process, in memory and through persistent entries."""

from __future__ import annotations

import os

import numpy as np

from consumer.dataset.index_pool import PARALLEL_MIN_BYTES, local_engine, pool_workers
from consumer.dataset.records import index_containers, index_on
from consumer.sources.local import LocalFiles
from consumer.sources.records import RecordOptions
from consumer.sources.records.scanned import Scanned
from tests.records.writers import write_jsonl

_ARRAYS = ("offset", "length", "record", "inplace", "json_offset", "json_length")


def _decoded(d) -> bytes:
    if d is None or isinstance(d, np.ndarray):
        return b"" if d is None else d.tobytes()
    with open(d, "rb") as f:
        return f.read()


def _same(got: tuple[list[Scanned], list, int], want: tuple[list[Scanned], list, int]) -> None:
    assert len(got[0]) == len(want[0]) and got[2] == want[2]
    for a, b in zip(got[0], want[0]):
        assert all(np.array_equal(getattr(a, k), getattr(b, k)) for k in _ARRAYS) and a.counts == b.counts
    assert [_decoded(d) for d in got[1]] == [_decoded(d) for d in want[1]]


def test_a_pool_indexes_containers_as_one_process(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    for k in range(5):
        write_jsonl(folder / f"s{k}.jsonl", [f"doc {k}.{i} \"quoted\"\nnaïve " * (i % 5) for i in range(30 + 7 * k)])
    paths = sorted(str(folder / n) for n in os.listdir(folder))
    source = LocalFiles.listed(paths, None)
    options = RecordOptions(documents="jsonl")
    with local_engine(source, min_bytes=0) as engine:
        assert engine is not None and engine.slots == pool_workers(source.sizes, min_bytes=0) >= 2
        _same(index_on(engine, source, options, None), index_containers(source, options, None))
        cached = str(tmp_path / "cache")
        first = index_on(engine, source, options, cached)  # the workers write the persistent entries
        assert first[2] == 0
        _same(first, index_containers(source, options, str(tmp_path / "other")))
        assert index_containers(source, options, cached)[2] == 5  # and this process reuses them
    with local_engine(source) as engine:  # a few kilobytes: indexed in this process
        assert engine is None


def test_pool_workers_rule():
    big = np.full(8, PARALLEL_MIN_BYTES, dtype=np.int64)
    assert pool_workers(big, cores=4) == 4 and pool_workers(big, cores=16) == 8
    assert pool_workers(big[:1], cores=4) == 1  # one container: one process
    assert pool_workers(np.full(8, 1000, dtype=np.int64), cores=4) == 1  # too small to pay for the pool
    assert pool_workers(big, cores=1) == 1
