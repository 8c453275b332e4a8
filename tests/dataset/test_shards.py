"""Indexing and packing across machines: 3 shards (consumer index/pack --shard i/3) joined with consumer merge
equal the single-machine run: the same catalog rows, and byte for byte the same .bin/.idx and file table."""

from __future__ import annotations

import numpy as np
import pytest

from consumer import Consumer
from consumer.catalog.catalog import Catalog
from consumer.cli.main import main

from ..conftest import write_corpus

SIZES = {"cat": [3, 40, 90, 120, 7, 64, 300, 18], "dog": [5, 500, 31, 64, 77, 12, 1], "eel": [2500, 11, 9, 100]}


def test_three_shards_merged_equal_one_run(tmp_path, capsys):
    root = tmp_path / "data"
    write_corpus(root, SIZES)
    opts = ["--seqlen", "64", "--quiet"]
    assert main(["pack", str(root), str(tmp_path / "single"), "--cache-dir", str(tmp_path / "c"), *opts]) == 0
    for i in range(3):
        assert main(["pack", str(root), str(tmp_path / f"part{i}"), "--shard", f"{i}/3",
                     "--cache-dir", str(tmp_path / f"c{i}"), *opts]) == 0
        assert main(["index", str(root), "--shard", f"{i}/3", "--cache-dir", str(tmp_path / f"i{i}"), *opts]) == 0
    parts = [str(tmp_path / f"part{i}") for i in range(3)]
    assert main(["merge", str(tmp_path / "merged"), *parts]) == 0
    for suffix in (".bin", ".idx", ".consumer.npz"):
        assert (tmp_path / f"merged{suffix}").read_bytes() == (tmp_path / f"single{suffix}").read_bytes(), suffix
    sizes = [Consumer.from_packed(p).get_dict()["total_files"] for p in parts]
    assert sum(sizes) == 19 and min(sizes) > 0  # every file in exactly one shard, every shard non-empty
    merged = Consumer.from_packed(tmp_path / "merged", style="concat", seqlen=64)
    single = Consumer(str(root), style="concat", seqlen=64, cache_dir=False)
    assert np.array_equal(merged.fetch_numpy(np.arange(len(merged)))["input_array"],
                          single.fetch_numpy(np.arange(len(single)))["input_array"])
    assert merged.class_to_id == single.class_to_id
    assert main(["merge", "--catalogs", str(tmp_path / "cm"), *[str(tmp_path / f"i{i}") for i in range(3)]]) == 0
    assert main(["index", str(root), "--cache-dir", str(tmp_path / "cs"), *opts]) == 0
    joined, whole = Catalog(str(tmp_path / "cm" / "catalog.sqlite")), Catalog(str(tmp_path / "cs" / "catalog.sqlite"))
    assert joined.dump() == whole.dump() and joined.count() == 19


@pytest.mark.parametrize("shard, message", [("3/3", "expected I/N with 0 <= I < N"), ("x", "expected I/N")])
def test_bad_shards_name_the_option(tmp_path, capsys, shard, message):
    write_corpus(tmp_path / "data", SIZES)
    with pytest.raises(SystemExit):
        main(["index", str(tmp_path / "data"), "--shard", shard])
    assert message in capsys.readouterr().err
