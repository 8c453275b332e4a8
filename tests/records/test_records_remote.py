"""Records behind URLs: ``jsonl``/``lines``/``tar`` containers on a moto S3 server and an HTTP server (both on
127.0.0.1) give the same documents, samples and ``documents`` rows as the same containers on local disk; an object
changed after indexing is never served."""

from __future__ import annotations

import numpy as np
import pytest

from consumer import Consumer, FileChangedError
from consumer.errors import FormatError

from ..helpers.remote_servers import file_server, s3_with_files
from .writers import tar_bytes, write_jsonl, write_lines, write_tar

pytest.importorskip("s3fs")
pytest.importorskip("moto")

TEXTS = {"x": ["hello", "wörld", "", "a longer document of bytes " * 9], "y": ["hi", "z" * 300, "bye"]}
KINDS = {"jsonl": "a.jsonl", "lines": "a.txt", "tar": "a.tar"}
QUERY = ["input_array", "attention_mask", "class", "file_id", "offset"]
ROWS = ('SELECT doc_id, file_id, record, "offset", length, class, class_id, tokens, samples, sha256 FROM documents '
        "ORDER BY 1")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The containers of each kind under ``<local>/<kind>/<class>/``, and a moto server holding them."""
    local = tmp_path_factory.mktemp("local") / "corpus"
    for kind, name in KINDS.items():
        for cls, texts in TEXTS.items():
            (local / kind / cls).mkdir(parents=True)
            path = local / kind / cls / name
            if kind == "jsonl":
                write_jsonl(path, texts)
            elif kind == "lines":
                write_lines(path, [t.encode() for t in texts if t])
            else:
                write_tar(path, [t.encode() for t in texts])
    with s3_with_files(local) as (so, fs):
        yield so, fs, local


def _same(a: Consumer, b: Consumer) -> None:
    assert len(a) == len(b) and a.classes == b.classes and len(a.files) == len(b.files)
    assert [a.decode(a.document_tokens(i)) for i in range(len(a.files))] == \
        [b.decode(b.document_tokens(i)) for i in range(len(b.files))]
    ids = np.arange(len(a))
    x, y = a.fetch_numpy(ids, QUERY), b.fetch_numpy(ids, QUERY)
    for k in QUERY:
        assert np.array_equal(x[k], y[k]), k
    assert a.sql(ROWS) == b.sql(ROWS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_s3_containers_equal_local_containers(served, tmp_path, kind):
    so, _, local = served
    here = Consumer(str(local / kind), documents=kind, seqlen=16, style="diff", cache_dir=False)
    remote = Consumer(f"s3://data/corpus/{kind}/", documents=kind, storage_options=so, seqlen=16, style="diff",
                      cache_dir=tmp_path / "c")
    assert remote.files[0].startswith(f"s3://data/corpus/{kind}/x/") and remote.build_info["cache"] == "miss"
    _same(remote, here)
    again = Consumer(f"s3://data/corpus/{kind}/", documents=kind, storage_options=so, seqlen=16, style="diff",
                     cache_dir=tmp_path / "c")
    assert again.build_info["cache"] == "hit" and again.build_info["records"]["reused"] == 2
    _same(again, here)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_https_containers_equal_local_containers(served, kind):
    _, _, local = served
    here = Consumer(str(local / kind), documents=kind, seqlen=16, cache_dir=False)
    with file_server(local) as server:
        urls = {c: [f"{server.url}{kind}/{c}/{KINDS[kind]}"] for c in TEXTS}
        remote = Consumer(urls, documents=kind, seqlen=16, cache_dir=False)
        assert remote.files[0].startswith(server.url)
        _same(remote, here)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_object_changed_after_indexing_is_never_served(served, tmp_path, kind):
    so, fs, local = served
    key = f"data/corpus/{kind}/y/{KINDS[kind]}"
    ds = Consumer(f"s3://data/corpus/{kind}/", documents=kind, storage_options=so, seqlen=16,
                  cache_dir=tmp_path / "c")
    original = (local / kind / "y" / KINDS[kind]).read_bytes()
    try:
        fs.pipe(key, original.replace(b"z", b"q"))  # same size, new content: a new ETag
        with pytest.raises(FileChangedError, match=KINDS[kind]):
            [ds.document_tokens(i) for i in range(len(ds.files))]
        rebuilt = Consumer(f"s3://data/corpus/{kind}/", documents=kind, storage_options=so, seqlen=16,
                           cache_dir=tmp_path / "c")  # the changed object is indexed again, the other reused
        assert rebuilt.build_info["records"]["reused"] == 1
        assert any(rebuilt.decode(rebuilt.document_tokens(i)).endswith(b"q" * 300) for i in range(len(rebuilt.files)))
    finally:
        fs.pipe(key, original)



def _three(pax: dict[str, str]) -> bytes:
    return tar_bytes([("m0", b"hi", {}), ("evil", b"hello", pax), ("after", b"abc", {})])


DAMAGED_TARS = {  # streamed once for their headers: the same errors as a local archive's
    "negative size": (lambda: _three({"size": "-4096"}), r"member 'evil' has a size of -4096 bytes \(below zero\)"),
    "bad sparse map": (lambda: _three({"GNU.sparse.map": "0,x"}), r"ValueError: invalid literal for int\(\)"),
    "bad checksum": (lambda: _three({})[:1024 + 148] + b"0000000\0" + _three({})[1024 + 156:],
                     r"not a tar header \(bad checksum\)"),
    "cut header": (lambda: _three({})[:1024 + 300], r"the archive ends inside it \(300 of 512 bytes\)"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED_TARS))
def test_damaged_tar_headers_behind_urls_name_the_member(tmp_path, case):
    make, message = DAMAGED_TARS[case]
    (tmp_path / "bad.tar").write_bytes(make())
    with file_server(tmp_path) as server:
        with pytest.raises(FormatError, match=rf"bad\.tar'?: member 1 at byte 1024: damaged tar header: {message}"):
            Consumer([f"{server.url}bad.tar"], documents="tar", cache_dir=False)
