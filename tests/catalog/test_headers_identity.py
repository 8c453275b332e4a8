"""Headers of a build are exactly libmagic-by-path (``file -b``) normalised, file by file, on a varied corpus;
the batched normalisation (each distinct description once) equals normalising every file on its own."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.catalog.headers import headers_from, normalise_description
from consumer.sources.magic import import_magic

from ..conftest import write


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    raw = b"".join(b"\x00" + bytes(3 * width) for _ in range(height))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def varied_corpus(root) -> list[str]:
    """Files of many types, in two class folders: text in several encodings and line endings, scripts,
    JSON, CSV, XML, HTML, random and zero bytes, gzip (with an embedded name), PNG, PDF, ELF (a copy of
    this interpreter), an empty file, and files whose name appears in their own content."""
    rng = np.random.default_rng(3)
    py = b"#!/usr/bin/env python3\nimport os\n\ndef f(x):\n    return x + 1\n"
    files = {
        "a/plain.txt": b"hello world\n" * 30,
        "a/crlf.txt": b"line one\r\nline two\r\n" * 20,
        "a/long.txt": b"x" * 5000 + b"\n",
        "a/utf8.txt": "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u2014 \u00fcber\n".encode() * 20,
        "a/latin1.txt": "caf\u00e9 na\u00efve\n".encode("latin-1") * 20,
        "a/utf16.txt": "hello wide world\n".encode("utf-16"),
        "a/script.py": py * 10,
        "a/shell.sh": b"#!/bin/sh\necho hi\nexit 0\n",
        "a/data.json": json.dumps({"k": list(range(50)), "s": "v"}).encode(),
        "a/table.csv": b"a,b,c\n" + b"".join(b"%d,%d,%d\n" % (i, i * 2, i * 3) for i in range(50)),
        "a/doc.xml": b'<?xml version="1.0" encoding="UTF-8"?>\n<root><item id="1">x</item></root>\n',
        "a/page.html": b"<!DOCTYPE html>\n<html><head><title>t</title></head><body>b</body></html>\n",
        "a/named.txt": b"this file is named.txt and says so: named.txt\n",
        "b/random.bin": rng.integers(0, 256, 3000, dtype=np.uint8).tobytes(),
        "b/zeros.bin": bytes(4096),
        "b/small.bin": b"\x01\x02",
        "b/empty.dat": b"",
        "b/archive.gz": gzip.compress(b"payload " * 100, mtime=0),
        "b/image.png": _png(7, 5),
        "b/doc.pdf": b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n",
    }
    for folder in ("a", "b"):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    paths = [write(os.path.join(root, name), data) for name, data in files.items()]
    exe = os.path.realpath(sys.executable)
    elf = os.path.join(root, "b", "python.elf")
    shutil.copyfile(exe, elf)
    return paths + [elf]


def test_build_headers_are_libmagic_by_path_normalised(tmp_path):
    root = tmp_path / "corpus"
    paths = varied_corpus(root)
    magic = import_magic()
    by_path = magic.Magic()
    expected = {os.path.realpath(p): normalise_description(by_path.from_file(p), p) for p in paths}
    ds = Consumer(str(root), metadata="file", cache_dir=str(tmp_path / "cache"), style="diff", seqlen=64)
    got = {os.path.realpath(f): ds.documents.header_text(i) for i, f in enumerate(ds.files)}
    assert got == expected
    assert len(set(expected.values())) >= 12  # the corpus is varied: many distinct headers
    reopened = Consumer(str(root), metadata="file", cache_dir=str(tmp_path / "cache"), style="diff", seqlen=64)
    assert [reopened.documents.header_text(i) for i in range(len(paths))] == \
        [ds.documents.header_text(i) for i in range(len(paths))]  # from the cache: the same


_WORDS = st.sampled_from(["ASCII text", "data", "gzip compressed data", 'was "x.gz"', "x.gz", "a.txt", "/d/c/a.txt",
                          "with very long lines (5000)", "size 12", "UTF-8 Unicode text", "  ", "\n", "ELF 64-bit",
                          "last modified: Mon", "a b", "text"])


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.lists(_WORDS, max_size=5).map(", ".join),
                               st.sampled_from(["/d/c/a.txt", "/d/c/x.gz", "/d/c/text", "/d/c/t", "/d/a b", ""])),
                     max_size=12))
def test_batched_normalisation_equals_normalising_each_file(rows):
    descriptions = [d for d, _ in rows]
    paths = [p for _, p in rows]
    assert headers_from("file", paths, descriptions, [None] * len(rows)) == \
        [normalise_description(d, p) for d, p in rows]
    assert headers_from("mime", paths, [None] * len(rows), descriptions) == \
        [normalise_description(d, p) for d, p in rows]
