"""RemoteReader against real servers on 127.0.0.1: moto's S3 API (subprocess) and an http.server with
byte ranges, ETags and injected faults (500s, connections dropped mid-body, slow answers)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.errors import FileChangedError, InputError, RemoteError
from consumer.sources.range_reader import RemoteReader, fetch_prefixes
from consumer.sources.urls import list_objects, open_filesystem

from ..helpers.remote_servers import faulty_proxy, file_server, moto_server

pytest.importorskip("s3fs")
pytest.importorskip("moto")

SIZES = [0, 1, 2, 7, 100, 1000, 4096, 5000, 20000, 70000]


def _write(root: Path, rng: np.random.Generator) -> dict[str, bytes]:
    blobs = {}
    for i, n in enumerate(SIZES):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        (root / "objs").mkdir(parents=True, exist_ok=True)
        (root / "objs" / f"{i:02d}.bin").write_bytes(data)
        blobs[f"objs/{i:02d}.bin"] = data
    return blobs


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The same objects on S3 (moto) and HTTP: ``{"s3": (listing, so), "http": (listing, so, server)}``."""
    root = tmp_path_factory.mktemp("remote_src")
    blobs = _write(root, np.random.default_rng(7))
    with moto_server() as endpoint, file_server(root) as server:
        so = {"endpoint_url": endpoint, "key": "test", "secret": "test"}
        fs, _ = open_filesystem("s3://x", so)
        fs.mkdir("reads")
        fs.pipe({f"reads/{k}": v for k, v in blobs.items()})
        yield {"blobs": blobs, "root": root,
               "s3": (list_objects("s3://reads/objs/", so), so, None),
               "http": (list_objects(server.url + "objs/", None), None, server)}


def _local(blobs: dict[str, bytes], url: str) -> bytes:
    return blobs["objs/" + url.rsplit("/", 1)[1]]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.parametrize("backend", ["s3", "http"])
def test_random_ranges_equal_local_bytes(sources, backend, data):
    listing, so, _ = sources[backend]
    n = data.draw(st.integers(1, 12))
    picks = [data.draw(st.integers(0, len(listing) - 1)) for _ in range(n)]
    starts, lengths = [], []
    for k in picks:
        size = int(listing.sizes[k])
        s = data.draw(st.integers(0, size))
        starts.append(s)
        lengths.append(data.draw(st.integers(0, size - s)))
    gap = data.draw(st.integers(0, 3))
    offsets = np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64) + gap)[:-1]]).astype(np.int64)
    out = np.full(int(offsets[-1] + lengths[-1] + gap), 0xAB, dtype=np.uint8)
    reader = RemoteReader(so, concurrency=8)
    urls = [listing.urls[k] for k in picks]
    reader.read_ranges(urls, starts, lengths, out, offsets, expected_etags=[listing.etags[k] for k in picks],
                       expected_sizes=listing.sizes[picks])
    for u, s, ln, o in zip(urls, starts, lengths, offsets):
        assert out[o:o + ln].tobytes() == _local(sources["blobs"], u)[s:s + ln]
        assert (out[o + ln:o + ln + gap] == 0xAB).all() or gap == 0


@pytest.mark.parametrize("backend", ["s3", "http"])
def test_prefixes_and_large_ranges_split(sources, backend):
    listing, so, _ = sources[backend]
    got = fetch_prefixes(listing.urls, 3000, so, sizes=listing.sizes, etags=listing.etags)
    assert got == [_local(sources["blobs"], u)[:3000] for u in listing.urls]
    reader = RemoteReader(so, max_request_bytes=4096)  # a 70000-byte object becomes 18 requests
    k = int(np.argmax(listing.sizes))
    out = np.empty(int(listing.sizes[k]), dtype=np.uint8)
    reader.read_ranges([listing.urls[k]], [0], [out.size], out, [0], [listing.etags[k]], [out.size])
    assert out.tobytes() == _local(sources["blobs"], listing.urls[k])
    assert reader.stats["requests"] == -(-out.size // 4096)


@pytest.mark.parametrize("backend", ["s3", "http"])
def test_close_ranges_of_one_object_share_a_request(sources, backend):
    """Adjacent, overlapping and close ranges of one object are one request; far ones, other objects and
    ranges past max_request_bytes are not; every byte lands where it belongs."""
    listing, so, _ = sources[backend]
    big = int(np.argmax(listing.sizes))  # 70000 bytes
    other = int(np.argsort(listing.sizes)[-2])  # 20000 bytes
    u, v = listing.urls[big], listing.urls[other]
    ranges = [(u, 100, 50), (v, 0, 10), (u, 150, 25), (u, 120, 100), (u, 300, 10), (u, 60000, 5000), (v, 5, 3)]
    urls = [r[0] for r in ranges]
    starts = np.array([r[1] for r in ranges], dtype=np.int64)
    lengths = np.array([r[2] for r in ranges], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    etags = [listing.etags[listing.urls.index(x)] for x in urls]
    sizes = listing.sizes[[listing.urls.index(x) for x in urls]]
    want = b"".join(_local(sources["blobs"], x)[s:s + n] for x, s, n in ranges)
    counts = {}
    for gap, max_request in ((None, 1 << 20), (0, 1 << 20), (1000, 1 << 20), (65536, 1 << 20), (65536, 4096)):
        reader = RemoteReader(so, coalesce_bytes=gap, max_request_bytes=max_request)
        out = np.zeros(int(lengths.sum()), dtype=np.uint8)
        reader.read_ranges(urls, starts, lengths, out, offsets, etags, sizes)
        assert out.tobytes() == want, (gap, max_request)
        counts[gap, max_request] = reader.stats["requests"]
    assert counts[None, 1 << 20] == 7  # one request per range
    assert counts[0, 1 << 20] == 4  # u: 100-150, 120-220 and 150-175 overlap; v: 0-10 and 5-8 overlap
    assert counts[1000, 1 << 20] == 3  # ... and 300-310 is within 1000 bytes of them
    assert counts[65536, 1 << 20] == 2  # one request per object
    assert counts[65536, 4096] == 4  # 60000-65000 alone is more than a request (two), the rest of u is one


def test_concurrent_requests_in_flight(sources):
    listing, _, server = sources["http"]
    faults = server.faults
    urls = [u for u, s in zip(listing.urls, listing.sizes) if s > 0] * 2  # 18 ranges
    lengths = np.ones(len(urls), dtype=np.int64)
    out = np.empty(len(urls), dtype=np.uint8)
    faults.delay, faults.max_in_flight = 0.25, 0
    try:
        RemoteReader(None, concurrency=64, coalesce_bytes=None).read_ranges(  # one request per range
            urls, np.zeros(len(urls), np.int64), lengths, out, np.arange(len(urls)))
        all_at_once = faults.max_in_flight
        faults.max_in_flight = 0
        RemoteReader(None, concurrency=3).read_ranges(urls, np.zeros(len(urls), np.int64), lengths, out,
                                                      np.arange(len(urls)))
        bounded = faults.max_in_flight
    finally:
        faults.delay = 0.0
    assert all_at_once >= 12, all_at_once  # the server saw many GETs at the same time
    assert 2 <= bounded <= 3, bounded
    assert out.tobytes() == b"".join(_local(sources["blobs"], u)[:1] for u in urls)


def _one(listing, k):
    return listing.urls[k], int(listing.sizes[k]), listing.etags[k]


def test_retries_500_and_dropped_connections(sources):
    listing, _, server = sources["http"]
    faults = server.faults
    url, size, etag = _one(listing, 7)
    path = "/objs/" + url.rsplit("/", 1)[1]
    for kind in ("error", "drop"):
        before = faults.gets_by_path.get(path, 0)
        if kind == "error":
            faults.error[path] = (500, 2)
        else:
            faults.drop[path] = 2
        reader = RemoteReader(None, retries=3, backoff=0.01)
        out = np.zeros(size, dtype=np.uint8)
        reader.read_ranges([url], [0], [size], out, [0], [etag], [size])
        assert out.tobytes() == _local(sources["blobs"], url)
        assert faults.gets_by_path[path] - before == 3  # two failures, then the good answer
        assert reader.stats["retries"] == 2


@pytest.mark.parametrize("kind", ["error", "drop"])
def test_retries_exhausted_serve_nothing(sources, kind):
    listing, _, server = sources["http"]
    faults = server.faults
    url, size, etag = _one(listing, 8)
    path = "/objs/" + url.rsplit("/", 1)[1]
    if kind == "error":
        faults.error[path] = (503, 3)
    else:
        faults.drop[path] = 3
    out = np.full(size, 7, dtype=np.uint8)
    try:
        with pytest.raises(RemoteError, match=f"{url}.*after 3 attempts"):
            RemoteReader(None, retries=2, backoff=0.01).read_ranges([url], [0], [size], out, [0], [etag], [size])
    finally:
        faults.error.pop(path, None)
        faults.drop.pop(path, None)
    assert (out == 7).all()  # nothing of the partial body was written


def test_timeout_retried_then_reported(sources):
    listing, _, server = sources["http"]
    faults = server.faults
    url, size, etag = _one(listing, 5)
    path = "/objs/" + url.rsplit("/", 1)[1]
    faults.slow[path] = (3.0, 1)
    reader = RemoteReader(None, timeout=1.0, retries=3, backoff=0.01)
    out = np.zeros(size, dtype=np.uint8)
    reader.read_ranges([url], [0], [size], out, [0], [etag], [size])
    assert out.tobytes() == _local(sources["blobs"], url)
    assert reader.stats["retries"] >= 1  # the slow answer was abandoned and the request sent again
    faults.slow[path] = (1.0, 2)
    with pytest.raises(RemoteError, match=f"{url}.*2 attempts.*TimeoutError"):
        RemoteReader(None, timeout=0.2, retries=1, backoff=0.01).read_ranges([url], [0], [size], out, [0])
    faults.slow.pop(path, None)


@pytest.mark.parametrize("backend", ["s3", "http"])
def test_403_404_name_the_url(sources, backend):
    listing, so, server = sources[backend]
    out = np.zeros(4, dtype=np.uint8)
    missing = listing.root + "objs-missing.bin"
    with pytest.raises(InputError, match=f"{missing}.*not found"):
        RemoteReader(so).read_ranges([missing], [0], [4], out, [0])
    with pytest.raises(FileChangedError, match=f"{missing}.*no longer exists"):
        RemoteReader(so).read_ranges([missing], [0], [4], out, [0], ["abc"], [4])
    if backend == "http":
        url = listing.urls[3]
        path = "/objs/" + url.rsplit("/", 1)[1]
        server.faults.status[path] = 403
        try:
            with pytest.raises(InputError, match=f"{url}.*access denied"):
                RemoteReader(so).read_ranges([url], [0], [2], out, [0])
        finally:
            server.faults.status.pop(path)
    else:  # a missing bucket is a 404 too (moto does not check credentials, so no S3 403 here)
        with pytest.raises(InputError, match="s3://no-such-bucket-here/x.*not found"):
            RemoteReader(so).read_ranges(["s3://no-such-bucket-here/x"], [0], [2], out, [0])


@pytest.mark.parametrize("backend", ["s3", "http"])
def test_changed_object_detected(sources, tmp_path, backend):
    listing, so, server = sources[backend]
    data = bytes(range(256)) * 4
    if backend == "s3":
        fs, _ = open_filesystem("s3://x", so)
        fs.pipe("reads/change/obj.bin", data)
        url = "s3://reads/change/obj.bin"
    else:
        target = sources["root"] / "objs" / "change.bin"
        target.write_bytes(data)
        url = server.url + "objs/change.bin"
    before = list_objects(url, so)
    etag = before.etags[0]
    out = np.zeros(16, dtype=np.uint8)
    RemoteReader(so).read_ranges([url], [10], [16], out, [0], [etag], [len(data)])
    assert out.tobytes() == data[10:26]
    changed = bytes(reversed(data))  # same size, other content
    if backend == "s3":
        fs.pipe("reads/change/obj.bin", changed)
    else:
        target.write_bytes(changed)
    out[:] = 0
    with pytest.raises(FileChangedError, match=f"{url}.*changed since it was indexed"):
        RemoteReader(so).read_ranges([url], [10], [16], out, [0], [etag], [len(data)])
    assert (out == 0).all()
    with pytest.raises(FileChangedError, match=url):  # a new size is caught without an ETag too
        RemoteReader(so).read_ranges([url], [0], [4], out, [0], None, [len(data) + 1])


def test_argument_errors_and_pickle(sources):
    listing, so, _ = sources["s3"]
    out = np.zeros(8, dtype=np.uint8)
    with pytest.raises(InputError, match="out must be"):
        RemoteReader(so).read_ranges(listing.urls[:1], [0], [1], out.astype(np.int64), [0])
    with pytest.raises(InputError, match="past the end of out"):
        RemoteReader(so).read_ranges(listing.urls[:1], [0], [1], out, [8])
    with pytest.raises(InputError, match="lengths must be 1 integers"):
        RemoteReader(so).read_ranges(listing.urls[:1], [0], [1, 2], out, [0])
    with pytest.raises(InputError, match="past its expected size"):
        RemoteReader(so).read_ranges(listing.urls[:1], [0], [1], out, [0], None, [0])
    with pytest.raises(InputError, match="concurrency"):
        RemoteReader(so, concurrency=0)
    with pytest.raises(InputError, match="remote cache needs both"):
        RemoteReader(so, cache_dir="/tmp/x")
    k = int(np.argmax(listing.sizes > 8))
    reader = pickle.loads(pickle.dumps(RemoteReader(so, concurrency=5, retries=1)))
    assert reader.concurrency == 5 and reader.retries == 1
    reader.read_ranges([listing.urls[k]], [0], [8], out, [0], [listing.etags[k]], [listing.sizes[k]])
    assert out.tobytes() == _local(sources["blobs"], listing.urls[k])[:8]


def test_generic_backend_file_urls(tmp_path):
    """Backends without a special path (here file://) read through fsspec's cat_file and check sizes by info."""
    rng = np.random.default_rng(5)
    (tmp_path / "c").mkdir()
    blobs = {f"c/{i}.bin": rng.integers(0, 256, n, dtype=np.uint8).tobytes() for i, n in enumerate([5, 900, 4000])}
    for k, v in blobs.items():
        (tmp_path / k).write_bytes(v)
    listing = list_objects("file://" + str(tmp_path))
    assert listing.urls == sorted(f"file://{tmp_path}/{k}" for k in blobs)
    assert listing.etags == [None] * 3 and (listing.mtimes_ns > 0).all()
    reader = RemoteReader(None, max_request_bytes=1000)
    out = np.zeros(int(listing.sizes.sum()) - 3, dtype=np.uint8)
    lengths = listing.sizes - 1
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    reader.read_ranges(listing.urls, np.ones(3, np.int64), lengths, out, offsets, None, listing.sizes)
    assert out.tobytes() == b"".join(blobs[u.split(str(tmp_path) + "/")[1]][1:] for u in listing.urls)
    (tmp_path / "c" / "2.bin").write_bytes(b"shorter")
    with pytest.raises(FileChangedError, match="2.bin.*changed since it was indexed"):
        RemoteReader(None).read_ranges(listing.urls[2:], [0], [4], out, [0], None, listing.sizes[2:])


def _read_in_child(reader: RemoteReader, url: str, size: int, etag: str) -> bytes:
    out = np.zeros(size, dtype=np.uint8)
    reader.read_ranges([url], [0], [size], out, [0], [etag], [size])
    return out.tobytes()


@pytest.mark.parametrize("backend", ["s3", "http"])
def test_forked_worker_reads(sources, backend):
    """A reader used in the parent keeps working in a forked child (DataLoader workers on Linux), and the
    parent's connections survive the child (both backends run in one module, so the http case runs after
    a child used s3fs)."""
    import multiprocessing

    listing, so, _ = sources[backend]
    k = int(np.argmax(listing.sizes))
    url, size, etag = listing.urls[k], int(listing.sizes[k]), listing.etags[k]
    reader = RemoteReader(so)
    parent = _read_in_child(reader, url, size, etag)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.apply(_read_in_child, (reader, url, size, etag))
    assert reader.stats["retries"] == 0
    # the parent's pooled connections still work after a child used (and dropped) inherited file systems
    reader2 = RemoteReader(so, timeout=20, retries=0)
    assert _read_in_child(reader2, url, size, etag) == parent
    assert reader2.stats["requests"] == 1
    assert child == parent == _local(sources["blobs"], url)


@pytest.fixture(scope="module")
def s3_proxy(sources):
    """The S3 objects of ``sources`` reached through a fault-injecting proxy in front of moto."""
    listing, so, _ = sources["s3"]
    with faulty_proxy(so["endpoint_url"]) as (endpoint, faults):
        yield listing, {**so, "endpoint_url": endpoint}, faults


def test_s3_faults_retried(sources, s3_proxy):
    """On the S3 path too: 500s (botocore's own retries or ours), a body cut mid-way and a slow answer are
    retried and the bytes served are right; when every attempt fails nothing is written."""
    listing, so, faults = s3_proxy
    k = int(np.argmax(listing.sizes))
    url, size, etag = listing.urls[k], int(listing.sizes[k]), listing.etags[k]
    path = "/" + url[len("s3://"):]
    want = _local(sources["blobs"], url)
    for fault in ("error", "drop", "slow"):
        before = faults.gets_by_path.get(path, 0)
        if fault == "error":
            faults.error[path] = (500, 2)
        elif fault == "drop":
            faults.drop[path] = 2
        else:
            faults.slow[path] = (3.0, 1)
        reader = RemoteReader(so, retries=3, backoff=0.01, timeout=1.0 if fault == "slow" else 60)
        out = np.zeros(size, dtype=np.uint8)
        reader.read_ranges([url], [0], [size], out, [0], [etag], [size])
        assert out.tobytes() == want, fault
        if fault == "slow":
            assert faults.gets_by_path[path] - before >= 2 and reader.stats["retries"] >= 1
        else:
            assert faults.gets_by_path[path] - before == 3, fault
    faults.drop[path] = 10
    out = np.full(size, 9, dtype=np.uint8)
    try:
        with pytest.raises(RemoteError, match=f"{url}.*after 3 attempts"):
            RemoteReader(so, retries=2, backoff=0.01).read_ranges([url], [0], [size], out, [0], [etag], [size])
    finally:
        faults.drop.pop(path)
    assert (out == 9).all()
