"""Local libmagic (consumer.sources.magic.describe_files): by descriptor, yet the same output as libmagic by path
file by file; every thread given work whatever the caller's chunk; special files refused without blocking."""

from __future__ import annotations

import os
import threading

import pytest

from consumer.errors import InputError
from consumer.sources.magic import describe_files, import_magic


def _varied(root) -> list[str]:
    files = {"text.txt": b"hello world\n" * 20, "script.py": b"#!/usr/bin/env python3\nprint(1)\n",
             "data.json": b'{"a": [1, 2, 3]}', "zeros.bin": bytes(3000), "empty": b"",
             "page.html": b"<!DOCTYPE html>\n<html><body>x</body></html>\n", "gz": b"\x1f\x8b\x08\x00" + bytes(40)}
    paths = []
    for name, data in files.items():
        p = root / name
        p.write_bytes(data)
        paths.append(str(p))
    for bits, name in ((0o4755, "setuid"), (0o2755, "setgid"), (0o1755, "sticky"), (0o4644, "empty_setuid")):
        p = root / name
        p.write_bytes(b"" if name.startswith("empty") else b"#!/bin/sh\necho hi\n")
        os.chmod(p, bits)
        paths.append(str(p))
    os.symlink(root / "script.py", root / "link.py")  # described as the bytes it points to
    paths.append(str(root / "link.py"))
    return paths


def test_descriptions_equal_libmagic_by_path_file_by_file(tmp_path):
    paths = _varied(tmp_path)
    magic = import_magic()
    by_path, mime = magic.Magic(), magic.Magic(mime=True)
    expected = [(by_path.from_file(os.path.realpath(p)), mime.from_file(os.path.realpath(p))) for p in paths]
    assert list(describe_files(paths, workers=1)) == expected
    assert list(describe_files(paths * 10, workers=2, chunk=3)) == expected * 10  # threads, same order
    assert list(describe_files(paths, kinds=("mime",), workers=1)) == [(None, m) for _, m in expected]
    assert any(d.startswith("setuid") for d, _ in expected) and ("empty", "inode/x-empty") in expected


def test_every_thread_gets_work_whatever_the_chunk(tmp_path):
    paths = _varied(tmp_path) * 20  # 220 files: one task of a 512-file chunk would leave a thread idle
    results = describe_files(paths, kinds=("description",), workers=2, chunk=512)
    first = next(results)
    busy = [t for t in threading.enumerate() if t.name.startswith("consumer-magic")]
    rest = list(results)
    assert len(busy) == 2 and [first, *rest] == list(describe_files(paths, kinds=("description",), workers=1))


def test_special_and_missing_files_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a by-path open for reading would wait for a writer forever
    with pytest.raises(InputError, match=r"fifo'.* is not a regular file"):
        list(describe_files([str(fifo)], workers=1))
    with pytest.raises(InputError, match=r"libmagic could not read .*missing"):
        list(describe_files([str(tmp_path / "missing")], workers=1))
    with pytest.raises(InputError, match="is not a regular file"):
        list(describe_files([str(tmp_path)], workers=1))
