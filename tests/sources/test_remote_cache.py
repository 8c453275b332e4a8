"""The read-through block cache: cold and warm reads give the same bytes, a warm read sends no request,
the size bound holds, damaged blocks are detected and refetched, objects without ETag are not cached."""

from __future__ import annotations

import os

import numpy as np
import pytest

from consumer.errors import InputError
from consumer.sources.block_cache import BlockCache, block_key
from consumer.sources.range_reader import RemoteReader
from consumer.sources.urls import list_objects

from ..helpers.remote_servers import file_server


@pytest.fixture
def served(tmp_path):
    rng = np.random.default_rng(3)
    (tmp_path / "src").mkdir()
    blobs = {}
    for i, n in enumerate([10, 3000, 9000, 20000, 50000, 0, 1]):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        (tmp_path / "src" / f"{i}.bin").write_bytes(data)
        blobs[f"{i}.bin"] = data
    with file_server(tmp_path / "src") as server:
        yield server, list_objects(server.url), blobs


def _read_all(reader: RemoteReader, listing, starts=None, lengths=None) -> np.ndarray:
    sizes = listing.sizes
    starts = np.zeros(len(listing), np.int64) if starts is None else starts
    lengths = sizes - starts if lengths is None else lengths
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    out = np.zeros(int(lengths.sum()), dtype=np.uint8)
    reader.read_ranges(listing.urls, starts, lengths, out, offsets, listing.etags, sizes)
    return out


def test_cold_then_warm_equal_and_local(served, tmp_path):
    server, listing, blobs = served
    expected = b"".join(blobs[u.rsplit("/", 1)[1]] for u in listing.urls)
    reader = RemoteReader(None, cache_dir=tmp_path / "cache", cache_bytes="1MB", block_bytes=4096)
    cold = _read_all(reader, listing)
    gets = server.faults.gets
    warm = _read_all(reader, listing)
    assert cold.tobytes() == warm.tobytes() == expected
    assert server.faults.gets == gets  # the warm epoch sent no request
    assert reader.cache.hits > 0
    # a new reader (another process, a later run) on the same directory is warm too, for any sub-range
    again = RemoteReader(None, cache_dir=tmp_path / "cache", cache_bytes=10**6, block_bytes=4096)
    starts = listing.sizes // 3
    lengths = listing.sizes - starts - listing.sizes // 4
    part = _read_all(again, listing, starts, lengths)
    assert server.faults.gets == gets
    assert part.tobytes() == b"".join(blobs[u.rsplit("/", 1)[1]][s:s + n]
                                      for u, s, n in zip(listing.urls, starts, lengths))


def test_size_bound_and_eviction(served, tmp_path):
    server, listing, blobs = served
    bound = 30_000
    reader = RemoteReader(None, cache_dir=tmp_path / "cache", cache_bytes=bound, block_bytes=4096)
    for _ in range(2):
        out = _read_all(reader, listing)
        assert out.tobytes() == b"".join(blobs[u.rsplit("/", 1)[1]] for u in listing.urls)
        assert reader.cache.total_bytes() <= bound
    assert reader.cache.evicted > 0
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= bound
    assert not [p for p in files if p.suffix == ".tmp"]


def test_damaged_block_detected_and_refetched(served, tmp_path):
    server, listing, blobs = served
    reader = RemoteReader(None, cache_dir=tmp_path / "cache", cache_bytes="10MB", block_bytes=4096)
    _read_all(reader, listing)
    blocks = sorted((tmp_path / "cache").rglob("*.blk"))
    victim = blocks[len(blocks) // 2]
    raw = bytearray(victim.read_bytes())
    raw[-1] ^= 0xFF
    victim.write_bytes(bytes(raw))
    truncated = blocks[0]
    truncated.write_bytes(truncated.read_bytes()[:-1])
    gets = server.faults.gets
    out = _read_all(reader, listing)
    assert out.tobytes() == b"".join(blobs[u.rsplit("/", 1)[1]] for u in listing.urls)
    assert reader.cache.corrupt == 2
    assert server.faults.gets == gets + 2  # exactly the two damaged blocks were fetched again


def test_changed_etag_never_served_from_old_blocks(served, tmp_path):
    server, listing, blobs = served
    reader = RemoteReader(None, cache_dir=tmp_path / "cache", cache_bytes="10MB", block_bytes=4096)
    _read_all(reader, listing)
    k = listing.urls.index(server.url + "2.bin")
    new = bytes(reversed(blobs["2.bin"]))
    (server.root / "2.bin").write_bytes(new)
    relisted = list_objects(server.url)
    assert relisted.etags[k] != listing.etags[k]
    out = _read_all(reader, relisted)
    assert out.tobytes() == b"".join((new if u.endswith("/2.bin") else blobs[u.rsplit("/", 1)[1]])
                                     for u in relisted.urls)


def test_no_etag_no_cache_and_block_cache_api(served, tmp_path):
    server, listing, blobs = served
    reader = RemoteReader(None, cache_dir=tmp_path / "cache", cache_bytes="10MB", block_bytes=4096)
    out = np.zeros(int(listing.sizes.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(listing.sizes)[:-1]]).astype(np.int64)
    reader.read_ranges(listing.urls, np.zeros(len(listing), np.int64), listing.sizes, out, offsets)
    assert out.tobytes() == b"".join(blobs[u.rsplit("/", 1)[1]] for u in listing.urls)
    assert not list((tmp_path / "cache").rglob("*.blk"))  # nothing tells a stale copy without an ETag
    cache = BlockCache(tmp_path / "c2", 1000)
    key = block_key("s3://b/k", "etag", 5, 4096, 0)
    assert key != block_key("s3://b/k", "etag2", 5, 4096, 0)
    assert cache.get(key, 5) is None
    cache.put(key, b"hello")
    assert cache.get(key, 5) == b"hello" and cache.get(key, 4) is None  # wrong length: dropped as damaged
    cache.put(key, b"x" * 2000)  # larger than the whole bound: not stored
    assert cache.total_bytes() == 0
    with pytest.raises(InputError, match="remote_cache"):
        BlockCache(tmp_path / "c3", 0)
    with pytest.raises(InputError, match="remote_cache"):
        RemoteReader(None, cache_dir=tmp_path, cache_bytes="lots")
    assert os.path.isdir(tmp_path / "c2")
