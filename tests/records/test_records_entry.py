"""A records dataset's own entry in the index cache (consumer/dataset/records_entry.py): a reopen of unchanged
containers maps the assembled documents and sample index and serves exactly what the first build served, for every
kind of container and style; a changed container, a damaged entry or a missing decode cache is never served (the
dataset is assembled again); a pickled dataset carries the entry's name, not its arrays."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.errors import FileChangedError

from .writers import write_jsonl, write_lines, write_parquet, write_tar

DOCS = [f"doc{i} {'x' * (i % 7)}".encode() for i in range(23)]


def _containers(tmp: Path, kind: str, docs: list[bytes]) -> tuple[object, dict]:
    """Two containers of ``kind`` holding ``docs`` (split in two), as fps, and the options to read them."""
    a, b = docs[:len(docs) // 2], docs[len(docs) // 2:]
    if kind == "lines":
        return [str(write_lines(tmp / "a.txt", a)), str(write_lines(tmp / "b.txt", b))], {"documents": "lines"}
    if kind == "jsonl":
        return [str(write_jsonl(tmp / "a.jsonl", [d.decode() for d in a])),
                str(write_jsonl(tmp / "b.jsonl", [d.decode() for d in b]))], {"documents": "jsonl"}
    if kind == "jsonl classes":  # class_field: the documents are reordered by class
        for name, part in (("a", a), ("b", b)):
            rows = [f'{{"text": "{d.decode()}", "lang": "{"en" if i % 3 else "fr"}"}}' for i, d in enumerate(part)]
            (tmp / f"{name}.jsonl").write_text("\n".join(rows) + "\n")
        return [str(tmp / "a.jsonl"), str(tmp / "b.jsonl")], {"documents": "jsonl", "class_field": "lang"}
    if kind == "jsonl.gz":  # compressed: the documents come from the decode caches
        for name, part in (("a", a), ("b", b)):
            with gzip.open(tmp / f"{name}.jsonl.gz", "wt") as f:
                f.writelines(f'{{"text": "{d.decode()}"}}\n' for d in part)
        return [str(tmp / "a.jsonl.gz"), str(tmp / "b.jsonl.gz")], {"documents": "jsonl"}
    if kind == "parquet":
        return [str(write_parquet(tmp / "a.parquet", a)), str(write_parquet(tmp / "b.parquet", b))], \
            {"documents": "parquet"}
    if kind == "tar":  # member names: the paths are stored in the entry
        return {"one": [str(write_tar(tmp / "a.tar", a))], "two": [str(write_tar(tmp / "b.tar", b))]}, \
            {"documents": "tar"}
    raise AssertionError(kind)


def _served(ds: Consumer) -> tuple:
    """Everything a user sees of a dataset: samples, classes, paths, SQL rows."""
    ids = list(range(len(ds)))
    return (len(ds), ds.classes, list(ds.files), ds[ids]["input_array"].tolist(),
            ds[ids, "supervised"]["class"].tolist(),
            ds.sql("SELECT doc_id, path, class, length FROM documents ORDER BY doc_id"))


KINDS = ["lines", "jsonl", "jsonl classes", "jsonl.gz", "parquet", "tar"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("style", ["diff", "concat"])
def test_a_reopen_maps_the_entry_and_serves_the_same(tmp_path, kind, style):
    fps, opts = _containers(tmp_path, kind, DOCS)
    cache = tmp_path / "cache"
    first = Consumer(fps, n_bytes=1, seqlen=16, style=style, cache_dir=cache, **opts)
    again = Consumer(fps, n_bytes=1, seqlen=16, style=style, cache_dir=cache, **opts)
    assert first.build_info["cache"] == "miss" and again.build_info["cache"] == "hit"
    assert first.build_info["index"] == "miss" and again.build_info["index"] == "hit"
    assert again.build_info["records"]["reused"] == 2 and again.build_info["records"]["documents"] == len(DOCS)
    assert _served(again) == _served(first)
    other = Consumer(fps, n_bytes=1, seqlen=8, style=style, cache_dir=cache, **opts)  # other settings: own entry
    assert len(other) >= len(first) and other.build_info["records"]["reused"] == 2
    assert _served(Consumer(fps, n_bytes=1, seqlen=16, style=style, cache_dir=False, **opts)) == _served(first)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=30), seqlen=st.integers(4, 48),
       style=st.sampled_from(["diff", "concat"]), n_bytes=st.sampled_from([1, 2]))
def test_reopened_equals_built_without_a_cache(tmp_path_factory, lengths, seqlen, style, n_bytes):
    tmp = tmp_path_factory.mktemp("entry")
    docs = [bytes([97 + (i + j) % 26 for j in range(n)]) for i, n in enumerate(lengths)]
    path = write_lines(tmp / "c.txt", docs)
    kw = {"documents": "lines", "n_bytes": n_bytes, "seqlen": seqlen, "style": style}
    Consumer(str(path), cache_dir=tmp / "cache", **kw)
    again = Consumer(str(path), cache_dir=tmp / "cache", **kw)
    assert again.build_info["index"] == "hit"
    assert _served(again) == _served(Consumer(str(path), cache_dir=False, **kw))


def _entry_dirs(cache: Path) -> list[Path]:
    return sorted(p.parent for p in (cache / "index").glob("*/description.json")
                  if '"records dataset"' in p.read_text())


def test_a_changed_container_gets_a_new_entry(tmp_path):
    fps, opts = _containers(tmp_path, "jsonl", DOCS)
    cache = tmp_path / "cache"
    Consumer(fps, seqlen=16, cache_dir=cache, **opts)
    write_jsonl(Path(fps[1]), ["changed", "texts"])
    again = Consumer(fps, seqlen=16, cache_dir=cache, **opts)
    assert again.build_info["index"] == "miss" and again.build_info["records"]["reused"] == 1
    assert len(again.files) == len(DOCS) // 2 + 2
    assert again.decode(again.document_tokens(len(again.files) - 1)) == b"texts"
    assert len(_entry_dirs(cache)) == 2


@pytest.mark.parametrize("array", ["doc_offset", "doc_length", "seg_len", "sample_tokens", "doc_class"])
def test_a_flipped_bit_in_the_entry_is_never_served(tmp_path, array):
    fps, opts = _containers(tmp_path, "jsonl classes", DOCS)
    cache = tmp_path / "cache"
    want = _served(Consumer(fps, seqlen=16, cache_dir=cache, **opts))
    (entry,) = _entry_dirs(cache)
    npy = entry / f"{array}.npy"
    data = bytearray(npy.read_bytes())
    data[-1] ^= 0x10
    npy.write_bytes(bytes(data))
    again = Consumer(fps, seqlen=16, cache_dir=cache, **opts)
    assert again.build_info["index"] == "miss"  # the entry read as missing: assembled again and written again
    assert again.build_info["records"]["reused"] == 2  # from the containers' own entries
    assert _served(again) == want
    assert Consumer(fps, seqlen=16, cache_dir=cache, **opts).build_info["index"] == "hit"


def test_a_decode_cache_that_is_gone_is_made_again(tmp_path):
    fps, opts = _containers(tmp_path, "jsonl.gz", DOCS)
    cache = tmp_path / "cache"
    want = _served(Consumer(fps, seqlen=16, cache_dir=cache, **opts))
    for decoded in (cache / "records").glob("*/*/decoded.bin"):
        decoded.write_bytes(decoded.read_bytes()[:-1])  # another size: the container's entry is scanned again
    again = Consumer(fps, seqlen=16, cache_dir=cache, **opts)
    assert again.build_info["index"] == "miss" and again.build_info["records"]["reused"] == 0
    assert _served(again) == want


def test_a_pickled_dataset_names_its_entry(tmp_path):
    docs = [f"line {i}".encode() for i in range(20_000)]
    path = write_lines(tmp_path / "c.txt", docs)
    kw = {"documents": "lines", "seqlen": 16, "cache_dir": tmp_path / "cache"}
    Consumer(str(path), **kw)
    ds = Consumer(str(path), **kw)
    blob = pickle.dumps(ds)
    assert len(blob) < 20_000  # the entry's name and the containers' listing, not 20,000 documents' arrays
    back = pickle.loads(blob)
    assert _served(back) == _served(ds)
    assert back.build_info["index"] == "hit"
    uncached = Consumer(str(path), documents="lines", seqlen=16, cache_dir=False)
    assert len(pickle.dumps(uncached)) > 100_000  # without an entry the arrays travel


def test_a_container_replaced_after_the_open_is_refused(tmp_path):
    fps, opts = _containers(tmp_path, "lines", DOCS)
    cache = tmp_path / "cache"
    Consumer(fps, seqlen=16, cache_dir=cache, **opts)
    ds = Consumer(fps, seqlen=16, cache_dir=cache, **opts)
    assert ds.build_info["index"] == "hit"
    write_lines(Path(fps[0]), [b"other"] * 30)
    with pytest.raises(FileChangedError):
        ds[np.arange(len(ds))]
