"""The merge's table, order and token copy (consumer/packed/merge_table.py), against plain Python: joined paths,
corpus order (class then path; records by container then store order; names that are not UTF-8 included), a
path in two stores refused naming both, and the documents' tokens copied in any order and chunk size."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, merge_packed
from consumer.errors import InputError
from consumer.packed.merge_table import store_pieces
from consumer.packed.open import load_store
from consumer.sources.paths import PathList

_names = st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=6), max_size=8)


@given(parts=st.lists(_names, max_size=4))
def test_joined_paths_are_the_lists_one_after_another(parts):
    joined = PathList.concat([PathList.of(p) for p in parts])
    assert list(joined) == [x for p in parts for x in p]


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(0, 12), min_size=1, max_size=30), chunk=st.integers(1, 25),
       stores=st.integers(1, 3), seed=st.integers(0, 5), scatter=st.booleans())
def test_store_pieces_copy_each_document_once_in_order(lengths, chunk, stores, seed, scatter):
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, stores, len(lengths))
    tokens = [np.arange(1000 * k, 1000 * k + 400, dtype=np.uint16) for k in range(stores)]
    starts = np.zeros(len(lengths), dtype=np.int64)
    for k in range(stores):  # each store's documents back to back, or scattered over it
        mine = np.flatnonzero(owner == k)
        sizes = np.array(lengths, dtype=np.int64)[mine]
        at = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if not scatter else rng.integers(0, 400 - 12, mine.size)
        starts[mine] = at
    reads = []

    def reader(k):
        def read(s, c):
            reads.append((k, s, c))
            return tokens[k][s:s + c]
        return read

    got = list(store_pieces([reader(k) for k in range(stores)], owner, starts, np.array(lengths), chunk,
                            np.dtype(np.uint16)))
    flat = np.concatenate([t for t, _, _ in got]) if got else np.zeros(0, np.uint16)
    want = np.concatenate([tokens[o][s:s + n] for o, s, n in zip(owner, starts, lengths)])
    assert flat.tolist() == want.tolist()
    assert all(int(n.sum()) <= chunk and t.size == int(n.sum()) for t, n, _ in got)
    firsts = [bool(f) for _, n, first in got for f, m in zip(first, n) if m > 0 or f]
    assert sum(firsts) == len(lengths)  # each document starts once


def _files(root: Path, names: list[bytes]) -> dict[str, list[str]]:
    """Files named ``names`` (bytes: any name the file system takes) in class folders x/ and y/."""
    out: dict[str, list[str]] = {}
    for i, name in enumerate(names):
        cls = "x" if i % 3 else "y"
        (root / cls).mkdir(parents=True, exist_ok=True)
        path = os.fsencode(root / cls) + b"/" + name
        with open(path, "wb") as f:
            f.write(b"doc %d" % i)
        out.setdefault(cls, []).append(os.fsdecode(path))
    return out


@pytest.mark.parametrize("odd", [False, True])
def test_a_merge_is_in_corpus_order_whatever_the_names(tmp_path, odd):
    names = [b"b#2", b"a", b"b#10", "é".encode(), b"Z", b"a b", b"c.txt", b"\xe2\x82\xac"]
    if odd:
        names.append(b"\xff\xfe-not-utf8")  # kept with surrogate escapes: sorted as str
    fps = _files(tmp_path / "corpus", names)
    parts = []
    for k in range(2):  # every other file of each class in each store
        shard = {c: p[k::2] for c, p in fps.items() if p[k::2]}
        prefix = str(tmp_path / f"s{k}")
        Consumer(shard, metadata=None, cache_dir=False, class_to_id={"x": 0, "y": 1}).pack(prefix)
        parts.append(prefix)
    merge_packed(parts, str(tmp_path / "m"))
    merged = load_store(str(tmp_path / "m"))
    want = sorted((c, p) for c, paths in fps.items() for p in paths)
    assert list(merged.paths) == [p for _, p in want]
    whole = str(tmp_path / "whole")
    Consumer(fps, metadata=None, cache_dir=False, class_to_id={"x": 0, "y": 1}).pack(whole)
    assert Path(whole + ".bin").read_bytes() == (tmp_path / "m.bin").read_bytes()


def test_records_merge_by_container_then_record(tmp_path):
    lines = {name: [f"{name} line {i}".encode() for i in range(12)] for name in ("b#c.txt", "a.txt")}
    for name, docs in lines.items():
        (tmp_path / name).write_bytes(b"\n".join(docs) + b"\n")
    prefixes = []
    for name in lines:  # one store per container, given in the wrong order
        prefix = str(tmp_path / f"store-{name[0]}")
        Consumer(str(tmp_path / name), documents="lines", cache_dir=False).pack(prefix)
        prefixes.append(prefix)
    merge_packed(prefixes, str(tmp_path / "m"))
    got = list(load_store(str(tmp_path / "m")).paths)
    want = [f"{tmp_path / name}#{i}" for name in sorted(lines) for i in range(12)]
    assert got == want  # a.txt before b#c.txt (its "#" is not a record's), and #10 after #9


def test_a_path_in_two_stores_is_refused_naming_both(tmp_path):
    fps = _files(tmp_path / "corpus", [b"one", b"two", b"three"])
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    Consumer(fps, metadata=None, cache_dir=False).pack(a)
    Consumer({"x": fps["x"]}, metadata=None, cache_dir=False).pack(b)
    with pytest.raises(InputError, match="is in two stores") as e:
        merge_packed([a, b], str(tmp_path / "m"))
    assert a in str(e.value) and b in str(e.value)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_merge_equals_one_pack_for_random_shards(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("m")
    names = data.draw(st.lists(st.binary(min_size=1, max_size=5).filter(lambda b: b"/" not in b and b"\0" not in b
                                                                       and b not in (b".", b"..")
                                                                       and not b.startswith(b".")),
                               min_size=2, max_size=10, unique=True))
    fps = _files(tmp / "corpus", names)
    flat = [(c, p) for c, ps in fps.items() for p in ps]
    shard = data.draw(st.lists(st.integers(0, 1), min_size=len(flat), max_size=len(flat)))
    prefixes = []
    for k in range(2):
        part: dict[str, list[str]] = {}
        for (c, p), s in zip(flat, shard):
            if s == k:
                part.setdefault(c, []).append(p)
        if part:
            prefix = str(tmp / f"s{k}")
            Consumer(part, metadata=None, cache_dir=False, class_to_id={"x": 0, "y": 1}).pack(prefix)
            prefixes.append(prefix)
    merge_packed(prefixes, str(tmp / "m"))
    Consumer(fps, metadata=None, cache_dir=False, class_to_id={"x": 0, "y": 1}).pack(str(tmp / "whole"))
    for suffix in (".bin", ".idx"):
        assert (tmp / f"whole{suffix}").read_bytes() == (tmp / f"m{suffix}").read_bytes()
