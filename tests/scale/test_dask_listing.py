"""A cluster build walks each class folder on a worker (the client lists the root and merges the parts): the
same listing as the local scan, nested folders, skipped bad files and aliases included, hence the same build."""

from __future__ import annotations

import os

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import InputError
from consumer.scale.engines import DaskEngine
from consumer.scale.scan import walker_on
from consumer.sources.listing import scan_directory

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
