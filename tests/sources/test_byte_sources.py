"""The ByteSource interface and its implementations on real files: what the reader, the build and the SQL session
rely on (ranges read exactly, one version of a file or an error, capabilities), and the one place that chooses a
source (open_source / reopen_source / locate_store) with its refusals."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.errors import FileChangedError, InputError
from consumer.sources.local import LocalFiles
from consumer.sources.open import StoreLocation, check_root, locate_store, open_source, reopen_source
from consumer.sources.store import StoreFiles
from consumer.sources.token_store import MappedTokens
from consumer.storage import Storage

from ..conftest import write_corpus
from ..helpers.ranges import MALFORMED_RANGES


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    sizes = {"a": [0, 1, 5000, 70_000], "b": [3, 1 << 20]}
    fps = write_corpus(tmp_path / "data", sizes, seed=3)
    return [p for c in sorted(fps) for p in fps[c]]


def _bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_read_ranges_copies_exactly_the_bytes_asked_for(tmp_path_factory, data) -> None:
    root = tmp_path_factory.mktemp("ranges")
    fps = write_corpus(root, {"a": [0, 7, 300, 4097], "b": [1, 65_536]}, seed=1)
    paths = [p for c in sorted(fps) for p in fps[c]]
    source = open_source(paths, Storage.of(cache_dir=False))
    contents = [_bytes(p) for p in paths]
    n = data.draw(st.integers(0, 12))
    ids = np.array(data.draw(st.lists(st.integers(0, len(paths) - 1), min_size=n, max_size=n)), dtype=np.int64)
    offsets, lengths = [], []
    for i in ids.tolist():
        size = len(contents[i])
        lo = data.draw(st.integers(0, size))
        offsets.append(lo)
        lengths.append(data.draw(st.integers(0, size - lo)))
    at = np.cumsum([0] + lengths[:-1]).astype(np.int64) if n else np.zeros(0, dtype=np.int64)
    out = np.full(sum(lengths) + 3, 0xEE, dtype=np.uint8)
    source.read_ranges(ids, np.array(offsets, dtype=np.int64), np.array(lengths, dtype=np.int64), out, at)
    expected = b"".join(contents[i][lo:lo + m] for i, lo, m in zip(ids.tolist(), offsets, lengths))
    assert out[:len(expected)].tobytes() == expected and out[len(expected):].tobytes() == b"\xee" * 3


@pytest.mark.parametrize("as_list", [False, True])
def test_runs_of_ranges_of_one_file_read_exactly(files, as_list) -> None:
    # ranges of one file next to each other share one open: every range of the run still gets its own bytes
    source = open_source(files, Storage.of(cache_dir=False))
    contents = [_bytes(p) for p in files]
    ids = [5, 5, 5, 3, 2, 2, 5, 5]
    offsets = [0, 1000, 500_000, 70_000 - 9, 4999, 0, (1 << 20) - 1, 7]
    lengths = [10, 100, 20_000, 9, 1, 5000, 1, 0]
    at = np.cumsum([0] + lengths[:-1]).tolist()
    out = np.zeros(sum(lengths), dtype=np.uint8)
    args = (ids, offsets, lengths, out, at) if as_list else \
        (np.array(ids), np.array(offsets), np.array(lengths), out, np.array(at))
    source.read_ranges(*args)
    assert out.tobytes() == b"".join(contents[i][o:o + n] for i, o, n in zip(ids, offsets, lengths))
    victim = files[2]  # rewritten after listing: refused for the whole run, its first range included
    with open(victim, "r+b") as f:
        f.write(b"\x00")
    with pytest.raises(FileChangedError, match="changed since the build"):
        source.read_ranges(np.array([2, 2]), np.array([0, 10]), np.array([5, 5]), np.zeros(10, np.uint8),
                           np.array([0, 5]))


def test_iter_chunks_streams_a_whole_file_in_bounded_pieces(files) -> None:
    source = open_source(files, Storage.of(cache_dir=False))
    for i, p in enumerate(files):
        pieces = [bytes(b) for b in source.iter_chunks(i, chunk=4096)]
        assert b"".join(pieces) == _bytes(p) and all(len(b) <= 4096 for b in pieces)


def test_a_file_rewritten_after_listing_is_refused_not_served(files) -> None:
    source = open_source(files, Storage.of(cache_dir=False))
    victim = files[2]
    data = _bytes(victim)
    st0 = os.stat(victim)
    with open(victim, "r+b") as f:  # same size, new content: only the change stamp tells
        f.write(bytes(255 - b for b in data[:10]))
    os.utime(victim, ns=(st0.st_atime_ns, st0.st_mtime_ns))  # even with the mtime put back (ctime moved)
    out = np.zeros(16, dtype=np.uint8)
    with pytest.raises(FileChangedError, match="changed since the build"):
        source.read_ranges(np.array([2]), np.array([0]), np.array([16]), out, np.array([0]))
    assert not out.any()  # nothing of it was served


def test_a_write_during_streaming_is_caught_at_the_end(files) -> None:
    source = open_source(files, Storage.of(cache_dir=False))
    big = files.index(max(files, key=os.path.getsize))
    chunks = source.iter_chunks(big, chunk=1 << 16)
    next(chunks)
    with open(files[big], "r+b") as f:  # the first half was read as the old version: the answer would be mixed
        f.seek(os.path.getsize(files[big]) - 1)
        f.write(b"\x00")
    with pytest.raises(FileChangedError):
        for _ in chunks:
            pass


@pytest.mark.parametrize("ids, offsets, lengths, out, at, match", MALFORMED_RANGES)
def test_malformed_ranges_are_refused_with_the_bad_value(files, ids, offsets, lengths, out, at, match) -> None:
    source = open_source(files, Storage.of(cache_dir=False))
    with pytest.raises(InputError, match=match):
        source.read_ranges(np.array(ids), np.array(offsets), np.array(lengths), out, np.array(at))


def test_subset_and_pickle_keep_the_files_and_their_versions(files) -> None:
    source = open_source(files, Storage.of(cache_dir=False))
    sub = source.subset(np.array([5, 2]))
    assert list(sub.paths) == [files[5], files[2]] and sub.sizes.tolist() == [source.sizes[5], source.sizes[2]]
    again = pickle.loads(pickle.dumps(sub))
    out = np.zeros(10, dtype=np.uint8)
    again.read_ranges(np.array([1]), np.array([0]), np.array([10]), out, np.array([0]))
    assert out.tobytes() == _bytes(files[2])[:10]
    assert reopen_source(sub.paths, sub.sizes, sub.stamps, sub.handoff(), Storage.of(cache_dir=False)).kind == \
        "local files"


def test_local_files_are_described_by_libmagic_by_path(files) -> None:
    source = open_source(files, Storage.of(cache_dir=False))
    (desc, mime), = list(source.describe([files[0]], kinds=("description", "mime")))
    assert desc == "empty" and mime.endswith("/x-empty")  # inode/x-empty or application/x-empty by version


def test_open_source_chooses_once_and_refuses_what_a_kind_cannot_do(files) -> None:
    local = open_source(files, Storage.of(cache_dir=False))
    assert isinstance(local, LocalFiles) and local.choose(files=lambda s: s, store=lambda t: t) is local
    assert local.bytes_for("duplicates()") is local
    with pytest.raises(InputError, match="mixes URLs and local paths"):
        open_source([files[0], "s3://bucket/x"], Storage.of(cache_dir=False))
    with pytest.raises(InputError, match="storage_options / remote_cache are for URLs"):
        open_source(files, Storage.of({"anon": True}, cache_dir=False))
    with pytest.raises(InputError, match="handoff"):
        reopen_source(local.paths, local.sizes, local.stamps, {"kind": "tape"}, Storage.of(cache_dir=False))


def test_locate_store_and_check_root(tmp_path) -> None:
    assert locate_store(str(tmp_path / "s"), Storage.of(cache_dir=False)) == StoreLocation("local", str(tmp_path / "s"))
    assert locate_store(f"file://{tmp_path}/s", Storage.of(cache_dir=False)) == StoreLocation("local", f"{tmp_path}/s")
    assert locate_store("s3://bucket/s", Storage.of(cache_dir=False)) == StoreLocation("objects", "s3://bucket/s")
    with pytest.raises(InputError, match="are for stores at URLs"):
        locate_store(str(tmp_path / "s"), Storage.of({"anon": True}, cache_dir=False))
    assert check_root("s3://bucket/data") == "s3://bucket/data"
    with pytest.raises(InputError, match="DIR: directory not found"):
        check_root(str(tmp_path / "missing"))
    with pytest.raises(InputError, match="IN: directory not found"):
        check_root("s3://bucket/data", "IN", urls=False)


def test_a_packed_store_offers_tokens_and_refuses_bytes(tmp_path, corpus) -> None:
    ds = Consumer(corpus, cache_dir=False, seqlen=64)
    ds.pack(tmp_path / "store" / "c")
    packed = Consumer.from_packed(tmp_path / "store" / "c")
    source = packed.documents.source
    assert isinstance(source, StoreFiles) and source.choose(files=lambda s: s, store=lambda t: t) is source.tokens
    assert isinstance(source.tokens.tokens, MappedTokens) and source.kind == "in a packed store"
    with pytest.raises(InputError, match="not read"):
        source.read_ranges(np.array([0]), np.array([0]), np.array([1]), np.zeros(1, np.uint8), np.array([0]))
    with pytest.raises(InputError, match="not described by libmagic"):
        list(source.describe([source.paths[0]], kinds=("mime",)))
    with pytest.raises(InputError, match="duplicates\\(\\) \\(the content pass\\) reads the bytes of the files; "
                                         "this dataset's files are in a packed store"):
        packed.duplicates()


@pytest.mark.parametrize("kwargs, match", [
    ({"storage_options": "anon"}, "storage_options must be a dict"),
    ({"remote_cache": "1GB", "cache_dir": False}, "remote_cache needs a cache_dir"),
    ({"remote_cache": "lots"}, "remote_cache"),
    ({"cache_dir": "s3://bucket/cache"}, "cache_dir must be a local directory"),
])
def test_storage_is_validated_once_with_the_argument_named(kwargs, match) -> None:
    with pytest.raises(InputError, match=match):
        Storage.of(**kwargs)


def test_storage_never_prints_its_options_and_refuses_unknown_keywords(tmp_path) -> None:
    storage = Storage.of({"key": "SECRET", "secret": "SECRET"}, tmp_path, "1MB")
    assert "SECRET" not in repr(storage) and storage.remote_cache == 10**6 and not storage.local_only
    assert storage.read_through_dir() == os.path.join(str(tmp_path), "remote")
    with pytest.raises(InputError, match=r"from_packed got unexpected options \['verbose'\]"):
        Storage.from_kwargs({"verbose": True}, "from_packed")


def test_streaming_an_empty_file_still_checks_its_version(files) -> None:
    source = open_source(files, Storage.of(cache_dir=False))
    empty = files.index(min(files, key=os.path.getsize))
    assert source.sizes[empty] == 0 and [bytes(b) for b in source.iter_chunks(empty)] == []
    with open(files[empty], "ab") as f:  # grown since it was listed: no answer from the old empty version
        f.write(b"new")
    with pytest.raises(FileChangedError, match="longer than at build time"):
        list(source.iter_chunks(empty))


def _reopened(files: list[str]) -> LocalFiles:
    """The files as another process reopens them from an index cache entry: sizes and stamps, no inodes."""
    listed = open_source(files, Storage.of(cache_dir=False))
    source = reopen_source(listed.paths, listed.sizes, listed.stamps, listed.handoff(), Storage.of(cache_dir=False))
    assert isinstance(source, LocalFiles) and source.ident is None
    return source


@pytest.mark.parametrize("as_list", [False, True])  # an array of ids, and a few ids as a list (the small-batch path)
def test_a_reopened_source_without_inodes_reads_exactly_and_keeps_every_check(files, as_list) -> None:
    source = _reopened(files)
    ids, offsets, lengths = [2, 3, 5], [100, 0, 1 << 19], [200, 3, 1000]

    def read(out: np.ndarray) -> None:
        at = [0, 200, 203]
        cols = (ids, offsets, lengths, at) if as_list else (np.array(x, dtype=np.int64) for x in (ids, offsets,
                                                                                                  lengths, at))
        i, o, n, a = cols
        source.read_ranges(i, o, n, out, a)

    out = np.zeros(1203, dtype=np.uint8)
    read(out)
    assert out.tobytes() == b"".join(_bytes(files[i])[lo:lo + m] for i, lo, m in zip(ids, offsets, lengths))
    victim = files[3]  # 70,000 bytes: rewritten in place, same size, its mtime put back (only the ctime moved)
    st0 = os.stat(victim)
    with open(victim, "r+b") as f:
        f.write(b"\x00" * 10)
    os.utime(victim, ns=(st0.st_atime_ns, st0.st_mtime_ns))
    with pytest.raises(FileChangedError, match="changed since the build"):
        read(np.zeros(1203, dtype=np.uint8))
    source = _reopened(files)  # listed again: this version is the one indexed
    read(np.zeros(1203, dtype=np.uint8))
    with open(victim, "ab") as f:  # grown since
        f.write(b"more")
    with pytest.raises(FileChangedError, match="longer than at build time"):
        read(np.zeros(1203, dtype=np.uint8))
    os.remove(victim)
    os.mkdir(victim)  # not a regular file any more
    with pytest.raises(FileChangedError, match="Is a directory|not a regular file"):
        read(np.zeros(1203, dtype=np.uint8))
