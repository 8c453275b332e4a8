"""A local packed store read without the kernel's read-ahead (``readahead=False``, the default for a store bigger
than the memory the page cache can use): each batch's byte ranges are advised to the kernel, then copied out of
the memory map. The rows, the checks (chunk sums, ids, a damaged or rewritten store) and the loader's workers are
those of the default reading; the setting is validated, travels to worker processes, and is decided by size."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, FormatError, InputError
from consumer.sources import page_cache
from consumer.sources.page_cache import RowAdvice, page_cache_bytes, wants_readahead

from ..conftest import without_chunk_sums, write_corpus
from ..helpers.racing import evict_store as _evict

SIZES = {"a": list(range(3000, 12000, 450)), "b": list(range(3100, 12100, 450))}
KW = {"style": "concat", "seqlen": 512}


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("readahead")
    raw = Consumer(write_corpus(root / "data", SIZES, seed=11), cache_dir=False, n_bytes=2, metadata=None, **KW)
    out = {"sums": root / "sums", "none": root / "none", "pbin": root / "pbin"}
    raw.pack(out["sums"])
    raw.pack(out["none"])
    without_chunk_sums(out["none"])
    raw.pack(out["pbin"], format="modalities")
    return out


def _tokens(ds: Consumer):
    return ds.documents.source.tokens.tokens


def test_the_setting_reaches_the_token_store_and_is_validated(stores) -> None:
    assert _tokens(Consumer.from_packed(stores["sums"], **KW)).readahead  # a small store fits in memory
    off = Consumer.from_packed(stores["sums"], readahead=False, **KW)
    assert not _tokens(off).readahead and _tokens(off).mapped() is None and "readahead=False" in repr(_tokens(off))
    assert _tokens(off).advice._fd == -1
    off.fetch_numpy(np.array([1, 5]))
    assert _tokens(off).advice._fd >= 0  # the batch's ranges were advised
    assert _tokens(Consumer.from_packed(stores["sums"], readahead=True, **KW)).readahead
    for bad in ("no", 0, 1.0):
        with pytest.raises(InputError, match=rf"readahead must be None .* got {bad!r}"):
            Consumer.from_packed(stores["sums"], readahead=bad, **KW)
    with pytest.raises(InputError, match=r"from_packed got unexpected options \['read_ahead'\]"):
        Consumer.from_packed(stores["sums"], read_ahead=False, **KW)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.integers(0, 10 ** 6), min_size=1, max_size=30), min_size=1, max_size=3),
       key=st.sampled_from(["sums", "none", "pbin"]), out=st.sampled_from([np.int64, np.int32]),
       query=st.sampled_from([None, "supervised", "unsupervised"]))
def test_rows_without_readahead_are_the_rows_with_it(stores, batches, key, out, query) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the store without sums warns that it has none
        on = Consumer.from_packed(stores[key], **KW)
        off = Consumer.from_packed(stores[key], readahead=False, **KW)
    n = len(on)
    for batch in batches:
        ids = np.array([i % n for i in batch])
        _evict(stores[key])
        a = on.fetch_numpy(ids, out_dtype=out, query=query)
        b = off.fetch_numpy(ids, out_dtype=out, query=query)
        assert a.keys() == b.keys()
        for name in a:
            assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), name
    assert on[3]["input_array"].equal(off[3]["input_array"])


def test_a_damaged_chunk_and_a_bad_id_are_refused_without_readahead_too(tmp_path) -> None:
    raw = Consumer(write_corpus(tmp_path / "data", SIZES, seed=12), cache_dir=False, n_bytes=2, metadata=None, **KW)
    prefix = tmp_path / "store"
    raw.pack(prefix)
    with open(f"{prefix}.bin", "r+b") as f:
        f.seek(20000)
        old = f.read(1)
        f.seek(20000)
        f.write(bytes([old[0] ^ 1]))
    _evict(prefix)
    ds = Consumer.from_packed(prefix, readahead=False, **KW)
    with pytest.raises(FormatError, match=r"chunk 1 \(bytes 16384\.\.32768 of .*\): crc32c expected"):
        ds.fetch_numpy(np.arange(len(ds)))
    nosums = tmp_path / "nosums"
    raw.pack(nosums)
    without_chunk_sums(nosums)
    blob = bytearray(Path(f"{nosums}.bin").read_bytes())
    blob[4 * 5000:4 * 5001] = (70000).to_bytes(4, "little")
    Path(f"{nosums}.bin").write_bytes(bytes(blob))
    with pytest.warns(Warning, match="packed before per-chunk checksums"):
        bad = Consumer.from_packed(nosums, readahead=False, **KW)
    with pytest.raises(FormatError, match=r"token ids must be in \[0, 65542\), got \[70000\]"):
        bad.fetch_numpy(np.arange(len(bad)))


def test_loader_workers_keep_the_setting_and_serve_every_sample_once(stores) -> None:
    off = Consumer.from_packed(stores["sums"], readahead=False, **KW)
    every = off.fetch_numpy(np.arange(len(off)))["input_array"]
    again = pickle.loads(pickle.dumps(off))
    assert not _tokens(again).readahead
    _evict(stores["sums"])
    got = np.concatenate([b["input_array"].numpy() for b in
                          off.dataloader(8, num_workers=2, shuffle=True, drop_last=False)])
    assert sorted(map(bytes, got)) == sorted(map(bytes, every))


def test_readahead_is_decided_by_the_store_size_against_the_page_cache() -> None:
    assert wants_readahead(10, None, available=100) and not wants_readahead(101, None, available=100)
    assert wants_readahead(10 ** 15, True, available=1) and not wants_readahead(1, False, available=10 ** 15)
    assert 0 < page_cache_bytes() <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_memory_limits_are_read_from_meminfo_and_cgroups(tmp_path) -> None:
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n")
    assert page_cache._meminfo_available(str(info)) == 20000000 * 1024
    info.write_text("MemTotal: 5 kB\n")
    assert page_cache._meminfo_available(str(info)) is None
    assert page_cache._meminfo_available(str(tmp_path / "missing")) is None
    v2, v1 = tmp_path / "memory.max", tmp_path / "limit_in_bytes"
    v2.write_text("max\n")
    v1.write_text("9223372036854771712\n")  # cgroup v1's "no limit"
    assert page_cache._cgroup_limit((str(v2), str(v1))) is None
    v1.write_text("4294967296\n")
    assert page_cache._cgroup_limit((str(v2), str(v1))) == 1 << 32
    v2.write_text("1073741824\n")
    assert page_cache._cgroup_limit((str(v2), str(v1))) == 1 << 30


def test_row_advice_opens_its_file_per_process_and_pickles_without_a_descriptor(stores) -> None:
    advice = RowAdvice(f"{stores['sums']}.bin", 4, 0)
    advice.advise(np.array([0, 100, 7]), np.array([10, 0, 5]))
    assert advice._fd >= 0 and advice._pid == os.getpid()
    copy = pickle.loads(pickle.dumps(advice))
    assert copy._fd == -1 and (copy.data_file, copy.itemsize, copy.data_offset) == (advice.data_file, 4, 0)
    advice.close()
    assert advice._fd == -1
    gone = RowAdvice(str(stores["sums"]) + ".missing", 4)
    gone.advise(np.array([0]), np.array([1]))  # a hint: a file that cannot be opened is no error
    assert gone._fd == -1
