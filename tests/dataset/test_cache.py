"""Catalog and index cache: incremental libmagic, hits and misses, corruption, concurrency, crashes."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from consumer import Consumer
from consumer.catalog.catalog import Catalog
from consumer.dataset.cache import list_entries
from consumer.dataset.clear import clear

from ..conftest import write_corpus


def _same(a: Consumer, b: Consumer) -> bool:
    ta = a.fetch_numpy(np.arange(len(a)), ["input_array", "class"])
    tb = b.fetch_numpy(np.arange(len(b)), ["input_array", "class"])
    return all(np.array_equal(ta[k], tb[k]) for k in ta)


def test_reopen_hits_the_cache_and_runs_no_libmagic(tmp_path, corpus_dir, magic_calls):
    cache = tmp_path / "cache"
    first = Consumer(corpus_dir, cache_dir=cache)
    n = len(first.files)
    assert first.build_info["cache"] == "miss" and len(magic_calls) == n  # descriptions only
    second = Consumer(corpus_dir, cache_dir=cache)
    assert second.build_info["cache"] == "hit" and len(magic_calls) == n
    second.sql("SELECT count(*) FROM files WHERE mime IS NOT NULL")  # naming mime computes it once, for every file
    assert len(magic_calls) == 2 * n
    Consumer(corpus_dir, cache_dir=cache, metadata="mime", style="concat", seqlen=99).sql("SELECT 1")
    assert len(magic_calls) == 2 * n  # both columns are now known
    assert second.build_info["key"] == first.build_info["key"] and _same(first, second)


def test_incremental_reindex_runs_libmagic_only_on_changed_files(tmp_path, corpus_dir, magic_calls):
    cache = tmp_path / "cache"
    ds = Consumer(corpus_dir, cache_dir=cache)
    magic_calls.clear()
    changed = ds.files[3]
    with open(changed, "ab") as f:
        f.write(b"more bytes")
    new = os.path.join(corpus_dir, "dog", "new_file.txt")
    with open(new, "w") as f:
        f.write("hello")
    again = Consumer(corpus_dir, cache_dir=cache)
    assert again.build_info["cache"] == "miss"
    assert sorted(set(magic_calls)) == sorted([changed, new]) and len(magic_calls) == 2
    # a new setting on unchanged files: a new index, but no libmagic at all
    magic_calls.clear()
    concat = Consumer(corpus_dir, cache_dir=cache, style="concat", seqlen=64)
    assert concat.build_info["cache"] == "miss" and magic_calls == []


@pytest.mark.parametrize("change", [
    {"style": "concat"}, {"n_bytes": 1}, {"seqlen": 77}, {"metadata": "mime"}, {"metadata": None},
    {"long_files": "windows"}, {"class_to_id": {"cat": 2, "dog": 1, "eel": 0}},
])
def test_every_input_change_makes_a_new_key(tmp_path, corpus_dir, change):
    cache = tmp_path / "cache"
    base = Consumer(corpus_dir, cache_dir=cache)
    other = Consumer(corpus_dir, cache_dir=cache, **change)
    assert other.build_info["cache"] == "miss" and other.build_info["key"] != base.build_info["key"]
    assert Consumer(corpus_dir, cache_dir=cache, **change).build_info["cache"] == "hit"


def test_file_size_or_mtime_change_makes_a_new_key(tmp_path, corpus_dir):
    cache = tmp_path / "cache"
    base = Consumer(corpus_dir, cache_dir=cache)
    os.utime(base.files[0], ns=(1, 1))
    touched = Consumer(corpus_dir, cache_dir=cache)
    assert touched.build_info["key"] != base.build_info["key"]


def _entry_dir(cache, key):
    return os.path.join(cache, "index", key)


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "description"])
def test_corrupt_cache_is_rebuilt_never_served(tmp_path, corpus_dir, damage):
    cache = tmp_path / "cache"
    ref = Consumer(corpus_dir, cache_dir=cache, style="concat", seqlen=32)
    folder = _entry_dir(cache, ref.build_info["key"])
    victim = os.path.join(folder, "seg_doc.npy")
    if damage == "truncate":
        with open(victim, "r+b") as f:
            f.truncate(os.path.getsize(victim) - 8)
    elif damage == "flip":
        data = bytearray(open(victim, "rb").read())
        data[-1] ^= 0xFF
        open(victim, "wb").write(bytes(data))
    elif damage == "delete":
        os.remove(victim)
    else:
        open(os.path.join(folder, "description.json"), "w").write("{not json")
    again = Consumer(corpus_dir, cache_dir=cache, style="concat", seqlen=32)
    assert again.build_info["cache"] == "miss" and _same(ref, again)
    assert Consumer(corpus_dir, cache_dir=cache, style="concat", seqlen=32).build_info["cache"] == "hit"


def test_corrupt_catalog_is_rebuilt(tmp_path, corpus_dir):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "catalog.sqlite").write_bytes(b"this is not a database" * 100)
    ds = Consumer(corpus_dir, cache_dir=cache)
    assert ds.catalog.count() == len(ds.files)
    assert any(name.startswith("catalog.sqlite.corrupt-") for name in os.listdir(cache))


def test_cache_dir_false_writes_nothing(tmp_path, corpus_dir, monkeypatch):
    monkeypatch.setenv("CONSUMER_CACHE_DIR", str(tmp_path / "default"))
    ds = Consumer(corpus_dir, cache_dir=False)
    assert ds.build_info["cache"] == "off" and not (tmp_path / "default").exists()
    assert ds.sql("SELECT count(*) FROM files")[0][0] == len(ds.files)  # the in-memory catalog still answers
    assert not (tmp_path / "default").exists()


def test_default_cache_dir_from_environment(tmp_path, corpus_dir, monkeypatch):
    monkeypatch.setenv("CONSUMER_CACHE_DIR", str(tmp_path / "envcache"))
    Consumer(corpus_dir)
    assert (tmp_path / "envcache" / "catalog.sqlite").exists() and (tmp_path / "envcache" / "index").is_dir()


def test_list_and_clear(tmp_path, corpus_dir):
    cache = str(tmp_path / "cache")
    Consumer(corpus_dir, cache_dir=cache)
    Consumer(corpus_dir, cache_dir=cache, style="concat", seqlen=50)
    entries = list_entries(cache)
    assert len(entries) == 2 and {e["style"] for e in entries} == {"diff", "concat"}
    assert all(e["bytes"] > 0 and e["files"] == 17 for e in entries)
    assert clear(cache) > 0 and list_entries(cache) == []
    assert os.path.exists(os.path.join(cache, "catalog.sqlite"))
    clear(cache, catalog=True)
    assert not os.path.exists(os.path.join(cache, "catalog.sqlite"))


def test_callable_metadata_is_not_cached(tmp_path, corpus_dir):
    ds = Consumer(corpus_dir, cache_dir=tmp_path / "c", metadata=lambda p: "x")
    assert ds.build_info["cache"] == "off"


def test_content_hashes_on_request(tmp_path, corpus):
    import hashlib
    cat = Catalog(str(tmp_path / "cat.sqlite"))
    paths = sorted(corpus["cat"])
    sizes = np.array([os.path.getsize(p) for p in paths])
    mtimes = np.array([os.stat(p).st_mtime_ns for p in paths])
    cat.sync(paths, sizes, mtimes, hashes=True)
    rows = {r[0]: r for r in cat.dump()}
    assert rows[paths[2]][6] == hashlib.sha256(open(paths[2], "rb").read()).hexdigest()
    assert rows[paths[2]][4] is None  # no libmagic was asked for


_BUILD_SCRIPT = """
import sys
from consumer import Consumer
Consumer(sys.argv[1], cache_dir=sys.argv[2])
"""


def _build_in_subprocess(corpus, cache):
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))}
    return subprocess.Popen([sys.executable, "-c", _BUILD_SCRIPT, str(corpus), str(cache)], env=env)


def test_build_killed_part_way_resumes_to_the_same_result(tmp_path, magic_calls):
    root = tmp_path / "big"
    n = 3000
    write_corpus(root, {"a": [40 + i % 50 for i in range(n // 2)], "b": [7 + i % 30 for i in range(n - n // 2)]})
    cache = tmp_path / "killed"
    proc = _build_in_subprocess(root, cache)
    db = cache / "catalog.sqlite"
    committed = 0
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if db.exists():
            try:
                committed = Catalog(str(db)).count()
            except Exception:  # noqa: BLE001  (the writer may hold the lock for a moment)
                committed = 0
            if committed > 0:
                break
        time.sleep(0.005)
    if proc.poll() is not None:
        pytest.skip("the build finished before it could be killed (machine too fast for this corpus)")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    committed = Catalog(str(db)).count()
    assert 0 < committed < n
    assert not os.path.isdir(cache / "index") or list_entries(str(cache)) == []  # no index entry was completed
    magic_calls.clear()
    resumed = Consumer(str(root), cache_dir=cache)
    assert len(magic_calls) == n - committed  # only the files the killed build had not committed
    clean = Consumer(str(root), cache_dir=tmp_path / "clean")
    assert resumed.catalog.dump() == clean.catalog.dump()
    assert _same(resumed, clean)


def test_concurrent_builds_share_one_cache(tmp_path, corpus_dir):
    cache = tmp_path / "shared"
    procs = [_build_in_subprocess(corpus_dir, cache) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    ds = Consumer(corpus_dir, cache_dir=cache)
    assert ds.build_info["cache"] == "hit" and ds.catalog.count() == len(ds.files)
    assert _same(ds, Consumer(corpus_dir, cache_dir=False))
