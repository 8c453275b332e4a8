"""The persistent per-container index: int32 arrays where the values fit and int64 past them (a sparse archive with
a member beyond 2 GiB), and the batched durable write: entries are published only after the build's one durability
barrier, a build that dies before it leaves only temporary directories that are never read, a failed barrier
publishes nothing, and a damaged entry is scanned again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import FormatError
from consumer.sources.records import RecordOptions
from consumer.sources.records.scanned import INT32_MAX, ClassTable, DecodeSink, Scanned, narrow
from consumer.sources.records.stash import StashBatch, durable, load_stash, stash_key, sweep

from .writers import write_jsonl, write_lines

BIG = (1 << 31) + 1000  # a member this long puts the next one past int32 offsets


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "records").glob("*/*") if not p.name.endswith(".tmp"))


def _temporaries(cache: Path) -> list[Path]:
    return sorted((cache / "records").glob("*/*.tmp"))


@pytest.mark.parametrize("values, dtype", [
    ([], np.int32), ([0, INT32_MAX], np.int32), ([-INT32_MAX - 1, 5], np.int32),
    ([0, INT32_MAX + 1], np.int64), ([-INT32_MAX - 2], np.int64), ([1 << 40], np.int64)])
def test_narrow_at_the_int32_bounds(values, dtype):
    got = narrow(np.array(values, dtype=np.int64))
    assert got.dtype == dtype
    assert got.tolist() == values
    scanned = Scanned(offset=np.array(values, dtype=np.int64), length=np.ones(len(values), np.int64),
                      record=np.arange(len(values)), inplace=np.ones(len(values), bool))
    assert scanned.offset.dtype == dtype and scanned.length.dtype == np.int32 and scanned.record.dtype == np.int32


def _sparse_tar(path: Path) -> Path:
    """Members ``big`` (BIG bytes of zeros, a hole on disk) and ``small`` (``hello``), past 2 GiB."""
    big, small = tarfile.TarInfo("big"), tarfile.TarInfo("small")
    big.size, small.size = BIG, 5
    with open(path, "wb") as f:
        f.write(big.tobuf(format=tarfile.PAX_FORMAT))
        f.seek(-(-BIG // 512) * 512, os.SEEK_CUR)
        f.write(small.tobuf(format=tarfile.PAX_FORMAT) + b"hello".ljust(512, b"\0") + b"\0" * 1024)
    return path


def test_offsets_past_2_gib_stay_int64_through_the_cache(tmp_path):
    p = _sparse_tar(tmp_path / "sparse.tar")
    kwargs = {"documents": "tar", "cache_dir": tmp_path / "c", "metadata": None, "style": "concat",
              "seqlen": 1 << 20}
    for reused in (0, 1):
        ds = Consumer(str(p), **kwargs)
        assert ds.build_info["records"]["reused"] == reused
        rows = ds.sql('SELECT path, "offset", length, typeof("offset") FROM documents ORDER BY doc_id')
        assert [r[0] for r in rows] == [f"{p}/big", f"{p}/small"]
        assert rows[1][1] > INT32_MAX and rows[1][1] == p.read_bytes().index(b"hello")
        assert [r[2] for r in rows] == [BIG, 5] and rows[0][3] == "BIGINT"
        assert ds.decode(ds.document_tokens(1)) == b"hello"
    small = write_lines(tmp_path / "s.txt", [b"a", b"bb"])
    rows = Consumer(str(small), documents="lines", cache_dir=tmp_path / "c").sql(
        'SELECT "offset", typeof("offset"), typeof(record), typeof(file_id) FROM documents ORDER BY doc_id')
    assert rows == [(0, "BIGINT", "BIGINT", "BIGINT"), (2, "BIGINT", "BIGINT", "BIGINT")]


def _scan_lines(docs: list[bytes]):
    def scan(sink: DecodeSink) -> Scanned:
        sink.put(b"decoded")
        n = len(docs)
        return Scanned(offset=np.arange(n), length=np.array([len(d) for d in docs]), record=np.arange(n),
                       inplace=np.ones(n, bool), names=[d.decode() for d in docs], counts={"x": 1})
    return scan


def test_nothing_is_served_before_the_barrier(tmp_path):
    root = str(tmp_path / "c")
    key = stash_key("c.txt", 3, 1, None, RecordOptions("lines"))
    batch = StashBatch(root)
    scanned, decoded = batch.scan(key, _scan_lines([b"a", b"\xc3\xa9"]))
    assert load_stash(root, key) is None and not os.path.exists(decoded)  # written, not yet published
    batch.publish()
    got, path = load_stash(root, key)
    assert path == decoded and Path(path).read_bytes() == b"decoded"
    assert got.names == ["a", "\xe9"] and got.counts == {"x": 1} and got.offset.dtype == np.int32
    assert got.length.tolist() == [1, 2] and got.inplace.tolist() == [True, True]


_CRASH = """
import os, sys
import numpy as np
from consumer.sources.records.scanned import Scanned
from consumer.sources.records.stash import StashBatch
batch = StashBatch(sys.argv[1])
batch.scan(sys.argv[2], lambda sink: Scanned(offset=np.arange(2), length=np.ones(2, np.int64),
                                             record=np.arange(2), inplace=np.ones(2, bool)))
os._exit(0)  # the process dies after its scans, before the barrier and the renames
"""


def test_a_build_that_dies_before_publishing_leaves_nothing_served(tmp_path):
    p = write_lines(tmp_path / "c.txt", [b"one", b"two"])
    cache = tmp_path / "c"
    Consumer(str(p), documents="lines", cache_dir=cache)
    (key_dir,) = _entries(cache)
    other = key_dir.name[:2] + "0" * 62  # another key in the same folder
    subprocess.run([sys.executable, "-c", _CRASH, str(cache), other], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    (left,) = _temporaries(cache)
    assert load_stash(str(cache), other) is None
    assert not (cache / "records" / other[:2] / other).exists()
    os.utime(left, (1, 1))  # a day old: the next publish in that folder removes it
    assert sweep(str(left.parent), older_than=3600) == 1 and not _temporaries(cache)


def test_a_failed_scan_publishes_the_entries_done_and_leaves_no_temporaries(tmp_path):
    good = write_jsonl(tmp_path / "a.jsonl", ["one", "two"])
    bad = tmp_path / "b.jsonl"
    bad.write_bytes(b'{"text": "x"}\n{"text": \n')
    cache = tmp_path / "c"
    with pytest.raises(FormatError, match="b.jsonl"):
        Consumer([str(good), str(bad)], documents="jsonl", cache_dir=cache)
    assert len(_entries(cache)) == 1 and not _temporaries(cache)
    ds = Consumer(str(good), documents="jsonl", cache_dir=cache)
    assert ds.build_info["records"]["reused"] == 1
    assert [ds.decode(ds.document_tokens(i)) for i in range(2)] == [b"one", b"two"]


def test_a_failed_barrier_publishes_nothing(tmp_path):
    root = str(tmp_path / "c")
    keys = [stash_key(f"c{i}.txt", 3, 1, None, RecordOptions("lines")) for i in range(2)]
    batch = StashBatch(root)
    for key in keys:
        batch.scan(key, _scan_lines([b"a"]))
    os.remove(_temporaries(tmp_path / "c")[0] / "meta.json")  # a file the barrier cannot sync
    with pytest.raises(FileNotFoundError):
        batch.publish()
    assert all(load_stash(root, k) is None for k in keys)
    assert not _temporaries(tmp_path / "c") and not _entries(tmp_path / "c")


def test_many_entries_one_syncfs(tmp_path):
    paths = [write_lines(tmp_path / f"c{i:02d}.txt", [b"x" * i, b"y"]) for i in range(1, 13)]
    cache = tmp_path / "c"
    first = Consumer([str(p) for p in paths], documents="lines", cache_dir=cache)
    assert len(_entries(cache)) == 12 and not _temporaries(cache)  # 24 files, fsynced on threads
    again = Consumer([str(p) for p in paths], documents="lines", cache_dir=cache)
    assert again.build_info["records"]["reused"] == 12
    assert again.sql("SELECT path, length FROM documents ORDER BY doc_id") == \
        first.sql("SELECT path, length FROM documents ORDER BY doc_id")
    files = [str(f) for e in _entries(cache) for f in e.iterdir()]
    durable(files, str(cache), few=0)  # the syncfs path, then (few=len) the fsync of each
    durable(files, str(cache), few=len(files))


@pytest.mark.parametrize("damage", ["truncate index", "grow decoded", "bad meta", "layout past the end",
                                    "not integers", "class code out of range"])
def test_a_damaged_entry_is_scanned_again(tmp_path, damage):
    p = write_jsonl(tmp_path / "c.jsonl", ["one", "two", "three"], extra={"lang": "en"})
    cache = tmp_path / "c"
    Consumer(str(p), documents="jsonl", class_field="lang", cache_dir=cache)
    (entry,) = _entries(cache)
    index, decoded, meta = entry / "index.bin", entry / "decoded.bin", entry / "meta.json"
    if damage == "truncate index":
        index.write_bytes(index.read_bytes()[:-3])
    elif damage == "grow decoded":
        decoded.write_bytes(decoded.read_bytes() + b"x")
    elif damage == "bad meta":
        meta.write_text("{")
    else:
        m = json.loads(meta.read_text())
        if damage == "layout past the end":
            m["layout"]["offset"][2] = m["index_bytes"] - 1
        elif damage == "not integers":
            m["layout"]["offset"][0] = "<f4"
        else:
            dtype, _, at = m["layout"]["class_codes"]
            data = bytearray(index.read_bytes())
            data[at:at + np.dtype(dtype).itemsize] = np.array([7], dtype=dtype).tobytes()
            index.write_bytes(bytes(data))
        meta.write_text(json.dumps(m))
    assert load_stash(str(cache), entry.name) is None
    # other settings: the dataset's own entry (keyed by them) is not there, so the container's entry is read
    ds = Consumer(str(p), documents="jsonl", class_field="lang", cache_dir=cache, seqlen=64)
    assert ds.build_info["records"]["reused"] == 0 and ds.classes == ["en"]
    assert [ds.decode(ds.document_tokens(i)) for i in range(3)] == [b"one", b"two", b"three"]
    assert load_stash(str(cache), entry.name) is not None and not _temporaries(cache)  # replaced in place
    again = Consumer(str(p), documents="jsonl", class_field="lang", cache_dir=cache, seqlen=32)
    assert again.build_info["records"]["reused"] == 1 and again.build_info["cache"] == "hit"


def test_class_values_kept_as_codes():
    table = ClassTable()
    assert table.add(["b", "a", "b"]).tolist() == [0, 1, 0]
    assert table.add(["c", "a", "\ud800x"]).tolist() == [2, 1, 3]  # a lone surrogate: the fallback path
    assert table.names == ["b", "a", "c", "\ud800x"] and table.add([]).dtype == np.int32
    scanned = Scanned(offset=np.arange(3), length=np.ones(3), record=np.arange(3), inplace=np.zeros(3, bool),
                      classes=["x", "y", "x"])
    assert scanned.classes is None and scanned.class_names == ["x", "y"]
    assert scanned.class_codes.tolist() == [0, 1, 0] and scanned.class_codes.dtype == np.int32


def test_class_field_through_the_cache(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", ["one", "two", "three"], extra={"lang": "fr"})
    b = tmp_path / "b.jsonl"
    b.write_text('{"text": "four", "lang": "en"}\n{"text": "five", "lang": 7}\n{"text": "six", "lang": true}\n')
    cache = tmp_path / "c"
    query = "SELECT class, class_id, path FROM documents ORDER BY doc_id"
    first = Consumer([str(a), str(b)], documents="jsonl", class_field="lang", cache_dir=cache)
    again = Consumer([str(a), str(b)], documents="jsonl", class_field="lang", cache_dir=cache)
    assert again.build_info["records"]["reused"] == 2
    assert first.classes == again.classes == ["7", "en", "fr", "true"]
    assert first.sql(query) == again.sql(query)
    assert [r[0] for r in again.sql(query)] == ["7", "en", "fr", "fr", "fr", "true"]
    assert [again.decode(again.document_tokens(i)) for i in range(6)] == [b"five", b"four", b"one", b"two",
                                                                           b"three", b"six"]
