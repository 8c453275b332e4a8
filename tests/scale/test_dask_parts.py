"""A cluster build of a local folder with a cache directory writes parts on the workers (``consumer/scale/parts.py``:
listing, files, headers) and the client maps them: the dataset equals the local build (document order, samples,
get_dict and its fingerprint, SQL answers), a warm reopen maps the parts it wrote (nothing walked is rewritten, no
libmagic), and a damaged part is refused, never served (a task finds it damaged, moves it aside and writes it
again; a reader raises)."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from consumer import Consumer
from consumer.dataset.clear import clear
from consumer.errors import FormatError, InputError
from consumer.scale.parts import PARTS_DIR, PartRef, content_name, find_part, open_part, write_part

pytest.importorskip("distributed")

STATEMENTS = ["SELECT file_id, path, class, size, mtime_ns, header FROM files ORDER BY file_id",
              "SELECT class, count(*), sum(size), min(path) FROM files GROUP BY class ORDER BY class",
              "SELECT description, count(*) FROM files GROUP BY description ORDER BY description",
              "SELECT path, mime FROM files WHERE size > 100 ORDER BY path"]


def _tree(root, flat: bool = False) -> str:
    """Text and binary files in nested class folders (or one flat folder), a hard link (an alias) and a broken link."""
    for i in range(60):
        folder = root if flat else root / f"k{i % 3}" / ("deep/er" if i % 5 == 0 else f"s{i % 4}")
        folder.mkdir(parents=True, exist_ok=True)
        data = (b"line %d of some text\n" % i) * (i + 1) if i % 2 else bytes(range(256)) * (i % 7) + b"\x7fELF"
        (folder / f"f{i:02d}.{'txt' if i % 2 else 'bin'}").write_bytes(data)
    first = next(p for p in sorted(root.rglob("f01.txt")))
    os.link(first, first.parent / "z_alias.txt")
    os.symlink(root / "nowhere", first.parent / "broken.txt")
    return str(root)


def _parts(cache: str) -> dict[str, int]:
    """Every part folder under ``cache`` with the inode of its part.json (a part written again gets a new one)."""
    folder = os.path.join(cache, PARTS_DIR)
    return {n: os.stat(os.path.join(folder, n, "part.json")).st_ino for n in sorted(os.listdir(folder))}


def _same_dataset(local: Consumer, other: Consumer) -> None:
    assert list(other.files) == list(local.files) and other.classes == local.classes
    assert other.get_dict() == local.get_dict()
    assert other.get_dict(include_files=True) == local.get_dict(include_files=True)
    ids = np.arange(len(local))
    a, b = local.fetch_numpy(ids), other.fetch_numpy(ids)
    assert len(other) == len(local) and a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    for statement in STATEMENTS:
        assert other.sql(statement) == local.sql(statement), statement


@pytest.mark.parametrize("flat, metadata", [(False, "file"), (True, "mime"), (False, None)])
def test_a_build_on_parts_equals_the_local_build(tmp_path, dask_client, flat, metadata):
    root = _tree(tmp_path / "data", flat)
    c1, c2 = str(tmp_path / "c1"), str(tmp_path / "c2")
    with pytest.warns(Warning, match="1 bad file"):
        local = Consumer(root, cache_dir=c1, seqlen=48, metadata=metadata, on_bad_file="skip")
    with pytest.warns(Warning, match="1 bad file"):
        other = Consumer(root, cache_dir=c2, seqlen=48, metadata=metadata, on_bad_file="skip", engine=dask_client)
    assert other.build_info["parts"]["listing"] >= 3 and other.build_info["key"] == local.build_info["key"]
    calls = len(local.files) if metadata else 0
    assert other.build_info["libmagic_calls"] == local.build_info["libmagic_calls"] == calls
    for name in ("skipped", "skipped_examples", "aliases", "cache"):
        assert other.build_info[name] == local.build_info[name], name
    refs = [find_part(c2, n) for n in _parts(c2)]
    assert {r.kind for r in refs} == ({"listing", "files", "headers"} if metadata else {"listing", "files"})
    assert max(len(pickle.dumps(r)) for r in refs) < 2048  # what a task sends the client: no path, no per-file value
    for kind in ("listing", "files", "headers"):  # every part holds files, and each file is in one of each kind
        rows = [r.rows for r in refs if r.kind == kind]
        assert all(rows) and sum(rows) == (0 if kind == "headers" and not metadata else
                                           len(other.files) + (kind == "listing")), (kind, rows)
    _same_dataset(local, other)


def test_a_bad_file_raises_as_locally_and_leaves_no_entry(tmp_path, dask_client):
    root = _tree(tmp_path / "data")
    with pytest.raises(InputError) as local:
        Consumer(root, cache_dir=str(tmp_path / "c1"))
    with pytest.raises(InputError) as remote:
        Consumer(root, cache_dir=str(tmp_path / "c2"), engine=dask_client)
    assert str(remote.value) == str(local.value) and "broken.txt" in str(remote.value)
    assert not os.path.exists(tmp_path / "c2" / "index")


def test_a_warm_reopen_maps_the_parts_it_wrote(tmp_path, dask_client):
    root = _tree(tmp_path / "data")
    cache = str(tmp_path / "cache")
    with pytest.warns(Warning, match="1 bad file"):
        first = Consumer(root, cache_dir=cache, seqlen=48, on_bad_file="skip", engine=dask_client)
    written = _parts(cache)
    with pytest.warns(Warning, match="1 bad file"):
        again = Consumer(root, cache_dir=cache, seqlen=48, on_bad_file="skip", engine=dask_client)
    assert again.build_info["cache"] == "hit" and again.build_info["libmagic_calls"] == 0
    assert _parts(cache) == written  # the same parts, none written again
    with pytest.warns(Warning, match="1 bad file"):
        other = Consumer(root, cache_dir=cache, seqlen=64, on_bad_file="skip", engine=dask_client)
    assert other.build_info["cache"] == "miss" and other.build_info["libmagic_calls"] == 0  # headers parts reused
    assert _parts(cache) == written
    _same_dataset(first, again)
    os.makedirs(os.path.join(cache, PARTS_DIR, "mine"))  # not a name of ours: kept
    assert clear(cache) > 0 and os.listdir(os.path.join(cache, PARTS_DIR)) == ["mine"]


def test_a_damaged_part_is_moved_aside_and_made_again(tmp_path, dask_client):
    root = _tree(tmp_path / "data")
    c1, c2 = str(tmp_path / "c1"), str(tmp_path / "c2")
    with pytest.warns(Warning, match="1 bad file"):
        local = Consumer(root, cache_dir=c1, seqlen=48, on_bad_file="skip")
    with pytest.warns(Warning, match="1 bad file"):
        Consumer(root, cache_dir=c2, seqlen=48, on_bad_file="skip", engine=dask_client)
    folder = os.path.join(c2, PARTS_DIR)
    files = next(n for n in os.listdir(folder) if n.startswith("files-"))
    listing = next(n for n in os.listdir(folder) if n.startswith("listing-"))
    for name, column in ((files, "sizes.npy"), (listing, "paths.npy")):
        path = os.path.join(folder, name, column)
        data = bytearray(open(path, "rb").read())
        data[-1] ^= 0x40  # one bit of the last value flipped in place (its change time moves: checked by CRC)
        with open(path, "r+b") as f:
            f.write(data)
    with pytest.raises(FormatError, match="CRC-32C"):
        open_part(c2, files)
    with pytest.warns(Warning, match="1 bad file"):  # an index entry of other settings: the files part is read
        other = Consumer(root, cache_dir=c2, seqlen=48, on_bad_file="skip", engine=dask_client, style="concat")
    with pytest.warns(Warning, match="1 bad file"):
        local = Consumer(root, cache_dir=c1, seqlen=48, on_bad_file="skip", style="concat")
    names = os.listdir(folder)
    assert sum(n.startswith(f"{files}.corrupt-") for n in names) == 1 and files in names
    assert sum(n.startswith(f"{listing}.corrupt-") for n in names) == 1 and listing in names
    assert open_part(c2, files)["sizes"].tolist() == local.documents.doc_size.tolist()
    _same_dataset(local, other)


def test_a_part_is_refused_when_damaged_in_any_way(tmp_path):
    cache = str(tmp_path)
    columns = {"sizes": np.arange(5, dtype=np.int64), "ident": np.arange(10, dtype=np.int64).reshape(5, 2)}
    name = content_name("listing", columns, {"bad": {}})
    ref = write_part(cache, name, columns, {"bad": {}}, 5)
    assert ref.rows == 5 and ref.kind == "listing" and write_part(cache, name, columns, {"bad": {}}, 5) == ref
    got = open_part(cache, ref)
    assert got["sizes"].tolist() == [0, 1, 2, 3, 4] and got["ident"].shape == (5, 2)
    folder = os.path.join(cache, PARTS_DIR, name)
    manifest = os.path.join(folder, "part.json")
    text = open(manifest).read()
    with pytest.raises(FormatError, match="the task wrote CRC-32C"):  # a ref from another write of that name
        open_part(cache, PartRef(ref.name, ref.rows, ref.facts, {**ref.sums, "sizes": ("00000000", 168)}))
    open(manifest, "w").write(text.replace('"rows": 5', '"rows": 6'))
    with pytest.raises(FormatError, match="checksum"):
        open_part(cache, ref)
    open(manifest, "w").write(text)
    sizes = os.path.join(folder, "sizes.npy")
    whole = open(sizes, "rb").read()
    open(sizes, "wb").write(whole[:-8])
    with pytest.raises(FormatError, match="expected 168 bytes"):
        open_part(cache, ref)
    os.remove(sizes)
    with pytest.raises(FormatError, match="cannot be read"):
        open_part(cache, ref)
    assert find_part(cache, name) is None and not os.path.exists(folder)  # moved aside, kept for inspection
    assert any(n.startswith(f"{name}.corrupt-") for n in os.listdir(os.path.join(cache, PARTS_DIR)))
    assert write_part(cache, name, columns, {"bad": {}}, 5) == ref and open_part(cache, ref)["sizes"][4] == 4
