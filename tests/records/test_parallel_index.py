"""The records index built on threads (``consumer/dataset/records.py`` ``index_containers``): the same index
whatever the number of threads, containers scanned side by side or one container's chunks decoded side by side
(chunks made small here, so a container is many chunks); a bad record named by its file, line and byte offset on
every thread count; and the SQL engine imported during a long scan, in a fresh process."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from consumer import Consumer
from consumer.dataset import records as build
from consumer.errors import FormatError
from consumer.sources.records import jsonl as scanner

TEXTS = ["plain", "", "café \u00e9 東京 😀", 'quotes "inside" and \\ back', "line\nbreak\ttab\r", "\u2028 sep",
         "x" * 700]
COLUMNS = 'doc_id, file_id, record, "offset", length, size, tokens'


def _write_folder(folder, containers: int, records: int) -> None:
    """``containers`` JSONL files of varied sizes (blank lines, CRLF, escapes both ways, non-ASCII)."""
    folder.mkdir()
    for c in range(containers):
        lines = []
        for r in range(records * (1 + c % 3)):
            text = f"{c}/{r} " + TEXTS[(c + r) % len(TEXTS)]
            lines.append(json.dumps({"id": r, "text": text, "src": f"s{c}"}, ensure_ascii=(c + r) % 2 == 0))
            if r % 17 == 3:
                lines.append("   ")  # a blank line
        sep = "\r\n" if c % 4 == 1 else "\n"
        (folder / f"part-{c:02d}.jsonl").write_text(sep.join(lines) + sep, encoding="utf-8")


def _index(folder, threads: int, cache) -> tuple[list, list[bytes], dict]:
    ds = Consumer(str(folder), documents="jsonl", metadata=None, cache_dir=cache, seqlen=32)
    rows = ds.sql(f"SELECT {COLUMNS} FROM documents ORDER BY doc_id")
    docs = [ds.decode(ds.document_tokens(i)) for i in range(len(ds.files))]
    info = {k: v for k, v in ds.build_info["records"].items() if k != "reused"}
    return rows, docs, info


@pytest.fixture
def small_chunks(monkeypatch):
    """Containers read and parsed 4 KiB at a time: a container of tens of KB is many chunks."""
    monkeypatch.setattr(build, "SCAN_CHUNK", 4096)
    monkeypatch.setattr(scanner, "SCAN_CHUNK", 4096)


@pytest.mark.parametrize("containers", [7, 1])  # several side by side; one, its chunks decoded side by side
def test_the_index_is_the_same_whatever_the_thread_count(tmp_path, monkeypatch, small_chunks, containers):
    _write_folder(tmp_path / "d", containers, 60 if containers > 1 else 400)
    got = {}
    for threads in (1, 2, 3, 8):
        monkeypatch.setattr(build, "_scan_threads", lambda k=threads: k)
        for cache in (False, tmp_path / f"cache-{threads}"):
            got[threads, bool(cache)] = _index(tmp_path / "d", threads, cache)
    first = got[1, False]
    assert first[0] and first[2]["documents"] == len(first[1])
    for key, value in got.items():
        assert value == first, key


@pytest.mark.parametrize("threads, containers", [(1, 5), (4, 5), (3, 1)])
def test_a_bad_record_is_named_by_its_file_and_line_on_every_thread_count(tmp_path, monkeypatch, small_chunks,
                                                                         threads, containers):
    _write_folder(tmp_path / "d", containers, 300)
    bad = tmp_path / "d" / f"part-{containers - 1:02d}.jsonl"  # the last container: scanned last, or on its own
    lines = bad.read_bytes().split(b"\n")
    at = sum(len(x) + 1 for x in lines[:250])
    bad.write_bytes(b"\n".join([*lines[:250], b'{"text": ["not", "a", "string"]}', *lines[251:]]))
    monkeypatch.setattr(build, "_scan_threads", lambda: threads)
    with pytest.raises(FormatError, match=rf"{re.escape(bad.name)}'?: line 251 at byte {at}: "):
        Consumer(str(tmp_path / "d"), documents="jsonl", metadata=None, cache_dir=False)


def test_a_long_scan_imports_the_sql_engine_on_the_side(tmp_path):
    _write_folder(tmp_path / "d", 3, 50)
    code = ("import sys\n"
            "from consumer import Consumer\n"
            "from consumer.dataset import records\n"
            "records.PRELOAD_BYTES, records._scan_threads = 1, lambda: 2  # any scan is long; two threads\n"
            "assert 'consumer.query.duck' not in sys.modules\n"
            f"ds = Consumer({str(tmp_path / 'd')!r}, documents='jsonl', metadata=None, cache_dir=False)\n"
            "import threading\n"
            "print('consumer.query.duck' in sys.modules, 'duckdb' in sys.modules,\n"
            "      [t.name for t in threading.enumerate() if t.name == 'consumer-preload'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "[]"]
