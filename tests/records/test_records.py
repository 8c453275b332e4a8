"""Documents inside containers: the kinds' rules (lines, jsonl, parquet, tar), classes from a field, every input
form, the persistent document index, version checks, and one malformed-input table."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from consumer import Consumer
from consumer.errors import FileChangedError, FormatError, InputError
from consumer.sources.records import options as record_limits

from .writers import patch_header, pax_record, tar_bytes, write_jsonl, write_lines, write_parquet, write_tar


def docs_of(ds: Consumer) -> list[bytes]:
    return [ds.decode(ds.document_tokens(i)) for i in range(len(ds.files))]


def test_lines_keep_cr_skip_empty_and_count_them(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"one\r\n\n\ntwo \xff\r\nlast")
    ds = Consumer(str(p), documents="lines", cache_dir=False, n_bytes=1)
    assert docs_of(ds) == [b"one\r", b"two \xff\r", b"last"]
    assert ds.build_info["records"]["empty_lines"] == 2
    assert list(ds.files) == [f"{p}#0", f"{p}#3", f"{p}#4"]
    assert ds.metadata is None  # lines default to no header


def test_lines_split_on_lf_only(tmp_path):
    text = "a\u2028b\u2029c\u0085d\re".encode()
    p = write_lines(tmp_path / "u.txt", [text, b"x"])
    assert docs_of(Consumer(str(p), documents="lines", cache_dir=False)) == [text, b"x"]


def test_jsonl_text_field_nested_class_field_and_blank_lines(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_bytes(b'{"meta": {"text": "caf\\u00e9", "lang": "fr"}, "label": "b"}\r\n   \n'
                  b'{"meta": {"text": "", "lang": "en"}, "label": 3, "other": [1, {"x": null}]}\n'
                  b'{"label": true, "meta": {"text": "\\n\\"q\\"", "lang": "en"}}')
    ds = Consumer(str(p), documents="jsonl", text_field="meta.text", class_field="label", cache_dir=False)
    assert ds.classes == ["3", "b", "true"]
    # documents by class, then container, then record
    assert docs_of(ds) == [b"", "café".encode(), b'\n"q"']
    assert ds.build_info["records"]["blank_lines"] == 1
    assert ds.samples_per_class() == {"3": 1, "b": 1, "true": 1}


def test_tar_members_named_in_place_and_described(tmp_path):
    p = tmp_path / "s.tar"
    long_name = "d/" + "n" * 120 + ".txt"
    with tarfile.open(p, "w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in (("a.txt", b"hello"), (long_name, b"%PDF-1.4 x"), ("empty", b"")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        d = tarfile.TarInfo("dir")
        d.type = tarfile.DIRTYPE
        tf.addfile(d)
        link = tarfile.TarInfo("link")
        link.type = tarfile.SYMTYPE
        link.linkname = "a.txt"
        tf.addfile(link)
    ds = Consumer(str(p), documents="tar", cache_dir=False, n_bytes=1)
    assert list(ds.files) == [f"{p}/a.txt", f"{p}/{long_name}", f"{p}/empty"]
    assert ds.build_info["records"]["skipped_members"] == 2
    assert ds.metadata == "file" and ds.build_info["libmagic_calls"] == 3
    assert ds.documents.header_text(1).startswith("PDF")
    assert ds.decode(ds.document_tokens(0), specials="skip").endswith(b"hello")


def test_parquet_string_dictionary_and_struct_columns(tmp_path):
    p = tmp_path / "t.parquet"
    table = pa.table({"text": pa.array(["x", "yy", "x"]).dictionary_encode(), "label": [1, 2, 1],
                      "meta": pa.array([{"body": "α"}, {"body": ""}, {"body": "β"}])})
    pq.write_table(table, p, row_group_size=2)
    assert docs_of(Consumer(str(p), documents="parquet", cache_dir=False)) == [b"x", b"yy", b"x"]
    ds = Consumer(str(p), documents="parquet", text_field="meta.body", class_field="label", cache_dir=False)
    assert ds.classes == ["1", "2"] and docs_of(ds) == ["α".encode(), "β".encode(), b""]


def test_every_input_form(tmp_path):
    a = write_lines(tmp_path / "x" / "a.txt", [b"1", b"2"]) if (tmp_path / "x").mkdir() is None else None
    b = write_lines(tmp_path / "y" / "b.txt", [b"3"]) if (tmp_path / "y").mkdir() is None else None
    forms = {"dir": str(tmp_path), "F0": [str(a), str(b)], "F1": [{str(a): "x"}, {str(b): "y"}],
             "F2": {str(a): "x", str(b): "y"}, "F3": {"x": [str(a)], "y": [str(b)]},
             "glob": str(tmp_path / "*" / "*.txt")}
    for form, fps in forms.items():
        ds = Consumer(fps, documents="lines", cache_dir=False, n_bytes=1)
        assert docs_of(ds) == [b"1", b"2", b"3"], form
        assert ds.classes == (["null"] if form in ("F0", "glob") else ["x", "y"]), form


def test_index_is_persistent_and_touches_only_changed_containers(tmp_path):
    cache = tmp_path / "cache"
    a = write_jsonl(tmp_path / "a.jsonl", ["one", "two"])
    b = write_jsonl(tmp_path / "b.jsonl", ["three"])
    first = Consumer([str(a), str(b)], documents="jsonl", cache_dir=cache)
    assert first.build_info["records"]["reused"] == 0 and first.build_info["cache"] == "miss"
    again = Consumer([str(a), str(b)], documents="jsonl", cache_dir=cache)
    assert again.build_info["records"]["reused"] == 2 and again.build_info["cache"] == "hit"
    assert docs_of(again) == [b"one", b"two", b"three"]
    write_jsonl(b, ["four", "five"])
    os.utime(b, ns=(1, 1_000_000_000_000))
    third = Consumer([str(a), str(b)], documents="jsonl", cache_dir=cache)
    assert third.build_info["records"]["reused"] == 1
    assert docs_of(third) == [b"one", b"two", b"four", b"five"]


@pytest.mark.parametrize("kind", ["lines", "jsonl", "tar"])
def test_container_changed_after_indexing_is_never_served(tmp_path, kind):
    p = {"lines": lambda: write_lines(tmp_path / "c.txt", [b"aaaa", b"bbbb"]),
         "jsonl": lambda: write_jsonl(tmp_path / "c.jsonl", ["aaaa", "bbbb"]),
         "tar": lambda: write_tar(tmp_path / "c.tar", [b"aaaa", b"bbbb"])}[kind]()
    ds = Consumer(str(p), documents=kind, cache_dir=tmp_path / "cache", metadata=None)
    data = bytearray(p.read_bytes())
    data[-3] ^= 1
    p.write_bytes(bytes(data))
    os.utime(p, ns=(1, 2_000_000_000_000))
    with pytest.raises(FileChangedError, match=str(p.name)):
        ds.document_tokens(0)
    with pytest.raises(FileChangedError):
        ds[0]


def test_skip_bad_records_reports_the_count(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_bytes(b'{"text": "a"}\nnot json\n[1]\n{"text": 2}\n{"x": 1}\n{"text": "b"}\n')
    ds = Consumer(str(p), documents="jsonl", on_bad_record="skip", cache_dir=False)
    assert docs_of(ds) == [b"a", b"b"]
    assert ds.build_info["records"]["skipped_records"] == 4


def _tar_truncated(tmp: Path) -> Path:
    p = write_tar(tmp / "t.tar", [b"a" * 600, b"b" * 2000])
    data = p.read_bytes()
    p.write_bytes(data[:512 * 4 + 100])  # the second member's data cut short
    return p


def _tar(pax: dict[str, str] | None = None, first: bool = False, raw: bytes | None = None) -> bytes:
    """Members ``m0`` (2 bytes: its header at byte 0), ``evil`` (its headers at byte 1024, or at 0 when ``first``)
    with PAX headers ``pax`` (or the raw PAX records ``raw`` before it), and ``after``."""
    evil = ([("@pax", raw, {})] if raw is not None else []) + [("evil", b"hello", pax or {})]
    return tar_bytes(([] if first else [("m0", b"hi", {})]) + evil + [("after", b"abc", {})])


def _tar_base256_size(size: int) -> bytes:
    """Member ``evil`` (header at byte 1024) with a base-256 size field: ``size`` may be below zero."""
    plain = tar_bytes([("m0", b"hi", {}), ("evil", b"hello", {}), ("after", b"abc", {})], fmt=tarfile.USTAR_FORMAT)
    return patch_header(plain, 1024, slice(124, 136), b"\xff" + (256 ** 11 + size).to_bytes(11, "big"))


def _tar_with(at: int, field: slice, value: bytes, checksum: bool = True) -> bytes:
    plain = _tar()
    if checksum:
        return patch_header(plain, at, field, value)
    return plain[:at] + plain[at:at + 512][:field.start] + value + plain[at + field.stop:]


DAMAGED = r"damaged tar header"
MALFORMED = [
    ("jsonl", b'{"text": "a"}\n{"text": \n', r"line 2 at byte 14: invalid JSON record"),
    ("jsonl", b'{"text": "a"}\n[1, 2]\n', r"line 2 at byte 14: not a JSON object \(array\)"),
    ("jsonl", b'"text"\n', r"line 1 at byte 0: not a JSON object \(str\)"),
    ("jsonl", b'{"txt": "a"}\n', r"line 1 at byte 0: the object has no field 'text'"),
    ("jsonl", b'{"text": 3}\n', r"line 1 at byte 0: invalid JSON record \(Expected `str`, got `int` - at `\$.text`\)"),
    ("jsonl", b'\xef\xbb\xbf{"text": "a"}\n', r"line 1 at byte 0: starts with a UTF-8 byte order mark"),
    ("jsonl", b'{"text": "\\ud800"}\n', r"line 1 at byte 0: the record holds an unpaired surrogate escape"),
    ("jsonl", b'{"text": "a"}\n{"text": "\\udc00 b"}\n', r"line 2 at byte 14: the record holds an unpaired surrogate"),
    ("jsonl", b'{"text": "a\xffb"}\n', r"line 1 at byte 0: the field 'text' is not UTF-8 text \(invalid start byte"),
    ("jsonl", b'{"text": "\xed\xa0\x80"}\n', r"line 1 at byte 0: the field 'text' is not UTF-8 text"),
    ("jsonl", b'{"text": "a"}\n{"text": "b", "y": ' + b"[" * 1000 + b"]" * 1000 + b"}\n",
     r"line 2 at byte 14: the record nests arrays and objects 1001 levels deep \(its own object is level 1\), deeper "
     r"than the limit of 512 \(MAX_JSON_DEPTH\)"),
    # hostile tar headers: tarfile's OSError, ValueError, UnicodeDecodeError, endless loops, silent ends
    ("tar", _tar({"size": "-4096"}), rf"member 1 at byte 1024: {DAMAGED}: member 'evil' has a size of -4096 bytes "
                                     r"\(below zero\)"),
    ("tar", _tar({"size": "-1536"}), rf"member 1 at byte 1024: {DAMAGED}: member 'evil' has a size of -1536 bytes"),
    ("tar", _tar({"size": "-1"}), rf"member 1 at byte 1024: {DAMAGED}: member 'evil' has a size of -1 bytes"),
    ("tar", _tar({"size": "-4096"}, first=True), rf"member 0 at byte 0: {DAMAGED}: member 'evil' has a size of -4096"),
    ("tar", _tar({"GNU.sparse.realsize": "-5"}), rf"member 1 at byte 1024: {DAMAGED}: member 'evil' has a size of -5"),
    ("tar", _tar_base256_size(-512), rf"member 1 at byte 1024: {DAMAGED}: member 'evil' has a size of -512 bytes"),
    ("tar", _tar({"GNU.sparse.map": "0,x"}), rf"member 1 at byte 1024: {DAMAGED}: ValueError: invalid literal for "
                                             r"int\(\) with base 10: 'x'"),
    ("tar", _tar({"GNU.sparse.map": "0,x"}, first=True), rf"member 0 at byte 0: {DAMAGED}: ValueError: invalid"),
    ("tar", _tar({"GNU.sparse.size": "big"}), rf"member 1 at byte 1024: {DAMAGED}: ValueError: invalid literal"),
    ("tar", _tar({"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}),
     rf"member 1 at byte 1024: {DAMAGED}: ValueError: not enough values to unpack"),
    ("tar", _tar(raw=pax_record(b"hdrcharset", b"\xff\xfe")),
     rf"member 1 at byte 1024: {DAMAGED}: UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff"),
    ("tar", _tar(raw=b"0 path=x\n"), rf"member 1 at byte 1024: {DAMAGED}: its extended \(PAX or GNU\) header cannot "
                                     r"be read"),
    ("tar", _tar_with(1024, slice(148, 156), b"0000000\0", checksum=False),
     rf"member 1 at byte 1024: {DAMAGED}: not a tar header \(bad checksum\)"),
    ("tar", _tar()[:1024 + 300], rf"member 1 at byte 1024: {DAMAGED}: the archive ends inside it \(300 of 512 bytes\)"),
    ("tar", _tar()[:300], r"not a readable tar archive"),
]


@pytest.mark.parametrize("kind, data, message", MALFORMED)
def test_malformed_records_name_file_record_and_offset(tmp_path, kind, data, message):
    p = tmp_path / f"bad.{kind}"
    p.write_bytes(data)
    cache = tmp_path / "cache"
    with pytest.raises(FormatError, match=rf"bad\.{kind}'?: {message}"):
        Consumer(str(p), documents=kind, cache_dir=cache)
    assert not list((cache / "records").rglob("meta.json")) if (cache / "records").exists() else True
    if kind == "tar":  # a damaged header is no bad record: skipping does not pass over it
        with pytest.raises(FormatError, match=rf"bad\.{kind}'?: {message}"):
            Consumer(str(p), documents=kind, cache_dir=False, on_bad_record="skip")


@pytest.mark.parametrize("data", [_tar({"size": "-4096"}), _tar_with(1024, slice(148, 156), b"0000000\0", False)])
def test_damaged_tar_headers_in_a_compressed_archive(tmp_path, data):
    import gzip

    p = tmp_path / "bad.tar.gz"
    p.write_bytes(gzip.compress(data))
    with pytest.raises(FormatError, match=rf"bad\.tar\.gz'?: member 1 at byte 1024: {DAMAGED}: "):
        Consumer(str(p), documents="tar", cache_dir=False)


def test_chunk_stream_holds_the_bytes_behind_it():
    """A streamed archive's header is read again where tarfile stopped: the stream holds ``keep`` bytes before its
    current piece."""
    from consumer.sources.records.container import ChunkStream

    data = bytes(range(40))
    stream = ChunkStream(iter([data[:7], data[7:9], data[9:30], data[30:]]), keep=10)
    assert stream.read(5) == data[:5] and stream.held(2, 100) == data[2:5]  # only bytes already read
    assert stream.read(30) == data[5:35]  # now in the last piece (from byte 30), bytes 20-29 held behind it
    assert stream.held(20, 8) == data[20:28] and stream.held(28, 4) == data[28:32]
    assert stream.held(33, 512) == data[33:35]
    assert stream.held(19, 2) is None and stream.held(0, 1) is None  # dropped
    assert stream.read() == data[35:] and stream.held(36, 100) == data[36:]


def test_a_truncated_tar_member_is_skipped_with_skip(tmp_path):
    ds = Consumer(str(_tar_truncated(tmp_path)), documents="tar", cache_dir=False, on_bad_record="skip", n_bytes=1,
                  metadata=None)
    assert docs_of(ds) == [b"a" * 600]
    assert ds.build_info["records"]["skipped_records"] == 1
    huge = tmp_path / "huge.tar"  # a PAX size past any file: skipped too, no seek out of range
    huge.write_bytes(_tar({"size": "1" + "0" * 30}))
    ds = Consumer(str(huge), documents="tar", cache_dir=False, on_bad_record="skip", n_bytes=1,
                  metadata=None)
    assert docs_of(ds) == [b"hi"] and ds.build_info["records"]["skipped_records"] == 1


def test_malformed_containers(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    with pytest.raises(FormatError, match=r"t\.tar'?: member 1 at byte \d+: member 'm00001' is truncated"):
        Consumer(str(_tar_truncated(tmp_path)), documents="tar", cache_dir=cache)
    p = write_parquet(tmp_path / "p.parquet", [b"a"], other=pa.array([1]))
    with pytest.raises(FormatError, match=r"no column 'body'; the file has the columns \['text', 'other'\]"):
        Consumer(str(p), documents="parquet", text_field="body", cache_dir=cache)
    pq.write_table(pa.table({"text": pa.array(["a", None])}), tmp_path / "n.parquet")
    with pytest.raises(FormatError, match=r"row 1 \(row group 0\): column 'text' is null"):
        Consumer(str(tmp_path / "n.parquet"), documents="parquet", cache_dir=cache)
    pq.write_table(pa.table({"text": pa.array([1, 2])}), tmp_path / "i.parquet")
    with pytest.raises(FormatError, match=r"column 'text' is int64, expected a string or binary column"):
        Consumer(str(tmp_path / "i.parquet"), documents="parquet", cache_dir=cache)
    monkeypatch.setattr(record_limits, "MAX_RECORD_BYTES", 4)
    long = write_lines(tmp_path / "l.txt", [b"abc", b"abcdefg"])
    with pytest.raises(FormatError, match=r"l\.txt'?: line 2 at byte 4: a line of 7 bytes is longer than the limit"):
        Consumer(str(long), documents="lines", cache_dir=cache)
    assert not list(cache.rglob("meta.json"))  # nothing partial cached


@pytest.mark.parametrize("kwargs, message", [
    ({"documents": "csv"}, r"documents must be one of \['files', 'lines', 'jsonl', 'parquet', 'tar'\], got 'csv'"),
    ({"documents": "jsonl", "text_field": ""}, "text_field must be a field name"),
    ({"documents": "jsonl", "text_field": "a..b"}, "text_field must be a field name"),
    ({"documents": "lines", "class_field": "label"}, "class_field is read from JSON records or Parquet columns"),
    ({"documents": "jsonl", "class_field": "text"}, "must name different fields"),
    ({"documents": "jsonl", "on_bad_record": "ignore"}, r"on_bad_record must be one of \['raise', 'skip'\]"),
])
def test_bad_options(tmp_path, kwargs, message):
    p = write_jsonl(tmp_path / "a.jsonl", ["x"])
    with pytest.raises(InputError, match=message):
        Consumer(str(p), cache_dir=False, **kwargs)


def test_no_documents_is_an_input_error(tmp_path):
    p = tmp_path / "e.txt"
    p.write_bytes(b"\n\n")
    with pytest.raises(InputError, match="the containers hold no documents"):
        Consumer(str(p), documents="lines", cache_dir=False)


def test_split_where_and_pickle(tmp_path):
    import pickle

    p = write_jsonl(tmp_path / "a.jsonl", [f"doc {i}" for i in range(20)], extra={"label": "x"})
    ds = Consumer(str(p), documents="jsonl", cache_dir=tmp_path / "c", style="diff", seqlen=16)
    parts = ds.split({"train": 0.5, "val": 0.5})
    assert sorted(docs_of(parts["train"]) + docs_of(parts["val"])) == sorted(docs_of(ds))
    sub = ds.where("size > 4")
    assert docs_of(sub) == [d for d in docs_of(ds) if len(d) > 4]
    back = pickle.loads(pickle.dumps(ds))
    assert np.array_equal(back[0:5]["input_array"].numpy(), ds[0:5]["input_array"].numpy())


def test_containers_indexed_on_threads_keep_their_order_and_the_first_error(tmp_path, monkeypatch):
    from consumer.dataset import records as build

    (tmp_path / "d").mkdir()
    texts = [[f"c{c} r{r} " + "é\\n\"" * (c % 3) for r in range(c % 4 + 1)] for c in range(24)]
    for c, rows in enumerate(texts):
        write_jsonl(tmp_path / "d" / f"part-{c:02d}.jsonl", rows, ensure_ascii=c % 2 == 0)
    want = [t.encode() for rows in texts for t in rows]
    for threads in (1, 4):
        monkeypatch.setattr(build, "_scan_threads", lambda k=threads: k)
        for cache in (False, tmp_path / f"cache{threads}"):
            assert docs_of(Consumer(str(tmp_path / "d"), documents="jsonl", cache_dir=cache)) == want
    (tmp_path / "d" / "part-05.jsonl").write_bytes(b'{"text": 1}\n')
    (tmp_path / "d" / "part-20.jsonl").write_bytes(b"not json\n")
    with pytest.raises(FormatError, match=r"part-05\.jsonl"):
        Consumer(str(tmp_path / "d"), documents="jsonl", cache_dir=False)
