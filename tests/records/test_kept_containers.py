"""Containers stay open between batches (their descriptors kept by the containers' source), and a container changed
while the dataset is open is still never served: written in place, truncated, appended to, replaced by a rename,
removed or swapped for a link after batches were served, the next batch raises FileChangedError naming it. A forked
child and a pickled dataset read the same batches; ``ds.close()`` closes the kept descriptors."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import FileChangedError

from ..helpers.descriptors import held_under
from .writers import write_jsonl, write_lines

CHANGES = ["rewrite", "truncate", "append", "rename-over", "delete", "symlink"]


def _change(path: Path, how: str) -> None:
    data = path.read_bytes()
    st = os.stat(path)
    if how == "rewrite":  # same size, one byte of a text flipped, the mtime put back (only the ctime tells)
        k = data.index(b"x")
        path.write_bytes(data[:k] + b"y" + data[k + 1:])
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif how == "truncate":
        os.truncate(path, len(data) // 2)
    elif how == "append":
        with open(path, "ab") as f:
            f.write(data[:20])
    elif how == "rename-over":  # identical bytes in a new file, renamed over the container
        path.with_suffix(".new").write_bytes(data)
        os.replace(path.with_suffix(".new"), path)
    elif how == "delete":
        path.unlink()
    else:
        path.unlink()
        path.symlink_to("/dev/zero")


def _dataset(tmp_path: Path, kind: str, cache: bool) -> tuple[Consumer, list[Path]]:
    rng = np.random.default_rng(1)
    texts = [[("x" * int(n)) + f" {c}-{k} café" for k, n in enumerate(rng.integers(20, 300, 40))] for c in range(4)]
    root = tmp_path / "data"
    root.mkdir()
    if kind == "jsonl":
        paths = [write_jsonl(root / f"c{c}.jsonl", t) for c, t in enumerate(texts)]
    else:
        paths = [write_lines(root / f"c{c}.txt", [s.encode() for s in t]) for c, t in enumerate(texts)]
    ds = Consumer(str(root), documents=kind, style="diff", n_bytes=1, seqlen=128, metadata=None,
                  cache_dir=tmp_path / "cache" if cache else False)
    return ds, paths


@pytest.mark.parametrize("how", CHANGES)
@pytest.mark.parametrize("kind", ["jsonl", "lines"])
def test_a_container_changed_after_batches_were_served_is_refused_at_the_next_batch(tmp_path, kind, how) -> None:
    ds, paths = _dataset(tmp_path, kind, cache=how in ("rewrite", "rename-over"))
    every = np.arange(len(ds))
    first = ds.fetch_numpy(every)["input_array"]
    assert np.array_equal(ds.fetch_numpy(every)["input_array"], first)  # the same rows from kept descriptors
    kept = ds.documents.source.containers.kept
    assert len(kept) == 4 and all(e.snapshot is not None for e in kept.entries.values())
    _change(paths[2], how)
    with pytest.raises(FileChangedError, match=paths[2].name):
        ds.fetch_numpy(every)
    with pytest.raises(FileChangedError, match=paths[2].name):  # never served later either
        ds.fetch_numpy(np.array([80, 81]))  # documents of c2
    assert np.array_equal(ds.fetch_numpy(np.arange(40))["input_array"], first[:40])  # c0 is unchanged


def _child_rows(ds: Consumer, ids: np.ndarray, conn) -> None:
    try:
        conn.send((ds.fetch_numpy(ids)["input_array"], ds.documents.source.containers.kept.pid == os.getpid()))
    except BaseException as e:  # noqa: BLE001  (sent to the parent)
        conn.send(repr(e))
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["jsonl", "lines"])
def test_a_forked_child_and_a_pickled_copy_read_the_same_batches(tmp_path, kind) -> None:
    ds, paths = _dataset(tmp_path, kind, cache=True)
    ids = np.random.default_rng(3).integers(0, len(ds), 32)
    want = ds.fetch_numpy(ids)["input_array"]
    ctx = multiprocessing.get_context("fork")
    mine, theirs = ctx.Pipe()
    child = ctx.Process(target=_child_rows, args=(ds, ids, theirs))
    child.start()
    got = mine.recv()
    child.join(60)
    assert child.exitcode == 0 and not isinstance(got, str), got
    assert np.array_equal(got[0], want) and got[1]  # read with the child's own descriptors
    assert np.array_equal(ds.fetch_numpy(ids)["input_array"], want)  # the parent's are intact
    copy = pickle.loads(pickle.dumps(ds))
    assert len(copy.documents.source.containers.kept) == 0
    assert np.array_equal(copy.fetch_numpy(ids)["input_array"], want)
    _change(paths[1], "rename-over")
    for d in (ds, copy):
        with pytest.raises(FileChangedError, match=paths[1].name):
            d.fetch_numpy(np.arange(len(ds)))


def test_close_closes_the_kept_containers_and_reading_opens_them_again(tmp_path) -> None:
    gc.collect()
    before = held_under(tmp_path)
    ds, _ = _dataset(tmp_path, "jsonl", cache=False)
    rows = ds.fetch_numpy(np.arange(len(ds)))["input_array"]
    assert held_under(tmp_path) - before >= 4
    ds.close()
    assert len(ds.documents.source.containers.kept) == 0
    assert np.array_equal(ds.fetch_numpy(np.arange(len(ds)))["input_array"], rows)
    with ds:
        pass
    assert len(ds.documents.source.containers.kept) == 0
