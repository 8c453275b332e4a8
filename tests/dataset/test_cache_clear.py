"""``consumer cache clear`` removes every file the library wrote into a cache directory and nothing else: index
entries and their lock file, the catalog with its claims file (``--catalog``), remote blocks, remote-store
copies and shared-build hand-offs; a user's files (next to ours and inside our folders) survive, and a lock
file a running process holds is left in place with a warning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from consumer import Consumer, ConsumerWarning, clear_cache
from consumer.cli.main import main
from consumer.dataset.clear import READ_THROUGH_DIR
from consumer.sources.block_cache import BlockCache, block_key
from consumer.storage import Storage
from consumer.util.fileio import atomic_write_bytes
from consumer.util.locks import RangeLocks

STRAYS = ("notes.txt", "catalog.sqlite.backup", "index.lock.old", "index/README", "ranks/mine.json",
          f"{READ_THROUGH_DIR}/remote-v1/ab/keep.txt", "packed-remote-v1/" + "c" * 40 + "/extra.bin", "mine/data.bin")


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _filled(corpus_dir: str, root: Path) -> Path:
    """A cache directory as the library leaves it (and as a crash may leave it), plus a user's stray files."""
    with Consumer(corpus_dir, cache_dir=root) as ds:  # index entry, index.lock, catalog
        ds.sql("SELECT sha256 FROM files LIMIT 1")     # the content pass: catalog.sqlite.claims
    blocks = BlockCache(Storage.of(None, str(root), "1MB").read_through_dir(), 1 << 20)
    blocks.put(block_key("s3://b/o", "etag", 5, 4, 0), b"abcd")
    (root / "ranks").mkdir()
    atomic_write_bytes(root / "ranks" / ("a" * 32 + ".json"), b"{}")        # a hand-off a crashed rank 0 left
    mirror = root / "packed-remote-v1" / ("b" * 40)                         # a remote store's index copy
    mirror.mkdir(parents=True)
    for name in ("store.idx", "store.consumer.npz", "store.consumer.sums"):
        atomic_write_bytes(mirror / name, b"x")
    (root / "index" / ".entry.0123456789ab.tmp").mkdir()                    # an interrupted entry write
    (root / "catalog.sqlite.corrupt-20260101-120000").write_bytes(b"bad")   # a catalog moved aside
    for stray in STRAYS:
        (root / stray).parent.mkdir(parents=True, exist_ok=True)
        (root / stray).write_text("the user's")
    return root


def test_clear_removes_every_file_of_ours_and_nothing_else(corpus_dir, tmp_path):
    root = _filled(corpus_dir, tmp_path / "cache")
    before = _files(root)
    for ours in ("index.lock", "catalog.sqlite", "catalog.sqlite.claims", "ranks/" + "a" * 32 + ".json",
                 "packed-remote-v1/" + "b" * 40 + "/store.idx"):
        assert ours in before, ours
    assert any(f.endswith(".blk") for f in before) and any(f.endswith("/description.json") for f in before)
    assert clear_cache(str(root)) > 0
    kept = _files(root)
    assert kept == set(STRAYS) | {"catalog.sqlite", "catalog.sqlite.claims", "catalog.sqlite.corrupt-20260101-120000"}
    assert not (root / "index" / ".entry.0123456789ab.tmp").exists()
    assert main(["cache", "clear", "--cache-dir", str(root), "--catalog"]) == 0
    assert _files(root) == set(STRAYS)
    assert {p.name for p in root.iterdir()} == {"notes.txt", "catalog.sqlite.backup", "index.lock.old", "index",
                                                "ranks", READ_THROUGH_DIR, "packed-remote-v1", "mine"}
    assert not (root / "packed-remote-v1" / ("b" * 40)).exists()  # our empty folders go, the user's stay


def test_clear_leaves_a_lock_file_a_running_process_holds(corpus_dir, tmp_path):
    root = tmp_path / "cache"
    Consumer(corpus_dir, cache_dir=root).close()
    held = RangeLocks(str(root / "index.lock"))
    assert held.try_lock([7]) == {7}  # a build claim in progress
    try:
        with pytest.warns(ConsumerWarning, match=r"cache clear: '.*index\.lock' is held by a running process; "
                                                 r"left in place"):
            clear_cache(str(root), catalog=True)
        assert _files(root) == {"index.lock"}
    finally:
        held.close()
    clear_cache(str(root))
    assert not root.exists() or _files(root) == set()


def test_clear_of_a_missing_or_foreign_directory_removes_nothing(tmp_path):
    assert clear_cache(str(tmp_path / "nothing")) == 0
    foreign = tmp_path / "foreign"
    (foreign / "index" / ("d" * 64)).mkdir(parents=True)  # our name, but no description.json of ours
    (foreign / "index" / ("d" * 64) / "description.json").write_text("{}")
    (foreign / "remote" / "remote-v1" / "zz").mkdir(parents=True)
    (foreign / "remote" / "remote-v1" / "zz" / ("e" * 64 + ".blk")).write_bytes(b"1")  # not a block folder name
    before = _files(foreign)
    assert clear_cache(str(foreign), catalog=True) == 0 and _files(foreign) == before
    assert os.path.isdir(foreign / "remote" / "remote-v1" / "zz")
