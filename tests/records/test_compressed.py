"""Compressed containers: the same documents as the plain file (every gzip member, bzip2/xz stream and zstd frame),
served from the decode cache, persistent, version-checked; bombs and damaged streams refused by name."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
from pathlib import Path

import numpy as np
import pytest
import zstandard

from consumer import Consumer
from consumer.errors import FileChangedError, FormatError
from consumer.sources.records import compressed as limits

from .test_same_as_files import assert_same
from .writers import write_jsonl, write_lines, write_tar

COMPRESS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress,
            ".zst": lambda b: zstandard.ZstdCompressor().compress(b)}


def _plain(kind: str, tmp: Path) -> Path:
    docs = [b"alpha\r", "caf\u00e9 \u2028".encode(), b"x" * 5000, b"\xff\xfe"]
    if kind == "lines":
        return write_lines(tmp / "c.txt", docs)
    if kind == "jsonl":
        return write_jsonl(tmp / "c.jsonl", [d.decode("utf-8", "replace") for d in docs] + [""])
    return write_tar(tmp / "c.tar", docs + [b""])


def _squeeze(plain: Path, suffix: str) -> Path:
    out = plain.with_name(plain.name + suffix)
    out.write_bytes(COMPRESS[suffix](plain.read_bytes()))
    return out


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
@pytest.mark.parametrize("kind", ["lines", "jsonl", "tar"])
def test_compressed_gives_the_plain_files_documents(tmp_path, kind, suffix):
    plain = _plain(kind, tmp_path)
    packed = _squeeze(plain, suffix)
    common = dict(documents=kind, metadata=None, seqlen=64, style="diff", n_bytes=2, long_files="windows")
    a = Consumer(str(plain), cache_dir=tmp_path / "c1", **common)
    b = Consumer(str(packed), cache_dir=tmp_path / "c2", **common)
    assert_same(b, a)
    again = Consumer(str(packed), cache_dir=tmp_path / "c2", **common)
    assert again.build_info["records"]["reused"] == 1
    assert_same(again, a)
    m = Consumer(str(packed), cache_dir=False, **common)  # decode cache in memory
    assert_same(m, a)


def test_every_member_frame_and_stream_is_read(tmp_path):
    one, two = b"a\nb\n", b"c\nd"
    gz = tmp_path / "c.txt.gz"
    gz.write_bytes(gzip.compress(one) + gzip.compress(two))  # cat a.gz b.gz > c.gz
    zst = tmp_path / "c.txt.zst"
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"xyz"
    cctx = zstandard.ZstdCompressor()
    zst.write_bytes(cctx.compress(one) + skippable + cctx.compress(two))
    bz = tmp_path / "c.txt.bz2"
    bz.write_bytes(bz2.compress(one) + bz2.compress(two))
    xz = tmp_path / "c.txt.xz"
    xz.write_bytes(lzma.compress(one) + lzma.compress(two))
    for p in (gz, zst, bz, xz):
        ds = Consumer(str(p), documents="lines", cache_dir=False, n_bytes=1)
        assert [ds.decode(ds.document_tokens(i)) for i in range(len(ds.files))] == [b"a", b"b", b"c", b"d"], p


def test_zstd_long_window(tmp_path):
    block = np.frombuffer(os.urandom(1 << 20), dtype=np.uint8).copy()
    block[block == 10] = 32  # no newline inside: one long line, repeated past a small window
    data = block.tobytes() * 3 + b"\nend"
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=27, enable_ldm=True)
    p = tmp_path / "w.txt.zst"
    p.write_bytes(zstandard.ZstdCompressor(compression_params=params).compress(data))
    ds = Consumer(str(p), documents="lines", cache_dir=False, n_bytes=1, seqlen=8)
    assert ds.documents.doc_size.tolist() == [3 << 20, 3]


def test_bomb_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MIN_EXPANSION_BYTES", 1 << 16)
    monkeypatch.setattr(limits, "MAX_EXPANSION", 10)
    p = tmp_path / "bomb.txt.gz"
    p.write_bytes(gzip.compress(b"a" * (1 << 20)))
    with pytest.raises(FormatError, match=r"bomb\.txt\.gz'?: decompresses to more than 65536 bytes.*bomb"):
        Consumer(str(p), documents="lines", cache_dir=tmp_path / "c")
    assert not list((tmp_path / "c").rglob("meta.json"))


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_truncated_stream_refused(tmp_path, suffix):
    p = tmp_path / f"t.txt{suffix}"
    p.write_bytes(COMPRESS[suffix](os.urandom(200_000))[:-50])
    with pytest.raises(FormatError, match=rf"t\.txt\{suffix}'?: damaged \{suffix} stream"):
        Consumer(str(p), documents="lines", cache_dir=False)


def test_compressed_container_changed_is_not_served(tmp_path):
    p = _squeeze(_plain("lines", tmp_path), ".gz")
    ds = Consumer(str(p), documents="lines", cache_dir=tmp_path / "c")
    p.write_bytes(gzip.compress(b"other\n"))
    os.utime(p, ns=(1, 3_000_000_000_000))
    with pytest.raises(FileChangedError):
        ds.document_tokens(0)


_JSON_QUERY = ("SELECT record, json_extract_string(json, '$.lang') AS lang, json, \"offset\" IS NULL AS no_offset "
               "FROM documents ORDER BY doc_id")


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_compressed_jsonl_has_the_json_column_of_the_plain_file(tmp_path, monkeypatch, suffix):
    import consumer.dataset.records as building

    monkeypatch.setattr(building, "SCAN_CHUNK", 1 << 12)  # decompressed pieces of 4 KiB: many chunks of lines
    rows = [json.dumps({"id": i, "lang": ["en", "fr", "d\u00e9"][i % 3], "text": f"t{i} \u00e9\n\"\u2028" * (i % 40)},
                       ensure_ascii=i % 2 == 0) for i in range(300)]
    rows[7], rows[150] = "  \r", "{not json"  # a blank line and a bad record (skipped) on the line-by-line pass
    plain = tmp_path / "c.jsonl"
    plain.write_bytes(("\n".join(rows) + "\n").encode())
    packed = _squeeze(plain, suffix)
    common = dict(documents="jsonl", metadata=None, seqlen=64, on_bad_record="skip")
    want = [tuple(r) for r in Consumer(str(plain), cache_dir=False, **common).sql(_JSON_QUERY)]
    assert len(want) == 298 and not any(r[3] for r in want)  # the plain file's lines have offsets
    assert [r[1] for r in want[:3]] == ["en", "fr", "d\u00e9"]
    expected = [(r[0], r[1], r[2], True) for r in want]  # a compressed file's lines have no offset in it
    for cache in (tmp_path / "c", tmp_path / "c", False):  # written, reused, in memory
        ds = Consumer(str(packed), cache_dir=cache, **common)
        assert [tuple(r) for r in ds.sql(_JSON_QUERY)] == expected
        assert ds.sql("SELECT count(*) FROM documents WHERE json_extract_string(json, '$.lang') = 'fr'"
                      )[0][0] == sum(r[1] == "fr" for r in want)
        assert [json.loads(r[2])["text"].encode() for r in expected] == \
            [ds.decode(ds.document_tokens(i)) for i in range(len(ds.files))]


def test_plain_and_compressed_jsonl_in_one_dataset(tmp_path):
    plain = write_jsonl(tmp_path / "a.jsonl", ["one", "caf\u00e9", ""], extra={"lang": "fr"})
    packed = _squeeze(write_jsonl(tmp_path / "b.jsonl", ["two", "\u2028x"], extra={"lang": "en"}), ".gz")
    ds = Consumer([str(plain), str(packed)], documents="jsonl", metadata=None, cache_dir=False, seqlen=64)
    got = [tuple(r) for r in ds.sql("SELECT json_extract_string(json, '$.text'), json_extract_string(json, "
                                    "'$.lang'), \"offset\" FROM documents ORDER BY doc_id")]
    raw = plain.read_bytes()
    starts = [0] + [k + 1 for k in range(len(raw) - 1) if raw[k] == 0x0A]  # the plain file's lines
    assert got == [("one", "fr", starts[0]), ("caf\u00e9", "fr", starts[1]), ("", "fr", starts[2]),
                   ("two", "en", None), ("\u2028x", "en", None)]
