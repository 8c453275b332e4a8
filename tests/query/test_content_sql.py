"""Content columns in the ``files`` view and the SQL functions of consumer.query.functions."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.catalog.catalog import Catalog, display_path, path_key
from consumer.catalog.content import encode_histogram, named_content_columns
from consumer.errors import FileChangedError, QueryError
from consumer.query.functions import FUNCTIONS, js_distance, l1_distance, register_functions
from consumer.query.sqlite import DatasetSQL

from ..conftest import identity, write


class Counting:
    """An ensure_content callback that counts its calls (a real one underneath)."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self):
        self.calls += 1
        return self.fn()


@pytest.fixture(params=["file", "memory"])
def dataset(tmp_path, request):
    """Six files in two classes, a catalog (on disk or in memory) synced for libmagic, and the view."""
    rng = np.random.default_rng(3)
    datas = {"bin": [rng.integers(0, 256, 4000, dtype=np.uint8).tobytes(), bytes(300), b""],
             "txt": [b"hello, world\n" * 50, b"a", b"\x00\x01" + b"text" * 10]}
    paths, classes = [], []
    for cls in sorted(datas):
        (tmp_path / cls).mkdir()
        for i, d in enumerate(datas[cls]):
            paths.append(write(tmp_path / cls / f"{i}.dat", d))
            classes.append(cls)
    sizes, mtimes = identity(paths)
    cat = Catalog(str(tmp_path / "cache" / "catalog.sqlite") if request.param == "file" else None)
    cat.sync(paths, sizes, mtimes, want=("mime",))

    def rows():
        for i, (p, c) in enumerate(zip(paths, classes)):
            yield (i, path_key(p), display_path(p), c, sorted(datas).index(c), "", 1, 1)

    ensure = Counting(lambda: cat.ensure_content(paths, sizes, mtimes))
    sql = DatasetSQL(cat.path, None if cat.path else cat.connection, rows, identity=(sizes, mtimes),
                     ensure_content=ensure)
    return {"sql": sql, "ensure": ensure, "cat": cat, "paths": paths, "classes": classes,
            "datas": [d for c in sorted(datas) for d in datas[c]], "sizes": sizes, "mtimes": mtimes}


def test_a_statement_naming_a_content_column_computes_it_once(dataset):
    sql, ensure, datas = dataset["sql"], dataset["ensure"], dataset["datas"]
    assert sql.query("SELECT count(*) FROM files")[0][0] == 6
    star = sql.query("SELECT * FROM files ORDER BY file_id")
    assert star.columns[-4:] == ["entropy", "printable", "zeros", "histogram"] and "sha256" in star.columns
    assert ensure.calls == 0 and all(r[-1] is None for r in star)  # '*' names no column: nothing read
    rows = sql.query("SELECT file_id, sha256, entropy, printable, zeros, histogram FROM files ORDER BY file_id")
    assert ensure.calls == 1
    for (_fid, sha, ent, prn, zer, hist), data in zip(rows, datas):
        counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256)
        assert sha == hashlib.sha256(data).hexdigest()
        assert hist == encode_histogram(counts)
        assert zer == (data.count(0) / len(data) if data else 0.0)
        assert 0.0 <= ent <= 8.0 and 0.0 <= prn <= 1.0
    by_class = sql.query("SELECT class, avg(entropy), max(printable) FROM files GROUP BY class ORDER BY class")
    assert [r[0] for r in by_class] == ["bin", "txt"] and by_class[1][2] == 1.0
    assert ensure.calls == 1  # computed once for the dataset
    high = sql.query("SELECT file_id FROM files WHERE entropy > 7.5")
    assert [r[0] for r in high] == [0]


def test_a_refused_or_broken_statement_reads_no_file(dataset):
    sql, ensure = dataset["sql"], dataset["ensure"]
    for bad in ("DELETE FROM files WHERE entropy > 1", "SELECT entropy FROM nowhere",
                "SELECT entropy FROM files; SELECT 1", "PRAGMA table_info(entropy)",
                "SELECT entropy FROM files WHERE (", "ATTACH 'x.db' AS zeros"):
        assert named_content_columns(bad)
        with pytest.raises(QueryError):
            sql.query(bad)
    assert ensure.calls == 0
    assert dataset["cat"].content_rows(dataset["paths"], dataset["sizes"], dataset["mtimes"]) == [None] * 6


def test_the_view_never_shows_content_of_another_file_version(tmp_path):
    p = write(tmp_path / "a", b"version one")
    sizes, mtimes = identity([p])
    cat = Catalog(str(tmp_path / "c" / "catalog.sqlite"))
    cat.ensure_content([p], sizes, mtimes)
    rows = lambda: [(0, path_key(p), display_path(p), "null", 0, "", 1, 1)]
    old_view = DatasetSQL(cat.path, None, rows, identity=(sizes, mtimes))
    assert old_view.query("SELECT sha256 FROM files")[0][0] == hashlib.sha256(b"version one").hexdigest()
    write(p, b"version two, longer")  # another dataset (or process) catalogs the new version
    sizes2, mtimes2 = identity([p])
    cat.ensure_content([p], sizes2, mtimes2)
    stale = DatasetSQL(cat.path, None, rows, identity=(sizes, mtimes))
    assert stale.query("SELECT sha256, entropy, printable, zeros, histogram FROM files")[0] == (None,) * 5
    fresh = DatasetSQL(cat.path, None, rows, identity=(sizes2, mtimes2))
    assert fresh.query("SELECT sha256 FROM files")[0][0] == hashlib.sha256(b"version two, longer").hexdigest()
    # and the old dataset asking for content of its (gone) version is told the file changed
    asking = DatasetSQL(cat.path, None, rows, identity=(sizes, mtimes),
                        ensure_content=lambda: cat.ensure_content([p], sizes, mtimes))
    with pytest.raises(FileChangedError):  # (compiled first with its parameters, then the pass is refused)
        asking.query("SELECT entropy FROM files WHERE size > ?", (0,))


def test_sql_functions_in_the_view(dataset):
    sql, datas = dataset["sql"], dataset["datas"]
    rows = sql.query("SELECT file_id, entropy, hist_entropy(histogram), hist_total(histogram), size, "
                     "hist_fraction(histogram, 48, 57), hist_count(histogram, 0, 0), hist_mode(histogram), "
                     "hist_json(histogram) FROM files ORDER BY file_id")
    for (_fid, ent, hent, total, size, digits, zeros, mode, js), data in zip(rows, datas):
        arr = np.frombuffer(data, dtype=np.uint8)
        assert hent == ent and total == size == len(data)
        assert digits == (np.count_nonzero((arr >= 48) & (arr <= 57)) / len(data) if data else 0.0)
        assert zeros == data.count(0)
        assert mode == (int(np.argmax(np.bincount(arr, minlength=256))) if data else None)
        assert json.loads(js) == np.bincount(arr, minlength=256).tolist()
    # nearest neighbour by byte distribution: each text file is closer to a text file than to the random one
    pairs = sql.query("SELECT a.file_id, b.file_id, hist_distance(a.histogram, b.histogram) FROM files a, files b "
                      "WHERE a.file_id < b.file_id")
    dist = {(a, b): d for a, b, d in pairs}
    assert dist[(0, 3)] > dist[(3, 5)]
    assert all(0.0 <= d <= 1.0 for d in dist.values())
    with pytest.raises(QueryError, match=r"hist_fraction\(h, lo, hi\): hi must be a byte value 0..255, got 300"):
        sql.query("SELECT hist_fraction(histogram, 0, 300) FROM files")
    with pytest.raises(QueryError, match="hist_entropy.*512, 1024 or 2048 bytes"):
        sql.query("SELECT hist_entropy(x'0102') FROM files")


def test_function_values_against_numpy():
    rng = np.random.default_rng(9)
    conn = sqlite3.connect(":memory:")
    register_functions(conn)
    a = rng.integers(0, 1000, 256).astype(np.uint64)
    b = rng.integers(0, 1000, 256).astype(np.uint64)
    b[:100] = 0
    ba, bb = encode_histogram(a), encode_histogram(b)
    p, q = a / a.sum(), b / b.sum()
    m = (p + q) / 2
    kl = lambda x: float(sum(xi * np.log2(xi / mi) for xi, mi in zip(x, m) if xi > 0))
    js = np.sqrt((kl(p) + kl(q)) / 2)
    got = conn.execute("SELECT hist_distance(?, ?), hist_l1(?, ?), hist_distance(?, ?), hist_l1(?, ?)",
                       (ba, bb, ba, bb, ba, ba, ba, ba)).fetchone()
    assert got == pytest.approx((js, np.abs(p - q).sum(), 0.0, 0.0))
    assert js_distance(a, b) == js_distance(b, a)
    disjoint_a, disjoint_b = np.zeros(256, np.uint64), np.zeros(256, np.uint64)
    disjoint_a[1], disjoint_b[2] = 5, 9
    assert js_distance(disjoint_a, disjoint_b) == pytest.approx(1.0) and l1_distance(disjoint_a, disjoint_b) == 2.0
    empty = np.zeros(256, np.uint64)
    assert (js_distance(empty, empty), js_distance(empty, a), l1_distance(empty, a)) == (0.0, 1.0, 2.0)
    # NULL in, NULL out (content not computed)
    assert conn.execute("SELECT hist_entropy(NULL), hist_distance(?, NULL), hist_count(NULL, 0, 1)",
                        (ba,)).fetchone() == (None, None, None)


def test_functions_are_registered_deterministic():
    """SQLite accepts only deterministic functions in an index expression."""
    conn = sqlite3.connect(":memory:")
    register_functions(conn)
    conn.execute("CREATE TABLE t(h BLOB)")
    conn.execute("INSERT INTO t VALUES (?)", (encode_histogram(np.arange(256, dtype=np.uint64)),))
    for name, (n_args, _) in FUNCTIONS.items():
        args = ", ".join(["h"] + {1: [], 2: ["h"], 3: ["0", "9"]}[n_args])
        conn.execute(f"CREATE INDEX i_{name} ON t({name}({args}))")
    assert conn.execute("SELECT hist_total(h) FROM t").fetchone()[0] == sum(range(256))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 2**40), min_size=256, max_size=256), st.integers(0, 255), st.integers(0, 255))
def test_count_and_fraction_match_numpy(counts, lo, hi):
    lo, hi = min(lo, hi), max(lo, hi)
    h = np.array(counts, dtype=np.uint64)
    conn = sqlite3.connect(":memory:")
    register_functions(conn)
    got = conn.execute("SELECT hist_count(?, ?, ?), hist_fraction(?, ?, ?), hist_total(?), hist_mode(?)",
                       (encode_histogram(h), lo, hi) * 2 + (encode_histogram(h),) * 2).fetchone()
    total = int(h.sum())
    assert got[0] == int(h[lo:hi + 1].sum())
    assert got[1] == (int(h[lo:hi + 1].sum()) / total if total else 0.0)
    assert got[2] == total
    assert got[3] == (int(np.argmax(h)) if total else None)


def test_progress_bar_when_verbose(tmp_path, capsys):
    from consumer.catalog.content import compute_content
    paths = [write(tmp_path / f"f{i}", b"x" * i) for i in range(10)]
    assert [s.size for s in compute_content(paths, verbose=True)] == list(range(10))
    assert "content" in capsys.readouterr().err
