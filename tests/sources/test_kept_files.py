"""Local files keep their descriptors open between reads (consumer/sources/kept_files.py), and every check stays:
a file written in place, truncated, appended to, replaced by a rename, removed or swapped for a link after reads
were served raises FileChangedError naming it at the next read; a forked child and a pickled copy read with their
own descriptors; the descriptors kept stay bounded, and close() and garbage collection close them."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

from consumer.errors import FileChangedError
from consumer.sources.kept_files import KEEP_OPEN, KeptFiles, keep_limit
from consumer.sources.local import LocalFiles

from ..helpers.descriptors import held_under
from ..helpers.racing import PREADV, race_preadv

CHANGES = ["rewrite", "truncate", "append", "rename-over", "delete", "symlink"]
MESSAGES = {"rewrite": "changed since the build", "truncate": "shorter than at build time",
            "append": "longer than at build time", "rename-over": "another file now",
            "delete": "no longer there", "symlink": "a device now|another file now"}


def _write_files(root: Path, n: int, size: int = 3000) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(n)
    paths = []
    for k in range(n):
        p = root / f"f{k:04d}.bin"
        p.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        paths.append(str(p))
    return paths


def change_file(path: str, how: str) -> None:
    """Change ``path`` the way ``how`` names (see CHANGES)."""
    data = Path(path).read_bytes()
    st = os.stat(path)
    if how == "rewrite":  # same size, other bytes, the mtime put back (only the ctime tells)
        with open(path, "r+b") as f:
            f.write(bytes(255 - b for b in data[:16]))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif how == "truncate":
        os.truncate(path, len(data) // 2)
    elif how == "append":
        with open(path, "ab") as f:
            f.write(b"more")
    elif how == "rename-over":  # the very same bytes, in a new file renamed over the old one
        Path(path + ".new").write_bytes(data)
        os.replace(path + ".new", path)
    elif how == "delete":
        os.remove(path)
    else:
        os.remove(path)
        os.symlink("/dev/zero", path)


def _read(source: LocalFiles, ids: list[int], length: int = 100) -> np.ndarray:
    out = np.zeros(len(ids) * length, dtype=np.uint8)
    n = len(ids)
    source.read_ranges(np.array(ids), np.full(n, 7), np.full(n, length), out, np.arange(n) * length)
    return out


def _want(paths: list[str], ids: list[int], length: int = 100) -> bytes:
    return b"".join(Path(paths[i]).read_bytes()[7:7 + length] for i in ids)


@pytest.mark.parametrize("how", CHANGES)
def test_a_file_changed_after_reads_were_served_is_refused_at_the_next_read(tmp_path, how) -> None:
    paths = _write_files(tmp_path / "d", 12)
    source = LocalFiles.listed(paths)
    ids = list(range(12))
    for _ in range(2):  # the second read of a kept file takes its snapshot: the third compares with it
        assert _read(source, ids).tobytes() == _want(paths, ids)
    assert len(source.kept) == 12 and all(e.snapshot is not None for e in source.kept.entries.values())
    change_file(paths[5], how)
    with pytest.raises(FileChangedError, match=MESSAGES[how]) as info:
        _read(source, ids)
    assert "f0005.bin" in str(info.value)
    with pytest.raises(FileChangedError, match="f0005.bin"):  # and again: the changed file is never served
        _read(source, [5])
    assert _read(source, [4, 6]).tobytes() == _want(paths, [4, 6])  # the others still are


@pytest.mark.parametrize("how", ["rewrite", "truncate", "rename-over", "delete"])
def test_a_file_changed_after_one_read_is_refused_too(tmp_path, how) -> None:
    """Changed after its first read (kept, no snapshot yet: the full check)."""
    paths = _write_files(tmp_path / "d", 3)
    source = LocalFiles.listed(paths)
    _read(source, [0, 1, 2])
    change_file(paths[1], how)
    with pytest.raises(FileChangedError, match="f0001.bin"):
        _read(source, [1])


def test_a_moved_access_time_is_not_a_change(tmp_path) -> None:
    paths = _write_files(tmp_path / "d", 2)
    source = LocalFiles.listed(paths)
    _read(source, [0, 1])
    _read(source, [0, 1])
    st = os.stat(paths[0])
    os.utime(paths[0], ns=(st.st_atime_ns + 10**9, st.st_mtime_ns))  # the ctime moves too: that is a change
    with pytest.raises(FileChangedError):
        _read(source, [0])
    assert _read(source, [1]).tobytes() == _want(paths, [1])


def test_kept_descriptors_stay_bounded_and_close_and_gc_close_them(tmp_path) -> None:
    paths = _write_files(tmp_path / "d", 3 * KEEP_OPEN, size=200)
    gc.collect()  # the sources of earlier tests closed
    before = held_under(tmp_path)
    source = LocalFiles.listed(paths)
    limit = source.kept.limit
    assert 1 <= limit <= KEEP_OPEN and limit == keep_limit()
    ids = list(range(len(paths)))
    for _ in range(2):
        assert _read(source, ids).tobytes() == _want(paths, ids)
        assert len(source.kept) == limit and held_under(tmp_path) <= before + limit
    source.close()
    assert len(source.kept) == 0 and held_under(tmp_path) == before
    assert _read(source, ids[:5]).tobytes() == _want(paths, ids[:5])  # reopened when used again
    assert held_under(tmp_path) == before + 5
    del source
    gc.collect()
    assert held_under(tmp_path) == before


_LOW_LIMIT = r"""
import os, resource, sys
import numpy as np
from consumer.sources.kept_files import keep_limit
from consumer.sources.local import LocalFiles
paths = sys.argv[1:]
resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
assert keep_limit() == 8, keep_limit()
source = LocalFiles.listed(paths)
assert source.kept.limit == 8
out = np.zeros(10, dtype=np.uint8)
for i in range(8):
    source.read_ranges([i], [0], [10], out, [0])
hog = []
try:  # every other descriptor taken: the next open fails with EMFILE
    while True:
        hog.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
source.read_ranges([len(paths) - 1], [0], [10], out, [0])  # the kept ones are closed, the open tried again
assert out.tobytes() == open(paths[-1], "rb").read()[:10]
assert len(source.kept) == 1
print("ok")
"""


def test_a_low_descriptor_limit_keeps_fewer_and_a_read_out_of_descriptors_frees_them(tmp_path) -> None:
    paths = _write_files(tmp_path / "d", 9, size=50)
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "-c", _LOW_LIMIT, *paths], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_small_limit_evicts_the_least_recently_used(tmp_path) -> None:
    paths = _write_files(tmp_path / "d", 5)
    source = LocalFiles.listed(paths)
    source._kept = KeptFiles(limit=2)
    for ids in ([0], [1], [0], [2]):  # 1 is the least recently used when 2 comes
        _read(source, ids)
    assert sorted(source.kept.entries) == [0, 2]


def test_threads_reading_one_source_never_lose_a_descriptor_under_them(tmp_path) -> None:
    paths = _write_files(tmp_path / "d", 40, size=500)
    source = LocalFiles.listed(paths)
    source._kept = KeptFiles(limit=3)  # evictions all the time, while other threads read
    want = {i: Path(p).read_bytes() for i, p in enumerate(paths)}
    errors: list[BaseException] = []
    gc.collect()
    before = held_under(tmp_path)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(150):
                ids = rng.integers(0, len(paths), 6).tolist()
                out = np.zeros(6 * 400, dtype=np.uint8)
                source.read_ranges(np.array(ids), np.full(6, 50), np.full(6, 400), out, np.arange(6) * 400)
                assert out.tobytes() == b"".join(want[i][50:450] for i in ids)
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert len(source.kept) <= 3 and held_under(tmp_path) <= before + 3


def _in_child(source: LocalFiles, ids: list[int], conn) -> None:
    try:
        parent_pid = source.kept.pid
        got = _read(source, ids).tobytes()
        conn.send((got, parent_pid != os.getpid(), source.kept.pid == os.getpid(), len(source.kept)))
    except BaseException as e:  # noqa: BLE001  (sent to the parent)
        conn.send(repr(e))
    finally:
        conn.close()


def test_a_forked_child_reads_with_its_own_descriptors_and_the_parent_keeps_its_own(tmp_path) -> None:
    paths = _write_files(tmp_path / "d", 6)
    source = LocalFiles.listed(paths)
    ids = [0, 2, 4, 5]
    _read(source, ids)
    _read(source, ids)
    parent_fds = {i: e.fd for i, e in source.kept.entries.items()}
    ctx = multiprocessing.get_context("fork")
    mine, theirs = ctx.Pipe()
    child = ctx.Process(target=_in_child, args=(source, [1, 2, 3, 4], theirs))
    child.start()
    got = mine.recv()
    child.join(30)
    assert child.exitcode == 0 and not isinstance(got, str), got
    data, inherited, adopted, kept = got
    assert data == _want(paths, [1, 2, 3, 4]) and inherited and adopted and kept == 4
    # the child closed only its own copies: the parent's descriptors are open and still read the right bytes
    assert {i: e.fd for i, e in source.kept.entries.items()} == parent_fds
    assert all(os.fstat(fd).st_ino == os.stat(paths[i]).st_ino for i, fd in parent_fds.items())
    assert _read(source, ids).tobytes() == _want(paths, ids)
    change_file(paths[2], "rename-over")  # and the parent's checks still work
    with pytest.raises(FileChangedError, match="f0002.bin"):
        _read(source, ids)


def test_a_pickled_copy_carries_no_descriptor_and_reads_with_its_own(tmp_path) -> None:
    paths = _write_files(tmp_path / "d", 4)
    source = LocalFiles.listed(paths)
    _read(source, [0, 1, 2, 3])
    blob = pickle.dumps(source)
    copy = pickle.loads(blob)
    assert len(copy.kept) == 0 and copy.kept is not source.kept
    assert _read(copy, [3, 1]).tobytes() == _want(paths, [3, 1])
    assert {e.fd for e in copy.kept.entries.values()}.isdisjoint(e.fd for e in source.kept.entries.values())
    change_file(paths[1], "rewrite")
    for s in (source, copy):
        with pytest.raises(FileChangedError, match="f0001.bin"):
            _read(s, [1])


def _race_kept(base: Path, data: bytes, attempts: int = 20) -> tuple[int, int]:
    """Race reads of a kept descriptor (read twice before: kept, snapshot taken); (raced, seen)."""
    raced = seen = 0
    for k in range(attempts):
        path = base / f"big{k}.bin"
        path.write_bytes(data)
        source = LocalFiles.listed([str(path)])
        for _ in range(2):
            _read(source, [0])
        assert source.kept.entries[0].snapshot is not None
        out = np.zeros(len(data), dtype=np.uint8)
        attempt = race_preadv(str(path), lambda s=source, o=out: s.read_ranges([0], [0], [len(data)], o, [0]),
                              len(data) - 4096, b"\xff" * 4096)
        seen += attempt.seen
        if attempt.raced:
            raced += 1
            assert isinstance(attempt.error, FileChangedError), attempt.error or "served"
            assert str(path) in str(attempt.error)
        source.close()
        path.unlink()
        if raced >= 1 or (k >= 2 and not seen):
            break
    return raced, seen


@pytest.mark.skipif(not sys.platform.startswith("linux") or PREADV is None,
                    reason="watches the reader thread's system call through /proc")
def test_a_kept_file_written_while_it_is_read_is_not_served(tmp_path) -> None:
    """The write lands while the reader is inside ``preadv`` on a kept descriptor (tests/helpers/racing.py): the
    check after the read (the path's stat against the snapshot) refuses it."""
    data = np.random.default_rng(0).integers(0, 255, 32 << 20, dtype=np.uint8).tobytes()
    for base in (tmp_path, Path("/var/tmp") / f"consumer-race-{uuid.uuid4().hex}"):  # a tmpfs never waits
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        try:
            raced, seen = _race_kept(base, data)
        finally:
            if base != tmp_path:
                shutil.rmtree(base, ignore_errors=True)
        if seen:
            assert raced >= 1
            return
    pytest.skip("no read was ever seen waiting for the disk here (every file system tried keeps files in memory)")
