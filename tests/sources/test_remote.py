"""URL helpers, listings of an S3 prefix (moto server on 127.0.0.1) and of an HTTP directory, class
layout, sharding, size strings, and the MissingDependencyError of a missing optional dependency."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from consumer.errors import InputError
from consumer.sources.urls import (
    class_layout,
    expand_local,
    is_url,
    list_objects,
    local_path_of,
    normalise_etag,
    open_filesystem,
    shard_of,
    stat_objects,
)
from consumer.storage import parse_size

from ..helpers.remote_servers import etag_of_bytes, file_server, moto_server

pytest.importorskip("s3fs")
pytest.importorskip("moto")

ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="module")
def s3():
    """(storage_options, s3fs file system) of a moto S3 server running for this module."""
    with moto_server() as endpoint:
        so = {"endpoint_url": endpoint, "key": "test", "secret": "test"}
        fs, _ = open_filesystem("s3://x", so)
        yield so, fs


def _corpus(rng: np.random.Generator) -> dict[str, bytes]:
    out = {}
    for cls, n in (("cat", 4), ("dog", 3), ("eel", 1)):
        for i in range(n):
            out[f"{cls}/{i:02d}.bin"] = rng.integers(0, 256, int(rng.integers(0, 3000)), dtype=np.uint8).tobytes()
    out["dog/deep/x.bin"] = b"nested object"
    return out


def test_is_url_and_expand_local(tmp_path):
    assert is_url("s3://b/k") and is_url("https://h/x") and is_url("file:///tmp/x") and is_url("gs://b")
    assert not is_url("/tmp/x") and not is_url("~/x") and not is_url(Path("/tmp")) and not is_url(3)
    assert not is_url("C:\\data\\x")
    home = os.path.expanduser("~")
    assert expand_local("~/x") == os.path.join(home, "x")
    assert expand_local(Path("~/y")) == os.path.join(home, "y")
    assert expand_local("s3://b/~x") == "s3://b/~x"
    assert expand_local("/abs/~x") == "/abs/~x"
    assert local_path_of("file:///tmp/a%20b") == "/tmp/a b"
    assert local_path_of("s3://b/k") is None
    with pytest.raises(InputError, match="file://"):
        local_path_of("file://otherhost/x")


def test_parse_size_and_shards():
    assert parse_size("20GB") == 20 * 10**9
    assert parse_size("20GiB") == 20 * 2**30
    assert parse_size("1.5M") == 1_500_000
    assert parse_size(" 512 kib ") == 512 * 1024
    assert parse_size(4096) == 4096
    for bad in ("lots", "-1GB", "1XB", "GiB", -5, 1.5, True, None):
        with pytest.raises(InputError, match="remote_cache"):
            parse_size(bad, "remote_cache")
    urls = [f"s3://b/{i}" for i in range(300)]
    shards = shard_of(urls, 3)
    assert set(shards.tolist()) == {0, 1, 2}
    assert np.array_equal(shards[:100], shard_of(urls[:100], 3))  # stable when objects are added
    assert np.array_equal(shard_of(urls, 1), np.zeros(300, dtype=np.int64))
    with pytest.raises(InputError, match="n_shards"):
        shard_of(urls, 0)
    assert normalise_etag('"abc"') == "abc" and normalise_etag('W/"abc"') == "W/abc" and normalise_etag("") is None


def test_open_filesystem_errors():
    with pytest.raises(InputError, match="nosuchscheme"):
        open_filesystem("nosuchscheme://x/y")
    with pytest.raises(InputError, match="storage_options"):
        open_filesystem("s3://b/k", ["not", "a", "dict"])
    with pytest.raises(InputError, match="expected a URL"):
        open_filesystem("/local/path")


def test_list_s3_prefix(s3):
    so, fs = s3
    blobs = _corpus(np.random.default_rng(1))
    fs.mkdir("listing")
    before = time.time_ns()
    fs.pipe({f"listing/data/{k}": v for k, v in blobs.items()})
    fs.pipe({"listing/data/.hidden": b"x", "listing/data/cat/.DS_Store": b"y", "listing/other/z.bin": b"z"})
    listing = list_objects("s3://listing/data/", so)
    expected = sorted(f"s3://listing/data/{k}" for k in blobs)
    assert listing.urls == expected
    assert listing.root == "s3://listing/data/"
    assert listing.sizes.dtype == np.int64 and listing.mtimes_ns.dtype == np.int64
    assert listing.sizes.tolist() == [len(blobs[u[len("s3://listing/data/"):]]) for u in expected]
    # S3 ETags of single-part uploads are the MD5 of the content
    assert listing.etags == [etag_of_bytes(blobs[u[len("s3://listing/data/"):]]) for u in expected]
    assert (listing.mtimes_ns >= (before // 10**9 - 5) * 10**9).all()
    layout = class_layout(listing)
    assert list(layout) == ["cat", "dog", "eel"]
    assert layout["dog"] == ["s3://listing/data/dog/00.bin", "s3://listing/data/dog/01.bin",
                             "s3://listing/data/dog/02.bin", "s3://listing/data/dog/deep/x.bin"]
    # a change is visible to the next listing (no stale cached pages)
    fs.pipe("listing/data/cat/00.bin", b"changed!")
    again = list_objects("s3://listing/data", so)
    k = again.urls.index("s3://listing/data/cat/00.bin")
    assert again.sizes[k] == 8 and again.etags[k] == etag_of_bytes(b"changed!")
    with pytest.raises(InputError, match="no objects below 's3://listing/nothing-here'"):
        list_objects("s3://listing/nothing-here", so)


def test_class_layout_rules(s3):
    so, fs = s3
    fs.mkdir("layout")
    fs.pipe({"layout/flat/a.bin": b"a", "layout/flat/b.bin": b"b",
             "layout/mixed/a.bin": b"a", "layout/mixed/cls/b.bin": b"b"})
    assert class_layout(list_objects("s3://layout/flat", so)) == {
        "null": ["s3://layout/flat/a.bin", "s3://layout/flat/b.bin"]}
    with pytest.raises(InputError, match="mixes class prefixes with loose objects"):
        class_layout(list_objects("s3://layout/mixed", so))


def test_list_http_directory(tmp_path):
    blobs = _corpus(np.random.default_rng(2))
    for k, v in blobs.items():
        (tmp_path / k).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / k).write_bytes(v)
    with file_server(tmp_path) as server:
        listing = list_objects(server.url, None)
        assert listing.urls == sorted(server.url + k for k in blobs)
        assert listing.sizes.tolist() == [len(blobs[u[len(server.url):]]) for u in listing.urls]
        assert listing.etags == [etag_of_bytes(blobs[u[len(server.url):]]) for u in listing.urls]
        st = os.stat(tmp_path / "cat/00.bin")
        assert listing.mtimes_ns[0] == int(st.st_mtime) * 10**9  # HTTP dates have 1 s resolution
        assert list(class_layout(listing)) == ["cat", "dog", "eel"]


BLOCKER = """
import sys
blocked = sys.argv[1]
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == blocked or name.startswith(blocked + "."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None
sys.meta_path.insert(0, Block())
for mod in [m for m in sys.modules if m == blocked or m.startswith(blocked + ".")]:
    del sys.modules[mod]
from consumer.errors import MissingDependencyError
from consumer.sources.urls import list_objects
try:
    list_objects(sys.argv[2])
except MissingDependencyError as e:
    print("MissingDependencyError:", e)
"""


@pytest.mark.parametrize("blocked, url, extra", [
    ("fsspec", "s3://bucket/prefix", "consumer[s3]"),
    ("s3fs", "s3://bucket/prefix", "consumer[s3]"),
    ("aiohttp", "https://example.invalid/data/", "consumer[http]"),
    ("gcsfs", "gs://bucket/prefix", "consumer[gcs]"),
    ("adlfs", "az://container/prefix", "consumer[azure]"),
])
def test_missing_dependency_names_the_extra(blocked, url, extra):
    proc = subprocess.run([sys.executable, "-c", BLOCKER, blocked, url], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("MissingDependencyError:"), proc.stdout + proc.stderr
    assert f"pip install '{extra}'" in proc.stdout
    assert url.split("://")[0] + "://" in proc.stdout


@pytest.mark.parametrize("max_listings", [64, 0])
def test_stat_objects_explicit_urls(s3, max_listings):
    """Explicit URL lists (F0-F3): facts in the order given, from parent listings or one HEAD each."""
    so, fs = s3
    blobs = _corpus(np.random.default_rng(4))
    bucket = f"stat{max_listings}"
    fs.mkdir(bucket)
    fs.pipe({f"{bucket}/{k}": v for k, v in blobs.items()})
    keys = sorted(blobs, reverse=True)  # any order: the result follows it
    urls = [f"s3://{bucket}/{k}" for k in keys]
    got = stat_objects(urls, so, max_listings=max_listings)
    assert got.urls == urls
    assert got.sizes.tolist() == [len(blobs[k]) for k in keys]
    assert got.etags == [etag_of_bytes(blobs[k]) for k in keys]
    assert (got.mtimes_ns > 0).all()
    with pytest.raises(InputError, match=f"1 URL.*s3://{bucket}/cat/missing.bin"):
        stat_objects(urls + [f"s3://{bucket}/cat/missing.bin"], so, max_listings=max_listings)
    with pytest.raises(InputError, match="one scheme per call"):
        stat_objects(["s3://stat/a", "https://x/y"], so)


def test_stat_objects_http(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"12345")
    (tmp_path / "y.bin").write_bytes(b"1")
    with file_server(tmp_path) as server:
        got = stat_objects([server.url + "y.bin", server.url + "a/x.bin"])
        assert got.sizes.tolist() == [1, 5]
        assert got.etags == [etag_of_bytes(b"1"), etag_of_bytes(b"12345")]
        with pytest.raises(InputError, match="a/nope.bin"):
            stat_objects([server.url + "a/nope.bin"])
