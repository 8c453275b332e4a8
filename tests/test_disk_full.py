"""Full disks and small quotas: a cache write, a catalog write, a pack and a content pass that run out of room.

Two real limits, each scenario under both:

- ``tmpfs``: the artefacts live on a small tmpfs mounted for the test (``mount -t tmpfs -o size=16m``; skipped
  where the test may not mount), filled up (``posix_fallocate``) to leave a few KiB just before the step that
  must fail: the kernel answers ``ENOSPC``;
- ``fsize``: the step runs in a forked child whose ``RLIMIT_FSIZE`` is below what it writes, with ``SIGXFSZ``
  ignored so that the write fails with ``EFBIG`` instead of killing the process.

Each step must fail with :class:`StorageFullError` naming the path and the bytes needed, leave nothing
partial (no temporary file; the catalog passes ``PRAGMA integrity_check``), leave the previous state usable
(the old cache entry, the old catalog rows, the old store), and a rerun with room gives output identical to
a run that never failed.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer, StorageFullError, verify_packed
from consumer.catalog.catalog import Catalog
from consumer.dataset.cache import entry_contents, load_entry
from consumer.util.fileio import is_temp_name

from .conftest import write_corpus

FILES = {"a": [300 + 7 * i for i in range(300)], "b": [200 + 11 * i for i in range(300)]}  # 600 files, ~1 MB
FIRST = 50  # files per class of the earlier, smaller state
MODES = ["tmpfs", "fsize"]
NEW = {"metadata": None, "style": "concat", "seqlen": 16}  # an index of 60,000 samples: arrays of 240 KB+


# ------------------------------------------------------------------------------------------------ limits


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs mounted at ``tmp_path/disk`` (skipped where mounting is not allowed)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(disk: Path, leave: int) -> Path:
    """Take all the free space of ``disk`` but ``leave`` bytes."""
    st = os.statvfs(disk)
    filler = disk / f"filler-{uuid.uuid4().hex}"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        os.posix_fallocate(fd, 0, max(st.f_bavail * st.f_frsize - leave, 1))
    finally:
        os.close(fd)
    return filler


def _in_child_with_fsize(limit: int, step: Callable[[], object]) -> tuple[str, str] | None:
    """Run ``step`` in a forked child limited to files of ``limit`` bytes; (error class, message) or None."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing us
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        try:
            step()
            send.send(None)
        except BaseException as e:  # noqa: BLE001  (sent to the parent)
            send.send((type(e).__name__, f"{e}\n{traceback.format_exc()}"))

    proc = ctx.Process(target=child)
    proc.start()
    got = recv.recv() if recv.poll(120) else ("Timeout", "the child did not answer")
    proc.join(30)
    assert proc.exitcode == 0, proc.exitcode
    return got


def _failing(mode: str, where: Path, step: Callable[[], object], *, fsize: int, leave: int = 16 << 10) -> str:
    """Run ``step`` out of room (``mode``): it must raise StorageFullError; returns its message."""
    if mode == "fsize":
        got = _in_child_with_fsize(fsize, step)
        assert got is not None, "the step succeeded under the file-size limit"
        name, message = got
        assert name == "StorageFullError", message
        assert "file size limit" in message and f"RLIMIT_FSIZE) {fsize} bytes" in message, message
        return message
    filler = _fill(where, leave)
    try:
        with pytest.raises(StorageFullError) as info:
            step()
        assert "no space left on the device" in str(info.value)
        return str(info.value)
    finally:
        filler.unlink()


def _artefacts_root(mode: str, tmp_path: Path, request) -> Path:
    if mode == "tmpfs":
        return request.getfixturevalue("small_disk")
    root = tmp_path / "artefacts"
    root.mkdir()
    return root


def _no_temporaries(root: Path) -> None:
    left = [os.path.join(d, n) for d, dirs, files in os.walk(root) for n in dirs + files if is_temp_name(n)]
    assert not left, left


def _catalog_ok(cache: Path) -> list[tuple]:
    conn = sqlite3.connect(f"file:{cache / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    catalog = Catalog(str(cache / "catalog.sqlite"))
    try:
        return sorted(catalog.verified_rows())
    finally:
        catalog.close()


def _subset(fps: dict[str, list[str]], k: int) -> dict[str, list[str]]:
    return {c: ps[:k] for c, ps in fps.items()}


def _rows(ds: Consumer) -> np.ndarray:
    return ds.fetch_numpy(np.arange(len(ds)), ["input_array"])["input_array"]


@pytest.fixture
def corpus(tmp_path) -> dict[str, list[str]]:
    return write_corpus(tmp_path / "data", FILES)


# ----------------------------------------------------------------------------------------------- the steps


@pytest.mark.parametrize("mode", MODES)
def test_an_index_cache_write_out_of_room(mode, tmp_path, corpus, request):
    root = _artefacts_root(mode, tmp_path, request)
    cache = root / "cache"
    old = Consumer(corpus, cache_dir=cache, metadata=None, seqlen=64)
    old_key, old_rows = old.build_info["key"], _rows(old)
    old.close()

    message = _failing(mode, root, lambda: Consumer(corpus, cache_dir=cache, **NEW), fsize=128 << 10)
    assert str(cache) in message and "bytes needed" in message and "cache_dir" in message
    _no_temporaries(root)
    assert [p.name for p in (cache / "index").iterdir()] == [old_key]  # only the old entry, whole
    again = Consumer(corpus, cache_dir=cache, metadata=None, seqlen=64)
    assert again.build_info["cache"] == "hit" and np.array_equal(_rows(again), old_rows)

    rerun = Consumer(corpus, cache_dir=cache, **NEW)  # room again
    never = Consumer(corpus, cache_dir=tmp_path / "never-failed", **NEW)
    assert rerun.build_info["cache"] == "miss" and rerun.build_info["key"] == never.build_info["key"]
    ours, theirs = load_entry(str(cache), rerun.build_info["key"]), load_entry(str(tmp_path / "never-failed"),
                                                                               never.build_info["key"])
    assert ours is not None and theirs is not None
    assert ours[0].keys() == theirs[0].keys() and all(np.array_equal(ours[0][k], theirs[0][k]) for k in ours[0])
    assert entry_contents(ours[1]) == entry_contents(theirs[1])


@pytest.mark.parametrize("mode", MODES)
def test_a_catalog_write_out_of_room(mode, tmp_path, corpus, request):
    root = _artefacts_root(mode, tmp_path, request)
    cache = root / "cache"  # metadata="file": a build writes catalog rows only when it computes a libmagic column
    Consumer(_subset(corpus, FIRST), cache_dir=cache, metadata="file", seqlen=64).close()
    before = _catalog_ok(cache)
    assert len(before) == 2 * FIRST

    message = _failing(mode, root, lambda: Consumer(corpus, cache_dir=cache, metadata="file", seqlen=64),
                       fsize=64 << 10, leave=8 << 10)
    assert str(cache / "catalog.sqlite") in message and "bytes needed" in message
    _no_temporaries(root)
    assert _catalog_ok(cache) == before  # rolled back: the old rows, verified
    assert not [n for n in os.listdir(cache) if ".corrupt" in n]  # not mistaken for damage

    rerun = Consumer(corpus, cache_dir=cache, metadata="file", seqlen=64)
    never_cache = tmp_path / "never-failed"
    Consumer(_subset(corpus, FIRST), cache_dir=never_cache, metadata="file", seqlen=64).close()
    never = Consumer(corpus, cache_dir=never_cache, metadata="file", seqlen=64)
    assert _catalog_ok(cache) == _catalog_ok(never_cache)
    assert np.array_equal(_rows(rerun), _rows(never))


@pytest.mark.parametrize("mode", MODES)
def test_a_content_pass_out_of_room(mode, tmp_path, corpus, request):
    root = _artefacts_root(mode, tmp_path, request)
    cache = root / "cache"
    sql = "SELECT path, sha256, entropy, printable, zeros, hex(histogram) FROM files ORDER BY path"
    ds = Consumer(corpus, cache_dir=cache, metadata=None, seqlen=64)
    ds.sql("SELECT count(description), count(mime) FROM files")  # libmagic columns now; only the content pass fails
    ds.close()
    before = _catalog_ok(cache)

    def content_pass():
        ds = Consumer(corpus, cache_dir=cache, metadata=None, seqlen=64)
        return ds.sql(sql)

    message = _failing(mode, root, content_pass, fsize=256 << 10, leave=8 << 10)
    assert str(cache / "catalog.sqlite") in message and "bytes needed" in message
    _no_temporaries(root)
    after = _catalog_ok(cache)  # parts committed before the failure stay; every row is whole and verified
    assert len(after) == len(before) and [r[:7] for r in after] == [r[:7] for r in before]

    rerun = Consumer(corpus, cache_dir=cache, metadata=None, seqlen=64).sql(sql)
    never = Consumer(corpus, cache_dir=False, metadata=None, seqlen=64).sql(sql)
    assert list(rerun) == list(never)


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
@pytest.mark.parametrize("mode", MODES)
def test_a_pack_out_of_room(mode, fmt, tmp_path, corpus, request):
    root = _artefacts_root(mode, tmp_path, request)
    prefix = root / "store"
    small = Consumer(_subset(corpus, FIRST), cache_dir=False, metadata=None, seqlen=64)
    small.pack(prefix, format=fmt)
    (tmp_path / "copy").mkdir()
    small.pack(tmp_path / "copy" / "store", format=fmt)
    old_files = {p.name: p.read_bytes() for p in root.iterdir() if p.name.startswith("store")}
    ds = Consumer(corpus, cache_dir=False, metadata=None, seqlen=64)

    message = _failing(mode, root, lambda: ds.pack(prefix, format=fmt), fsize=256 << 10, leave=64 << 10)
    assert str(prefix) in message and "bytes needed" in message
    _no_temporaries(root)
    assert {p.name: p.read_bytes() for p in root.iterdir() if p.name.startswith("store")} == old_files
    assert verify_packed(prefix)["checksum"] == "ok"  # the old store, whole
    reopened = Consumer.from_packed(prefix, seqlen=64)
    assert np.array_equal(_rows(reopened), _rows(Consumer.from_packed(tmp_path / "copy" / "store", seqlen=64)))
    reopened.close()

    ds.pack(prefix, format=fmt)  # room again
    (tmp_path / "never").mkdir()
    ds.pack(tmp_path / "never" / "store", format=fmt)
    ours = {p.name: p.read_bytes() for p in root.iterdir() if p.name.startswith("store")}
    theirs = {p.name: p.read_bytes() for p in (tmp_path / "never").iterdir()}
    side = "store.consumer.json"
    assert ours.keys() == theirs.keys()
    assert all(ours[k] == theirs[k] for k in ours if k != side)
    assert ours[side].replace(str(root).encode(), b"") == theirs[side].replace(str(tmp_path / "never").encode(), b"")


def test_a_pack_whose_sidecar_does_not_fit_keeps_the_old_store(tmp_path, corpus, small_disk):
    """Room for the new store's data files but not for its sidecar: the pack fails before it touches the old
    store (every file, the sidecar included, is written under temporary names first)."""
    prefix = small_disk / "store"
    small = Consumer(_subset(corpus, FIRST), cache_dir=False, metadata=None, seqlen=64)
    small.pack(prefix)
    old_files = {p.name: p.read_bytes() for p in small_disk.iterdir()}
    ds = Consumer(corpus, cache_dir=False, metadata=None, seqlen=64)
    (tmp_path / "never").mkdir()
    ds.pack(tmp_path / "never" / "store")
    pages = sum(-(-p.stat().st_size // 4096) * 4096 for p in (tmp_path / "never").iterdir()
                if not p.name.endswith(".consumer.json"))
    message = _failing("tmpfs", small_disk, lambda: ds.pack(prefix), fsize=0, leave=pages)
    assert str(prefix) in message
    _no_temporaries(small_disk)
    assert {p.name: p.read_bytes() for p in small_disk.iterdir()} == old_files
    assert verify_packed(prefix)["checksum"] == "ok"
