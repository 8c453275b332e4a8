"""Edge cases found in review: headers, odd file names, numpy scalars, descriptors, packed SQL, clearing."""

import gc
import json
import os

import numpy as np
import pytest

import consumer.dataset.entry as entry_module
import consumer.sources.local as local_files_module
from consumer import Consumer, FileChangedError, FormatError, InputError, QueryError
from consumer.catalog.headers import normalise_description
from consumer.cli.main import main
from consumer.dataset.cache import list_entries
from consumer.dataset.clear import clear
from consumer.tokens.megatron_index import MegatronSampling

from .helpers.descriptors import held_under


def test_short_file_names_do_not_eat_the_description(tmp_path):
    for name in ("e", "t", "text", "x"):
        assert normalise_description("ASCII text", str(tmp_path / name)) == "ASCII text"
    assert normalise_description("Targa image data 3340 x 3854 x 16", "/d/x") == "Targa image data 3340 x 3854 x 16"
    assert normalise_description("/data/cat/photo_1.gz: gzip", "/data/cat/photo_1.gz") == "gzip"


def test_symlinked_files_are_described_by_their_bytes(tmp_path):
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "3f9a").write_text("print('hello')\n" * 5)
    (tmp_path / "data" / "cat").mkdir(parents=True)
    os.symlink(blobs / "3f9a", tmp_path / "data" / "cat" / "a.py")
    (tmp_path / "data" / "cat" / "b.py").write_text("print('hello')\n" * 5)
    ds = Consumer(str(tmp_path / "data"), cache_dir=False)
    assert ds.documents.header_text(0) == ds.documents.header_text(1)
    assert "link" not in ds.documents.header_text(0) and "blobs" not in ds.documents.header_text(0)


def test_non_utf8_file_names(tmp_path):
    root = os.fsencode(str(tmp_path / "data"))
    os.makedirs(os.path.join(root, b"cat"))
    with open(os.path.join(root, b"cat", b"caf\xe9.txt"), "wb") as f:
        f.write(b"bytes of a file with a latin-1 name\n")
    with open(os.path.join(root, b"cat", b"plain.txt"), "wb") as f:
        f.write(b"plain\n")
    ds = Consumer(str(tmp_path / "data"), cache_dir=tmp_path / "cache")
    assert ds.decode(ds.document_tokens(0)).endswith(b"latin-1 name\n")
    paths = [r[0] for r in ds.sql("SELECT path FROM files ORDER BY file_id")]
    assert paths[0].endswith("caf\\xe9.txt") and len(paths) == 2
    assert Consumer(str(tmp_path / "data"), cache_dir=tmp_path / "cache").build_info["cache"] == "hit"
    assert len(ds.where("path LIKE '%caf%'").files) == 1


def test_numpy_integers_are_accepted_everywhere(corpus_dir, tmp_path):
    ds = Consumer(corpus_dir, seqlen=np.int64(16), cache_dir=tmp_path / "c")
    assert ds.seqlen == 16 and json.loads(ds.to_json())["seqlen"] == 16
    mg = Consumer(corpus_dir, style="concat", seqlen=np.int32(20), cache_dir=tmp_path / "c",
                  sampling=MegatronSampling(num_samples=np.int64(5)))
    assert json.loads(mg.to_json())["sampling"]["num_samples"] == 5


@pytest.mark.parametrize("make, message", [
    (lambda c: [c["cat"][0], {c["cat"][1]: "cat"}], r"found a mix of \['dict', 'path'\]"),
    (lambda c: {"cat": [c["cat"][0]], "dog": c["dog"][0]}, r"found values of types \['list', 'str'\]"),
])
def test_mixed_input_forms(corpus, make, message):
    with pytest.raises(InputError, match=message):
        Consumer(make(corpus), cache_dir=False)


def test_no_descriptor_or_connection_leaks(corpus_dir, tmp_path):
    cache = tmp_path / "c"
    Consumer(corpus_dir, cache_dir=cache).sql("SELECT 1")

    def cycle():
        ds = Consumer(corpus_dir, cache_dir=cache)
        assert ds.build_info["cache"] == "hit"
        ds.where("size < 100").sql("SELECT count(*) FROM files")
        ds.close()

    for _ in range(10):
        cycle()
    settled = held_under(tmp_path)
    for _ in range(40):
        cycle()
    assert held_under(tmp_path) - settled <= 2  # no growth per dataset (it was 12+ descriptors each)
    gc.collect()
    before = held_under(tmp_path)
    with Consumer(corpus_dir, cache_dir=cache) as ds:
        ds.sql("SELECT count(*) FROM files WHERE mime IS NOT NULL")  # names a libmagic column: opens the catalog
        assert held_under(tmp_path) > before  # the catalog and the SQL view are open
    gc.collect()  # ds is still referenced: only close() can have released its connections
    assert held_under(tmp_path) <= before  # leaving the block closed both


def test_large_cached_arrays_are_memory_mapped(corpus_dir, tmp_path, monkeypatch):
    import consumer.dataset.cache as cache_module
    Consumer(corpus_dir, cache_dir=tmp_path / "c")
    monkeypatch.setattr(cache_module, "_MMAP_MIN_BYTES", 0)
    assert isinstance(Consumer(corpus_dir, cache_dir=tmp_path / "c").index.seg_doc, np.memmap)


def test_in_memory_catalog_keeps_working_after_sql(corpus_dir):
    ds = Consumer(corpus_dir, cache_dir=False)
    ds.sql("SELECT count(*) FROM files")
    docs = ds.documents
    ds.catalog.sync(docs.paths, docs.doc_size, docs.doc_mtime, hashes=True)
    assert ds.catalog.count() == len(docs)
    assert ds.sql("SELECT count(*) FROM files WHERE sha256 IS NOT NULL")[0][0] == len(docs)


def test_sql_and_where_on_a_packed_dataset_need_no_source_files(corpus_dir, tmp_path):
    import shutil
    raw = Consumer(corpus_dir, cache_dir=False, style="concat", seqlen=32)
    raw.pack(tmp_path / "p")
    reference = raw.subset(np.flatnonzero((raw.documents.doc_class == 1) & (raw.documents.doc_size > 8)))
    expected = reference.fetch_numpy(np.arange(len(reference)))["input_array"]
    copy = tmp_path / "moved"
    shutil.move(corpus_dir, copy)  # the sources are gone
    packed = Consumer.from_packed(tmp_path / "p", style="concat", seqlen=32)
    rows = packed.sql("SELECT class, count(*) FROM files GROUP BY class ORDER BY class")
    assert list(rows) == [("cat", 9), ("dog", 6), ("eel", 2)]
    sub = packed.where("class = 'dog' AND size > 8")
    assert sub.documents.source.tokens is not None and sub.classes == ["dog"]
    assert np.array_equal(sub.fetch_numpy(np.arange(len(sub)))["input_array"], expected)


def test_where_condition_cannot_escape_its_parentheses(corpus_dir):
    ds = Consumer(corpus_dir, cache_dir=False)
    with pytest.raises(QueryError):
        ds.where("0 UNION SELECT -1")


def test_corrupt_file_table_is_a_format_error(corpus_dir, tmp_path):
    Consumer(corpus_dir, cache_dir=False).pack(tmp_path / "p")
    table = tmp_path / "p.consumer.npz"
    data = bytearray(table.read_bytes())
    refused = 0
    for offset in range(0, len(data), 3):  # any other exception type fails the test
        damaged = bytearray(data)
        damaged[offset] ^= 0xFF
        table.write_bytes(bytes(damaged))
        try:
            Consumer.from_packed(tmp_path / "p")
        except FormatError:
            refused += 1
    assert refused > len(data) // 6


def test_cache_clear_only_removes_its_own_artefacts(corpus_dir, tmp_path):
    root = tmp_path / "proj"
    (root / "index").mkdir(parents=True)
    (root / "index" / "home.html").write_text("<html>")
    (root / "index" / "notes").mkdir()
    (root / "index" / "notes" / "a.txt").write_text("keep me")
    Consumer(corpus_dir, cache_dir=root)
    assert len(list_entries(str(root))) == 1
    clear(str(root), catalog=True)
    assert (root / "index" / "home.html").read_text() == "<html>"
    assert (root / "index" / "notes" / "a.txt").read_text() == "keep me"
    assert list_entries(str(root)) == [] and not (root / "catalog.sqlite").exists()


def test_header_rules_are_part_of_the_cache_key(corpus_dir, tmp_path, monkeypatch):
    first = Consumer(corpus_dir, cache_dir=tmp_path / "c")
    monkeypatch.setattr(entry_module, "HEADER_RULES_VERSION", 999)  # where the index key is made
    assert Consumer(corpus_dir, cache_dir=tmp_path / "c").build_info["key"] != first.build_info["key"]


def test_file_replaced_by_a_fifo_or_a_directory(corpus_dir):
    ds = Consumer(corpus_dir, metadata=None, cache_dir=False)
    victim = int(np.argmax(ds.documents.doc_size))
    os.remove(ds.files[victim])
    os.mkfifo(ds.files[victim])
    with pytest.raises(FileChangedError, match="cannot read"):
        ds[victim]
    os.remove(ds.files[victim])
    os.mkdir(ds.files[victim])
    with pytest.raises(FileChangedError, match="Is a directory"):
        ds[victim]


def test_split_reads_are_completed(corpus_dir, monkeypatch):
    ds = Consumer(corpus_dir, metadata=None, cache_dir=False)
    expected = ds.fetch_numpy(np.arange(len(ds)))["input_array"]
    real = os.preadv

    def short(fd, buffers, offset):  # the kernel may return fewer bytes (reads over 2 GiB always do)
        return real(fd, [buffers[0][:7]], offset)

    monkeypatch.setattr(local_files_module.os, "preadv", short)
    assert np.array_equal(ds.fetch_numpy(np.arange(len(ds)))["input_array"], expected)


def test_token_budget_counts_the_cls_column(corpus_dir):
    ds = Consumer(corpus_dir, metadata=None, cache_dir=False, seqlen=300, long_files="windows")
    ds.set_unsupervised_mode(add_cls=True)
    ds.create_token_batches(max_tokens=1024)
    for _ in range(len(ds.batches(0))):
        out = ds.get_next_batch(["input_array"])["input_array"]
        assert out.shape[0] * out.shape[1] <= 1024


def test_small_api_errors(corpus_dir):
    ds = Consumer(corpus_dir, metadata=None, cache_dir=False)
    with pytest.raises(InputError, match="slice step cannot be zero"):
        ds[::0]
    with pytest.raises(InputError, match=r"state misses \['n_samples'"):
        ds.load_state_dict({"version": 1})


def test_cli_unexpected_errors_are_one_line(corpus_dir, tmp_path, capsys):
    assert main(["sql", corpus_dir, "SELECT x'00ff' AS b", "--json", "--cache-dir", str(tmp_path / "c")]) == 0
    assert len(json.loads(capsys.readouterr().out)[0]["b"]) == 4
