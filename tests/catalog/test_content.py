"""The content pass (consumer.catalog.content) and the catalog's content columns, against independent computations."""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
import tempfile
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.catalog.catalog import SCHEMA_VERSION, Catalog
from consumer.catalog.content import (
    compute_content,
    content_stats,
    decode_histogram,
    encode_histogram,
    entropy_bits,
    named_content_columns,
    printable_fraction,
    zeros_fraction,
)
from consumer.errors import FileChangedError, InputError

from ..conftest import identity, write

PRINTABLE = set(range(0x20, 0x7F)) | {9, 10, 11, 12, 13}


def expected(data: bytes) -> dict:
    """The statistics computed independently: hashlib on the whole bytes, a Counter-free numpy
    histogram (np.histogram), the entropy formula in pure Python."""
    hist, _ = np.histogram(np.frombuffer(data, dtype=np.uint8), bins=256, range=(0, 256))
    n = len(data)
    ent = -sum((c / n) * math.log2(c / n) for c in hist.tolist() if c) if n else 0.0
    return {"sha256": hashlib.sha256(data).hexdigest(), "histogram": hist.tolist(), "entropy": ent,
            "printable": sum(b in PRINTABLE for b in data) / n if n else 0.0,
            "zeros": data.count(0) / n if n else 0.0, "size": n}


def check(stats, data: bytes) -> None:
    exp = expected(data)
    assert stats.sha256 == exp["sha256"]
    assert stats.histogram.dtype == np.uint64 and stats.histogram.tolist() == exp["histogram"]
    assert stats.size == exp["size"]
    assert stats.entropy == pytest.approx(exp["entropy"], abs=1e-12)
    assert stats.printable == pytest.approx(exp["printable"], abs=1e-15)
    assert stats.zeros == pytest.approx(exp["zeros"], abs=1e-15)
    assert 0.0 <= stats.entropy <= 8.0




# ------------------------------------------------------------------ one file
def test_edge_files(tmp_path):
    rng = np.random.default_rng(1)
    cases = {
        "empty": b"",
        "one": b"A",
        "zeros": bytes(5000),
        "random": rng.integers(0, 256, 1 << 18, dtype=np.uint8).tobytes(),
        "text": b"def f(x):\n\treturn x + 1\r\n\x0b\x0c" * 40,
        "mixed": bytes(range(256)) * 3 + b"\x00" * 100 + b"\xff\xfe",
    }
    for name, data in cases.items():
        check(content_stats(write(tmp_path / name, data)), data)
    empty = content_stats(str(tmp_path / "empty"))
    assert empty.sha256 == hashlib.sha256(b"").hexdigest()
    assert (empty.entropy, empty.printable, empty.zeros) == (0.0, 0.0, 0.0)
    one = content_stats(str(tmp_path / "one"))
    assert (one.entropy, one.printable, one.zeros) == (0.0, 1.0, 0.0)
    zeros = content_stats(str(tmp_path / "zeros"))
    assert (zeros.entropy, zeros.printable, zeros.zeros) == (0.0, 0.0, 1.0)
    assert content_stats(str(tmp_path / "random")).entropy > 7.99
    assert content_stats(str(tmp_path / "text")).printable == 1.0
    uniform = content_stats(write(tmp_path / "uniform", bytes(range(256)) * 4))
    assert uniform.entropy == 8.0  # every value equally often: exactly 8 bits


@pytest.mark.parametrize("size", [4095, 4096, 4097, 3 * 4096, 3 * 4096 + 17, 10 * 4096 - 1])
def test_files_larger_than_the_read_chunk(tmp_path, size):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    data[::7] = 0  # some structure so the histogram is not flat
    raw = data.tobytes()
    small = content_stats(write(tmp_path / "f", raw), chunk=4096)
    check(small, raw)
    big = content_stats(str(tmp_path / "f"))  # one read
    assert big.sha256 == small.sha256 and big.histogram.tolist() == small.histogram.tolist()


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=9000), st.sampled_from([4096, 8192]))
def test_any_bytes_any_chunk(data, chunk):
    with tempfile.TemporaryDirectory() as d:
        check(content_stats(write(os.path.join(d, "f"), data), chunk=chunk), data)


@pytest.mark.parametrize("size", [65535, 65536, 65537, 131074, 200001])
@pytest.mark.parametrize("chunk", [65536, 65537, 1 << 20])
def test_large_chunks_counted_as_byte_pairs(tmp_path, size, chunk):
    """Chunks of 64 KiB and more are counted as uint16 pairs: odd and even chunk lengths, odd tails."""
    rng = np.random.default_rng(size + chunk)
    data = rng.integers(0, 256, size, dtype=np.uint8)
    data[: size // 2] = rng.integers(97, 100, size // 2)  # long runs of few values
    raw = data.tobytes()
    check(content_stats(write(tmp_path / "f", raw), chunk=chunk), raw)


def test_a_reused_buffer_carries_nothing_over(tmp_path):
    buf = np.empty(4096, dtype=np.uint8)
    a = write(tmp_path / "a", b"\xff" * 4096)
    b = write(tmp_path / "b", b"xy")
    content_stats(a, chunk=4096, buffer=buf)
    check(content_stats(b, chunk=4096, buffer=buf), b"xy")


def test_refused_inputs(tmp_path):
    with pytest.raises(InputError, match="not found"):
        content_stats(str(tmp_path / "missing"))
    with pytest.raises(InputError, match="not a regular file"):
        content_stats(str(tmp_path))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):  # refused, never blocks
        content_stats(str(fifo))
    with pytest.raises(InputError, match="chunk"):
        content_stats(write(tmp_path / "f", b"x"), chunk=100)
    with pytest.raises(InputError, match="files_per_task"):
        list(compute_content([str(tmp_path / "f")], files_per_task=0))


# ------------------------------------------------------------------ many files
def test_parallel_pass_keeps_order_and_matches_serial(tmp_path):
    rng = np.random.default_rng(5)
    paths, datas = [], []
    for i in range(150):
        data = rng.integers(0, 256 if i % 3 else 40, int(rng.integers(0, 3 * 4096)), dtype=np.uint8).tobytes()
        paths.append(write(tmp_path / f"f{i:03d}", data))
        datas.append(data)
    parallel = list(compute_content(paths, workers=2, chunk=4096, files_per_task=4))
    serial = list(compute_content(paths, workers=1))
    assert [s.path for s in parallel] == paths
    for s, t, data in zip(parallel, serial, datas):
        check(s, data)
        # computed in a batch, the columns are the very floats of the one-histogram functions
        assert (s.entropy, s.printable, s.zeros) == (entropy_bits(s.histogram), printable_fraction(s.histogram),
                                                     zeros_fraction(s.histogram))
        assert s.sha256 == t.sha256 and s.histogram.tolist() == t.histogram.tolist()


def test_an_unreadable_file_stops_the_pass_with_its_name(tmp_path):
    paths = [write(tmp_path / f"f{i}", b"abc") for i in range(20)]
    os.remove(paths[13])
    with pytest.raises(InputError, match="f13"):
        list(compute_content(paths, workers=2, files_per_task=2))


# ------------------------------------------------------------------ histogram blob
def test_histogram_blob_widths_round_trip():
    for top, length in [(0, 512), (65535, 512), (65536, 1024), (2**32 - 1, 1024), (2**32, 2048), (2**63, 2048)]:
        h = np.zeros(256, dtype=np.uint64)
        h[7] = top
        h[0] = 3
        blob = encode_histogram(h)
        assert len(blob) == length
        assert decode_histogram(blob).tolist() == h.tolist()
    h = np.arange(256, dtype=np.uint64)
    assert np.frombuffer(encode_histogram(h), dtype="<u2").tolist() == list(range(256))  # little-endian, byte 0 first
    for bad in (b"", b"\x00" * 511, "text", None, 5):
        with pytest.raises(InputError, match="histogram"):
            decode_histogram(bad)
    with pytest.raises(InputError, match="256"):
        entropy_bits([1, 2, 3])


# ------------------------------------------------------------------ catalog
def test_catalog_computes_once_per_file_version(tmp_path):
    rng = np.random.default_rng(2)
    datas = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in (0, 1, 300, 9000)]
    paths = [write(tmp_path / f"f{i}", d) for i, d in enumerate(datas)]
    cat = Catalog(str(tmp_path / "cache" / "catalog.sqlite"))
    sizes, mtimes = identity(paths)
    assert cat.content_rows(paths, sizes, mtimes) == [None] * 4
    assert cat.ensure_content(paths, sizes, mtimes, chunk=4096) == 4
    assert cat.ensure_content(paths, sizes, mtimes) == 0  # nothing re-read
    for row, data in zip(cat.content_rows(paths, sizes, mtimes), datas):
        exp = expected(data)
        assert row[0] == exp["sha256"] and decode_histogram(row[4]).tolist() == exp["histogram"]
        assert (row[1], row[2], row[3]) == pytest.approx((exp["entropy"], exp["printable"], exp["zeros"]))
    # the file changes: new size and mtime -> recomputed, the old values are never served
    new = b"\x00" * 77
    write(paths[2], new)
    os.utime(paths[2], ns=(mtimes[2] + 10**9, mtimes[2] + 10**9))
    sizes2, mtimes2 = identity(paths)
    assert cat.content_rows(paths, sizes2, mtimes2)[2] is None  # stale row is not served
    assert cat.ensure_content(paths, sizes2, mtimes2) == 1
    row = cat.content_rows(paths, sizes2, mtimes2)[2]
    assert row[0] == hashlib.sha256(new).hexdigest() and row[3] == 1.0 and row[1] == 0.0
    # the same content rewritten with the same size but a new mtime is recomputed too
    os.utime(paths[2], ns=(mtimes2[2] + 10**9, mtimes2[2] + 10**9))
    sizes3, mtimes3 = identity(paths)
    assert cat.ensure_content(paths, sizes3, mtimes3) == 1
    reopened = Catalog(cat.path)
    assert reopened.ensure_content(paths, sizes3, mtimes3) == 0  # persisted


def test_catalog_refuses_content_of_a_file_changed_since_it_was_listed(tmp_path):
    paths = [write(tmp_path / "a", b"one"), write(tmp_path / "b", b"two")]
    sizes, mtimes = identity(paths)
    write(paths[1], b"three!")
    cat = Catalog(None)
    with pytest.raises(FileChangedError, match="changed since it was listed"):
        cat.ensure_content(paths, sizes, mtimes)
    assert cat.content_rows(paths, sizes, mtimes) == [None, None]  # nothing of the new version under the old


def test_libmagic_refresh_of_a_changed_file_clears_its_content_columns(tmp_path):
    p = write(tmp_path / "a.txt", b"hello world\n")
    cat = Catalog(None)
    sizes, mtimes = identity([p])
    cat.ensure_content([p], sizes, mtimes)
    cat.sync([p], sizes, mtimes, want=("mime",))  # same version: content kept
    assert cat.content_rows([p], sizes, mtimes)[0] is not None
    write(p, b"\x00\x01\x02")
    sizes2, mtimes2 = identity([p])
    cat.sync([p], sizes2, mtimes2, want=("mime",))
    stored = cat.connection.execute("SELECT entropy, printable, zeros, histogram, sha256 FROM files").fetchone()
    assert stored == (None, None, None, None, None)
    assert cat.rows([p])[p][3] == "application/octet-stream"
    cat.ensure_content([p], sizes2, mtimes2)  # and content refresh keeps libmagic of the same version
    assert cat.rows([p])[p][3] == "application/octet-stream"


def test_old_schema_catalog_is_moved_aside(tmp_path):
    path = tmp_path / "catalog.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
                       "INSERT INTO meta VALUES ('schema_version', '2');"
                       "CREATE TABLE files(key BLOB PRIMARY KEY, path TEXT NOT NULL, size INTEGER NOT NULL, "
                       "mtime_ns INTEGER NOT NULL, extension TEXT NOT NULL, description TEXT, mime TEXT, sha256 TEXT);")
    conn.commit()
    conn.close()
    cat = Catalog(str(path))
    assert SCHEMA_VERSION == "4"
    cols = [r[1] for r in cat.connection.execute("PRAGMA table_info(files)")]
    assert cols[-5:] == ["entropy", "printable", "zeros", "histogram", "row_check"]
    assert any(n.startswith("catalog.sqlite.corrupt-") for n in os.listdir(tmp_path))


def test_two_threads_completing_the_same_catalog(tmp_path):
    """Two datasets of one process (two Catalog objects) filling the same catalog at once."""
    paths = [write(tmp_path / f"f{i}", bytes([i]) * (i * 37)) for i in range(60)]
    sizes, mtimes = identity(paths)
    db = str(tmp_path / "c" / "catalog.sqlite")
    Catalog(db).close()
    errors = []

    def run():
        try:
            Catalog(db).ensure_content(paths, sizes, mtimes, workers=1)
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    rows = Catalog(db).content_rows(paths, sizes, mtimes)
    assert [r[0] for r in rows] == [hashlib.sha256(bytes([i]) * (i * 37)).hexdigest() for i in range(60)]


# ------------------------------------------------------------------ which columns a statement names
@pytest.mark.parametrize("statement, names", [
    ("SELECT class, avg(entropy) FROM files GROUP BY class", {"entropy"}),
    ("SELECT * FROM files", set()),
    ("select ENTROPY, Zeros from files", {"entropy", "zeros"}),
    ('SELECT "printable", [histogram], `sha256` FROM files', {"printable", "histogram", "sha256"}),
    ("SELECT path FROM files WHERE path LIKE '%entropy%' -- zeros\n", set()),
    ("SELECT /* histogram */ path FROM files WHERE description = 'it''s sha256'", set()),
    ("SELECT hist_entropy(histogram) FROM files", {"histogram"}),
    ("SELECT entropy_x, xzeros FROM files", set()),
    ("SELECT f.sha256 FROM files AS f", {"sha256"}),
])
def test_named_content_columns(statement, names):
    assert named_content_columns(statement) == names


def test_non_utf8_file_names(tmp_path):
    name = os.fsdecode(b"caf\xe9-\xff.bin")  # not valid UTF-8: surrogate-escaped by Python
    p = write(os.path.join(str(tmp_path), name), b"bytes of a badly named file")
    check(content_stats(p), b"bytes of a badly named file")
    cat = Catalog(None)
    sizes, mtimes = identity([p])
    assert cat.ensure_content([p], sizes, mtimes) == 1
    assert cat.content_rows([p], sizes, mtimes)[0][0] == hashlib.sha256(b"bytes of a badly named file").hexdigest()
    assert cat.connection.execute("SELECT path FROM files").fetchone()[0].endswith("caf\\xe9-\\xff.bin")


# ------------------------------------------------------------------ the batched pass against a plain reference
def reference(path: str) -> tuple[int, str, list[int]]:
    """Size, sha256 and byte counts of a file, straightforwardly: read it whole, hash it, count each byte."""
    with open(path, "rb") as f:
        data = f.read()
    counts = [0] * 256
    for b in data:
        counts[b] += 1
    return len(data), hashlib.sha256(data).hexdigest(), counts


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 2, 255, 1023, 1024, 1025, 4095, 4096, 4097, 5000, 16383, 16384, 40000]),
                      min_size=1, max_size=40),
       seed=st.integers(0, 2**32 - 1), chunk=st.sampled_from([4096, 8192, 65536]),
       mode=st.sampled_from(["serial", "threads", "processes"]), per_task=st.sampled_from([None, 1, 3, 7]))
def test_batched_pass_equals_a_plain_reference(sizes, seed, chunk, mode, per_task):
    """Small files read back to back into one buffer and counted together, files streamed chunk by chunk
    (larger than a quarter of ``chunk``), in any mix and order, serially, in threads or in processes:
    every file's size, sha256 and counts equal a plain whole-file read, and the columns equal the
    one-histogram functions."""
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, n in enumerate(sizes):
            data = rng.integers(0, int(rng.integers(1, 257)), n, dtype=np.uint8)  # few or many distinct values
            paths.append(write(os.path.join(d, f"f{i:02d}"), data.tobytes()))
        workers = 1 if mode == "serial" else 2
        got = list(compute_content(paths, workers=workers, chunk=chunk, files_per_task=per_task,
                                   processes=True if mode == "processes" else False))
        assert [s.path for s in got] == paths
        for s, p in zip(got, paths):
            size, digest, counts = reference(p)
            assert (s.size, s.sha256, s.histogram.tolist()) == (size, digest, counts)
            assert s.histogram.dtype == np.uint64 and s.mtime_ns == os.stat(p).st_mtime_ns
            assert (s.entropy, s.printable, s.zeros) == (entropy_bits(s.histogram), printable_fraction(s.histogram),
                                                         zeros_fraction(s.histogram))


def test_processes_and_threads_give_the_same_results_and_errors(tmp_path):
    rng = np.random.default_rng(9)
    paths = [write(tmp_path / f"f{i:03d}", rng.integers(0, 256, int(rng.integers(0, 9000)), dtype=np.uint8).tobytes())
             for i in range(300)]
    by_threads = list(compute_content(paths, workers=2, processes=False))
    by_processes = list(compute_content(paths, workers=2, processes=True))
    auto = list(compute_content(paths, workers=2))  # the default: threads
    for a, b, c in zip(by_threads, by_processes, auto):
        assert (a.path, a.size, a.mtime_ns, a.sha256, a.entropy, a.printable, a.zeros) == \
            (b.path, b.size, b.mtime_ns, b.sha256, b.entropy, b.printable, b.zeros) == \
            (c.path, c.size, c.mtime_ns, c.sha256, c.entropy, c.printable, c.zeros)
        assert a.histogram.tolist() == b.histogram.tolist() == c.histogram.tolist()
    os.remove(paths[150])
    for processes in (False, True):
        with pytest.raises(InputError, match="f150"):
            list(compute_content(paths, workers=2, processes=processes))
    with pytest.raises(InputError, match="processes"):
        list(compute_content(paths, processes="yes"))

