"""A cluster build walks each class folder on a worker (the client lists the root and merges the parts): the
same listing as the local scan, nested folders, skipped bad files and aliases included, hence the same build."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import InputError
from consumer.scale.engines import DaskEngine, ExecutorEngine
from consumer.scale.scan import MAX_WALK_SLICES, walk_slices, walker_on
from consumer.sources.listing import scan_directory, walk_part
from consumer.sources.walk import BadFiles

from .test_dask_build import _same_build

pytest.importorskip("distributed")


def _tree(root) -> str:
    """Three classes with nested folders, a broken symlink, a hard link (an alias) and an empty class folder part."""
    for cls, files in {"a": ["x.txt", "sub/y.txt", "sub/deep/z.txt", "b-/w.txt", "b.txt"],
                       "b": ["one.bin", "two/three.bin"], "c": ["k.dat"]}.items():
        for i, name in enumerate(files):
            path = root / cls / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(bytes(range(i, i + 40 + 7 * i)) * (i + 1))
    os.symlink(root / "a" / "gone.txt", root / "a" / "sub" / "broken.txt")
    os.link(root / "b" / "one.bin", root / "b" / "two" / "alias.bin")
    return str(root)


def test_a_cluster_listing_equals_the_local_scan(tmp_path, dask_client):
    root = _tree(tmp_path / "data")
    local = scan_directory(root, "skip")
    remote = scan_directory(root, "skip", walker_on(DaskEngine(dask_client)))
    assert list(remote.paths) == list(local.paths) and len(local.paths) == 8
    for name in ("sizes", "stamps", "ident"):
        assert np.array_equal(getattr(remote, name), getattr(local, name))
    assert remote.corpus.class_names == local.corpus.class_names
    assert remote.report() == local.report() and local.report()["aliases"] == 1
    assert local.report()["skipped"] == {"broken symlink": 1}


def test_a_cluster_build_of_nested_folders_equals_the_local_build(tmp_path, dask_client):
    root = _tree(tmp_path / "data")
    c1, c2 = str(tmp_path / "c1"), str(tmp_path / "c2")
    with pytest.warns(Warning, match="1 bad file"):
        local = Consumer(root, cache_dir=c1, seqlen=32, on_bad_file="skip")
    with pytest.warns(Warning, match="1 bad file"):
        other = Consumer(root, cache_dir=c2, seqlen=32, on_bad_file="skip", engine=dask_client)
    assert other.build_info["skipped"] == local.build_info["skipped"] == {"broken symlink": 1}
    assert other.build_info["aliases"] == local.build_info["aliases"] == 1
    _same_build(tmp_path, local, other, c1, c2)


def test_a_bad_file_found_by_a_worker_raises_as_locally(tmp_path, dask_client):
    root = _tree(tmp_path / "data")
    with pytest.raises(InputError) as local:
        Consumer(root, cache_dir=False)
    with pytest.raises(InputError) as remote:
        Consumer(root, cache_dir=False, engine=dask_client)
    assert str(remote.value) == str(local.value) and "broken.txt" in str(remote.value)
    assert "on_bad_file='skip'" in str(remote.value)


def _flat(root, n: int = 23) -> str:
    """One folder of ``n`` files (no class folders: the class ``"null"``), a broken link and a hard link among them."""
    root.mkdir(parents=True)
    for i in range(n):
        (root / f"f{i:03d}.txt").write_bytes(bytes([i]) * (10 + i))
    os.symlink(root / "nowhere", root / "f010b.txt")
    os.link(root / "f003.txt", root / "f020b.txt")
    return str(root)


def _same_listing(got, want) -> None:
    assert list(got.paths) == list(want.paths)
    for name in ("sizes", "stamps", "ident"):
        assert np.array_equal(getattr(got, name), getattr(want, name))
    assert got.corpus.class_names == want.corpus.class_names
    assert got.corpus == want.corpus
    assert got.report() == want.report()


@pytest.mark.parametrize("parts", [1, 2, 3, 5, 40])
def test_the_slices_of_a_folder_in_order_are_its_whole_walk(tmp_path, parts):
    nested, flat = _tree(tmp_path / "nested"), _flat(tmp_path / "flat")
    for folder in (os.path.join(nested, "a"), os.path.join(nested, "b"), flat):
        whole = walk_part(folder, "skip")
        pieces = [walk_part(folder, "skip", j, parts) for j in range(parts)]
        assert [p for piece in pieces for p in piece.paths] == list(whole.paths) and len(whole.paths) > 1
        assert np.array_equal(np.concatenate([p.ident for p in pieces]), whole.ident)
        merged = BadFiles()
        for piece in pieces:
            merged.merge(piece.bad)
        assert merged == whole.bad
    with pytest.raises(InputError, match="part must be in"):
        walk_part(flat, "skip", 3, 3)


@pytest.mark.parametrize("slots", [1, 2, 3, 7, 64])
def test_a_sliced_listing_equals_the_local_scan(tmp_path, slots):
    """Any slot count (1 to 8 slices per folder) gives the local listing: a flat root, nested classes."""
    nested, flat = _tree(tmp_path / "nested"), _flat(tmp_path / "flat")
    with ThreadPoolExecutor(2) as pool:
        walker = walker_on(ExecutorEngine(pool, slots=slots))
        for root in (nested, flat):
            _same_listing(scan_directory(root, "skip", walker), scan_directory(root, "skip"))
        flat_local = scan_directory(flat, "skip")
        assert flat_local.report()["aliases"] == 1 and flat_local.report()["skipped"] == {"broken symlink": 1}
        with pytest.raises(InputError) as local:
            scan_directory(flat, "raise")
        with pytest.raises(InputError) as remote:
            scan_directory(flat, "raise", walker)
        assert str(remote.value) == str(local.value) and "f010b.txt" in str(remote.value)
    assert walk_slices(1, slots) == min(slots, MAX_WALK_SLICES) and walk_slices(slots, slots) == 1


def test_a_cluster_listing_of_a_flat_folder_and_of_one_class_equals_the_local_scan(tmp_path, dask_client):
    """The flat root (class "null") and a single class folder are split over the 3 workers, not listed here."""
    flat = _flat(tmp_path / "flat")
    one = tmp_path / "one"
    one.mkdir()
    _flat(one / "only", 31)
    walker = walker_on(DaskEngine(dask_client))
    for root in (flat, str(one)):
        _same_listing(scan_directory(root, "skip", walker), scan_directory(root, "skip"))
    c1, c2 = str(tmp_path / "c1"), str(tmp_path / "c2")
    with pytest.warns(Warning, match="1 bad file"):
        local = Consumer(flat, cache_dir=c1, seqlen=16, on_bad_file="skip")
    with pytest.warns(Warning, match="1 bad file"):
        other = Consumer(flat, cache_dir=c2, seqlen=16, on_bad_file="skip", engine=dask_client)
    assert other.build_info["aliases"] == local.build_info["aliases"] == 1
    _same_build(tmp_path, local, other, c1, c2)
