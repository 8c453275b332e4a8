"""libmagic descriptions of objects on S3 (moto on 127.0.0.1) from a few byte ranges equal those of the
local copies: small objects whole, large ones from head + tail (+ ELF ranges)."""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
import tarfile
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from consumer.errors import InputError
from consumer.sources.object_magic import describe_prefixes, elf_ranges, iter_describe_prefixes, plan_ranges
from consumer.sources.range_reader import RemoteReader
from consumer.sources.urls import list_objects, open_filesystem

from ..helpers.remote_servers import moto_server

magic = pytest.importorskip("magic")
pytest.importorskip("s3fs")
pytest.importorskip("moto")


def _png(w: int, h: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big"))
    raw = b"".join(b"\0" + bytes(w * 3) for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", w.to_bytes(4, "big") + h.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0]))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _corpus(root: Path) -> list[Path]:
    rng = np.random.default_rng(11)
    root.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {
        "empty.bin": b"",
        "one.bin": b"\x00",
        "small.txt": b"hello world\n",
        "code.py": b"import os\n\ndef main():\n    return os.getcwd()\n" * 50,
        "big.txt": b"".join(b"line %d of a long plain text log file\r\n" % i for i in range(9000)),
        "random.bin": rng.integers(0, 256, 300_000, dtype=np.uint8).tobytes(),
        "data.json": json.dumps({"k": list(range(200))}).encode(),
        "image.png": _png(64, 48),
        "doc.pdf": b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n" + b"x" * 5000,
        "archive.gz": gzip.compress(b"some text\n" * 1000, mtime=0),
        "page.html": b"<!DOCTYPE html>\n<html><head><title>t</title></head><body>" + b"<p>x</p>" * 20000
                     + b"</body></html>\n",
    }
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.txt", "a" * 1000)
        z.writestr("b.bin", rng.integers(0, 256, 200_000, dtype=np.uint8).tobytes())
    files["archive.zip"] = zbuf.getvalue()
    tbuf = io.BytesIO()
    with tarfile.open(fileobj=tbuf, mode="w") as t:
        info = tarfile.TarInfo("member.txt")
        payload = b"tar member\n" * 30000
        info.size = len(payload)
        t.addfile(info, io.BytesIO(payload))
    files["archive.tar"] = tbuf.getvalue()
    out = []
    for name, data in files.items():
        (root / name).write_bytes(data)
        out.append(root / name)
    # real ELF files bigger than head + tail: the interpreter and a numpy extension module
    for i, src in enumerate([os.path.realpath(sys.executable), np._core._multiarray_umath.__file__
                             if hasattr(np, "_core") else np.core._multiarray_umath.__file__]):
        dst = root / f"elf{i}.bin"
        dst.write_bytes(Path(src).read_bytes())
        out.append(dst)
    return out


@pytest.fixture(scope="module")
def s3_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("meta")
    files = _corpus(root / "src")
    with moto_server() as endpoint:
        so = {"endpoint_url": endpoint, "key": "test", "secret": "test"}
        fs, _ = open_filesystem("s3://x", so)
        fs.mkdir("meta")
        fs.pipe({f"meta/src/{p.name}": p.read_bytes() for p in files})
        yield so, list_objects("s3://meta/src/", so), {p.name: p for p in files}


def _local(paths, kinds=("description", "mime")):
    d, m = magic.Magic(), magic.Magic(mime=True)
    return [(d.from_file(str(p)), m.from_file(str(p))) for p in paths]


def test_descriptions_equal_local_copies(s3_corpus):
    so, listing, local = s3_corpus
    reader = RemoteReader(so)
    got = describe_prefixes(listing.urls, listing.sizes, listing.etags, reader=reader)
    want = _local([local[u.rsplit("/", 1)[1]] for u in listing.urls])
    for u, g, w in zip(listing.urls, got, want):
        assert g == w, u
    chunked = iter_describe_prefixes(listing.urls, listing.sizes, listing.etags, so, chunk=4)
    assert next(chunked) == got[0] and list(chunked) == got[1:]  # a generator, chunk by chunk
    # large objects were not downloaded whole
    big = listing.sizes > 2 * 65536
    assert big.sum() >= 5
    assert reader.stats["bytes"] < int(listing.sizes[~big].sum()) + int(big.sum()) * 3 * 65536 + 2**20


def test_elf_needs_its_extra_ranges(s3_corpus):
    so, listing, local = s3_corpus
    elves = [u for u in listing.urls if u.rsplit("/", 1)[1].startswith("elf")]
    sizes = listing.sizes[[listing.urls.index(u) for u in elves]]
    got = describe_prefixes(elves, sizes, storage_options=so, head_bytes=4096, tail_bytes=4096,
                            kinds=("description",))
    want = _local([local[u.rsplit("/", 1)[1]] for u in elves])
    assert [g[0] for g in got] == [w[0] for w in want]
    assert all(g[1] is None for g in got)
    # what the head alone would give differs: the ranges read through the file descriptor matter
    head_only = [magic.Magic().from_buffer(local[u.rsplit("/", 1)[1]].read_bytes()[:4096]) for u in elves]
    assert head_only != [w[0] for w in want]


def test_range_planning():
    assert plan_ranges(0, 10, 10) == []
    assert plan_ranges(20, 10, 10) == [(0, 20)]
    assert plan_ranges(21, 10, 5) == [(0, 10), (16, 5)]
    assert elf_ranges({0: b"MZ" + bytes(100)}, 1000) == []
    assert elf_ranges({0: b"\x7fELF" + bytes(10)}, 1000) == []  # too short to hold a header
    with pytest.raises(InputError, match="head_bytes must be an int >= 1"):
        describe_prefixes(["s3://b/k"], [10], head_bytes=0)
    with pytest.raises(InputError, match="chunk"):
        describe_prefixes(["s3://b/k"], [10], chunk=0)
