"""Packed stores: raw reader == packed reader for every sample, interop, merge, malformed stores, atomicity."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer, inspect_packed, merge_packed, open_packed, read_sidecar
from consumer.errors import FileChangedError, FormatError, InputError
from consumer.formats import IndexedReader, read_pbin

from ..conftest import write_corpus

ALL_COLUMNS = ["input_array", "attention_mask", "class", "output_tensor", "labels", "sample_id", "file_id",
               "offset", "length"]
# (style, seqlen, long_files) served from the same store
STYLES = [("concat", 37, "truncate"), ("diff", "auto", "truncate"), ("diff", 50, "windows")]
SMALL = {"cat": [0, 1, 2, 3, 5, 7, 100], "dog": [6, 9, 31, 64, 301], "eel": [250, 11]}


def assert_same_samples(raw: Consumer, packed: Consumer) -> None:
    """Every sample, every column, masked and unmasked, two epochs of masks: identical."""
    assert len(raw) == len(packed) and raw.seqlen == packed.seqlen
    ids = np.arange(len(raw))
    for query, epoch in ((ALL_COLUMNS, 0), (ALL_COLUMNS, 3), (None, 0)):
        a = raw.fetch_numpy(ids, query, epoch=epoch)
        b = packed.fetch_numpy(ids, query, epoch=epoch)
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"column {k}, epoch {epoch}")


def store_files(prefix: str) -> list[str]:
    suffixes = (".bin", ".idx", ".pbin", ".consumer.json", ".consumer.npz", ".consumer.sums")
    return [prefix + s for s in suffixes if os.path.exists(prefix + s)]


# ------------------------------------------------------------------------------------------ equality


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
@pytest.mark.parametrize("metadata", ["file", None])
@pytest.mark.parametrize("n_bytes", [1, 2, 3])
def test_packed_equals_raw_for_every_sample(tmp_path: Path, n_bytes: int, metadata, fmt: str) -> None:
    fps = write_corpus(tmp_path / "data", SMALL, seed=n_bytes)
    prefix = str(tmp_path / "store")
    summary = Consumer(fps, n_bytes=n_bytes, metadata=metadata).pack(prefix, format=fmt)
    assert summary["documents"] == sum(len(v) for v in SMALL.values())
    for style, seqlen, long_files in STYLES:
        raw = Consumer(fps, style=style, n_bytes=n_bytes, seqlen=seqlen, metadata=metadata, long_files=long_files,
                       seed=7)
        packed = Consumer.from_packed(prefix, style=style, seqlen=seqlen, long_files=long_files, seed=7)
        assert packed.documents.source.tokens is not None
        assert packed.files == raw.files and packed.classes == raw.classes
        assert packed.metadata == metadata and packed.vocab == raw.vocab
        np.testing.assert_array_equal(packed.documents.doc_len, raw.documents.doc_len)
        assert_same_samples(raw, packed)
        for sel in ({"cat": 2, "eel": 1}, {"dog": [0, -1]}, slice(1, 4)):
            a, b = raw[sel, "mlm"], packed[sel, "mlm"]
            for k in a:
                assert (a[k] == b[k]).all()


def test_document_tokens_from_the_store(tmp_path: Path, corpus) -> None:
    ds = Consumer(corpus, n_bytes=2)
    ds.pack(str(tmp_path / "m"), format="megatron")
    ds.pack(str(tmp_path / "p"), format="modalities")
    reader = IndexedReader(str(tmp_path / "m"))  # the generic Megatron reader, no sidecar needed
    pb = read_pbin(tmp_path / "p.pbin")
    assert reader.flavour == "megatron" and reader.dtype == np.dtype("<i4") and pb.token_size_in_bytes == 4
    assert len(reader) == len(pb) == len(ds.files)
    np.testing.assert_array_equal(reader.document_indices, np.arange(len(ds.files) + 1))
    for i in range(len(ds.files)):
        expected = ds.document_tokens(i)
        np.testing.assert_array_equal(reader[i], expected)
        np.testing.assert_array_equal(pb[i], expected)
    packed = Consumer.from_packed(str(tmp_path / "m"))
    for i in range(len(ds.files)):
        np.testing.assert_array_equal(packed.document_tokens(i), ds.document_tokens(i))


def test_dtypes_follow_the_vocabulary(tmp_path: Path) -> None:
    fps = write_corpus(tmp_path / "data", {"a": [3, 4]})
    expect = {(1, "megatron"): "uint16", (2, "megatron"): "int32", (3, "megatron"): "int32",
              (1, "modalities"): "uint16", (2, "modalities"): "uint32", (3, "modalities"): "uint32"}
    for (n_bytes, fmt), dtype in expect.items():
        prefix = str(tmp_path / f"s{n_bytes}{fmt}")
        assert Consumer(fps, n_bytes=n_bytes, metadata=None).pack(prefix, format=fmt)["dtype"] == dtype
        assert inspect_packed(prefix)["dtype"] == dtype
        assert Consumer.from_packed(prefix).documents.source.tokens.tokens.dtype == np.dtype(dtype)


def test_repack_of_a_packed_dataset_is_byte_identical(tmp_path: Path, corpus) -> None:
    Consumer(corpus, n_bytes=3).pack(str(tmp_path / "a"))
    Consumer.from_packed(str(tmp_path / "a")).pack(str(tmp_path / "b"), chunk_tokens=100)
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"a{suffix}").read_bytes() == (tmp_path / f"b{suffix}").read_bytes()


def test_chunk_size_does_not_change_the_store(tmp_path: Path, corpus) -> None:
    ds = Consumer(corpus, n_bytes=2, metadata="file")
    for fmt, suffix in (("megatron", ".bin"), ("modalities", ".pbin")):
        ds.pack(str(tmp_path / "big"), format=fmt)
        ds.pack(str(tmp_path / "tiny"), format=fmt, chunk_tokens=1)  # one document per call
        assert (tmp_path / f"big{suffix}").read_bytes() == (tmp_path / f"tiny{suffix}").read_bytes()


def test_summary_sidecar_and_inspect(tmp_path: Path, corpus) -> None:
    ds = Consumer(corpus, n_bytes=2, class_to_id={"cat": 5, "dog": 1, "eel": 9})
    prefix = str(tmp_path / "s")
    summary = ds.pack(prefix)
    tokens = int(ds.documents.doc_len.sum())
    assert summary["tokens"] == tokens and summary["format"] == "megatron"
    assert summary["source_bytes"] == int(ds.documents.doc_size.sum())
    assert summary["bytes"] == sum(os.path.getsize(p) for k, p in summary["files"].items() if k != "sidecar")
    side = json.loads(Path(prefix + ".consumer.json").read_text())
    assert read_sidecar(prefix) == side
    assert side["n_bytes"] == 2 and side["metadata"] == "file" and side["with_header"] is True
    assert side["classes"] == ["cat", "dog", "eel"] and side["class_to_id"] == {"cat": 5, "dog": 1, "eel": 9}
    assert side["headers"] == ds.documents.headers and side["documents"] == len(ds.files)
    assert {k: v["size"] for k, v in side["files"].items()} == {
        "bin": tokens * 4, "idx": os.path.getsize(prefix + ".idx"), "table": os.path.getsize(prefix + ".consumer.npz")}
    with np.load(prefix + ".consumer.npz", allow_pickle=False) as z:
        assert sorted(z.files) == ["doc_class", "doc_header", "doc_size", "path_at", "paths"]
    info = inspect_packed(prefix)
    assert info["documents"] == len(ds.files) and info["tokens"] == tokens and info["n_bytes"] == 2
    assert info["classes"] == {"cat": 9, "dog": 6, "eel": 2}
    preview = info["preview"]
    assert preview["path"] == ds.files[0] and preview["class"] == "cat"
    assert preview["ids"] == ds.document_tokens(0)[:64].tolist()
    assert "<SEP>" in preview["text"] and preview["text"].startswith(preview["header"][:2])


def test_metadata_mode_is_kept(tmp_path: Path, corpus) -> None:
    ds = Consumer(corpus, n_bytes=1, metadata=lambda p: "label " + os.path.basename(os.path.dirname(p)))
    ds.pack(str(tmp_path / "s"), format="modalities")
    corpus_, docs, metadata = open_packed(str(tmp_path / "s"))
    assert metadata == "callable" and docs.headers == ["label cat", "label dog", "label eel"]
    assert corpus_.form == "packed" and corpus_.class_names == ["cat", "dog", "eel"]
    assert Consumer.from_packed(str(tmp_path / "s")).get_dict()["metadata"] == "callable"


def test_verbose_reports_size_and_quiet_prints_nothing(tmp_path: Path, corpus, capsys) -> None:
    ds = Consumer(corpus, n_bytes=2, metadata=None)
    ds.pack(str(tmp_path / "q"))
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    summary = ds.pack(str(tmp_path / "v"), verbose=True)
    out = capsys.readouterr()
    assert f"{summary['tokens'] * 4} bytes" in out.out + out.err


def test_pack_arguments_are_checked(tmp_path: Path, corpus) -> None:
    ds = Consumer(corpus, n_bytes=2, metadata=None)
    with pytest.raises(InputError, match="format must be one of"):
        ds.pack(str(tmp_path / "s"), format="arrow")
    with pytest.raises(InputError, match="chunk_tokens"):
        ds.pack(str(tmp_path / "nowhere" / "s"), chunk_tokens=0)
    assert os.listdir(tmp_path) == ["data"]  # nothing written, no directory created for bad arguments
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match="directory does not exist"):
        ds.pack(str(tmp_path / "afile" / "s"))
    ds.pack(str(tmp_path / "new" / "dir" / "s"))  # missing parent directories are created
    assert sorted(os.listdir(tmp_path / "new" / "dir")) == ["s.bin", "s.consumer.json", "s.consumer.npz",
                                                            "s.consumer.sums", "s.idx"]


def test_overwrite_with_another_format(tmp_path: Path, corpus) -> None:
    ds = Consumer(corpus, n_bytes=2)
    prefix = str(tmp_path / "s")
    ds.pack(prefix, format="megatron")
    ds.pack(prefix, format="modalities")
    assert inspect_packed(prefix)["format"] == "modalities"
    assert_same_samples(Consumer(corpus, n_bytes=2, style="concat", seqlen=64),
                        Consumer.from_packed(prefix, style="concat", seqlen=64))


# ------------------------------------------------------------------------------------------ merge


def two_corpora(tmp_path: Path):
    a = write_corpus(tmp_path / "b_first", {"cat": [3, 17, 250], "dog": [1, 64]}, seed=1)
    b = write_corpus(tmp_path / "a_second", {"dog": [5, 9, 100], "eel": [7, 2]}, seed=2)
    union = {c: a.get(c, []) + b.get(c, []) for c in ("cat", "dog", "eel")}
    return a, b, union


@pytest.mark.parametrize("n_bytes", [1, 2])
def test_merge_equals_packing_the_union(tmp_path: Path, n_bytes: int) -> None:
    a, b, union = two_corpora(tmp_path)
    Consumer(a, n_bytes=n_bytes).pack(str(tmp_path / "pa"))
    Consumer(b, n_bytes=n_bytes).pack(str(tmp_path / "pb"))
    Consumer(union, n_bytes=n_bytes).pack(str(tmp_path / "pu"))
    # "b_first" sorts after "a_second": the merged store is not in corpus order and must be sorted at open
    summary = merge_packed([str(tmp_path / "pa"), str(tmp_path / "pb")], str(tmp_path / "merged"))
    assert summary["documents"] == 10 and summary["inputs"] == [str(tmp_path / "pa"), str(tmp_path / "pb")]
    table = np.load(str(tmp_path / "merged.consumer.npz"), allow_pickle=False)
    assert os.fsdecode(table["paths"].tobytes()).split("\0")[0] == a["cat"][0]  # store order = input order
    for style, seqlen, long_files in STYLES:
        merged = Consumer.from_packed(str(tmp_path / "merged"), style=style, seqlen=seqlen, long_files=long_files)
        packed_union = Consumer.from_packed(str(tmp_path / "pu"), style=style, seqlen=seqlen, long_files=long_files)
        raw = Consumer(union, style=style, n_bytes=n_bytes, seqlen=seqlen, long_files=long_files)
        assert merged.files == raw.files and merged.classes == ["cat", "dog", "eel"]
        assert_same_samples(packed_union, merged)
        assert_same_samples(raw, merged)
    side = json.loads((tmp_path / "merged.consumer.json").read_text())
    assert side["headers"] == sorted(set(side["headers"])) and side["classes"] == ["cat", "dog", "eel"]
    assert side["class_to_id"] == {"cat": 0, "dog": 1, "eel": 2}  # inputs disagree on ids: renumbered


def test_merge_refusals(tmp_path: Path) -> None:
    a, b, _ = two_corpora(tmp_path)
    Consumer(a, n_bytes=2).pack(str(tmp_path / "a2"))
    Consumer(a, n_bytes=2).pack(str(tmp_path / "a2_again"))
    Consumer(b, n_bytes=1).pack(str(tmp_path / "b1"))
    Consumer(b, n_bytes=2, metadata=None).pack(str(tmp_path / "b2none"))
    Consumer(b, n_bytes=2).pack(str(tmp_path / "b2pbin"), format="modalities")
    out = str(tmp_path / "out")
    with pytest.raises(InputError, match=r"same n_bytes: .*a2' has 2, .*b1' has 1"):
        merge_packed([str(tmp_path / "a2"), str(tmp_path / "b1")], out)
    with pytest.raises(InputError, match=r"same metadata: .* has 'file', .* has None"):
        merge_packed([str(tmp_path / "a2"), str(tmp_path / "b2none")], out)
    with pytest.raises(InputError, match=f"file '{a['cat'][0]}' is in two stores"):
        merge_packed([str(tmp_path / "a2"), str(tmp_path / "a2_again")], out)
    with pytest.raises(InputError, match="megatron stores only"):
        merge_packed([str(tmp_path / "a2"), str(tmp_path / "b2pbin")], out)
    with pytest.raises(InputError, match="also an input"):
        merge_packed([str(tmp_path / "a2")], str(tmp_path / "a2"))
    with pytest.raises(InputError, match="non-empty list"):
        merge_packed(str(tmp_path / "a2"), out)
    assert store_files(out) == []
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".out")]


# ------------------------------------------------------------------------------------------ malformed stores


@pytest.fixture
def store(tmp_path: Path, corpus) -> str:
    prefix = str(tmp_path / "s")
    Consumer(corpus, n_bytes=2).pack(prefix)
    return prefix


def edit_sidecar(prefix: str, **changes) -> None:
    path = Path(prefix + ".consumer.json")
    side = json.loads(path.read_text())
    for key, value in changes.items():
        if key.startswith("size_"):
            side["files"][key[5:]]["size"] = value
        else:
            side[key] = value
    path.write_text(json.dumps(side))


def test_nothing_at_prefix(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no packed store"):
        open_packed(str(tmp_path / "nothing"))
    with pytest.raises(InputError, match="directory does not exist"):
        Consumer.from_packed(str(tmp_path / "no" / "thing"))


def test_missing_sidecar(store: str) -> None:
    os.unlink(store + ".consumer.json")
    with pytest.raises(FormatError, match=r"incomplete pack .* sidecar .* is missing"):
        Consumer.from_packed(store)


def test_missing_store_file(store: str) -> None:
    os.unlink(store + ".idx")
    with pytest.raises(FormatError, match=r"\.idx' is missing: expected \d+ bytes .* got no file"):
        open_packed(store)


def test_truncated_bin(store: str) -> None:
    size = os.path.getsize(store + ".bin")
    os.truncate(store + ".bin", size - 4)
    with pytest.raises(FormatError, match=f"truncated store file: size expected {size} bytes .* got {size - 4}"):
        Consumer.from_packed(store)
    # with the sidecar "fixed" by hand the format reader still refuses the .bin
    edit_sidecar(store, size_bin=size - 4)
    with pytest.raises(FormatError, match=f"truncated .bin: size expected {size}"):
        open_packed(store)


def test_idx_swapped_with_another_packs(tmp_path: Path, store: str) -> None:
    other = write_corpus(tmp_path / "other", {"x": [10, 20, 30]})
    Consumer(other, n_bytes=2).pack(str(tmp_path / "o"))
    idx_size = os.path.getsize(store + ".idx")
    os.replace(tmp_path / "o.idx", store + ".idx")
    with pytest.raises(FormatError, match=f"size expected {idx_size} bytes .* got {os.path.getsize(store + '.idx')}"):
        open_packed(store)
    edit_sidecar(store, size_idx=os.path.getsize(store + ".idx"))  # sizes agree now; the .bin does not fit
    with pytest.raises(FormatError, match=r"\.bin has trailing bytes: size expected"):
        open_packed(store)


def test_same_size_idx_with_other_lengths(tmp_path: Path, corpus) -> None:
    """An .idx of the same size and document count but other lengths: caught per document."""
    store = str(tmp_path / "s")
    Consumer(corpus, n_bytes=2, metadata=None).pack(store)
    sizes = {c: [os.path.getsize(p) for p in ps] for c, ps in corpus.items()}
    sizes["cat"][1] += 2  # one more token in document 1, one less in document 2: same total
    sizes["cat"][2] -= 2
    shifted = write_corpus(tmp_path / "shifted", sizes)
    Consumer(shifted, n_bytes=2, metadata=None).pack(str(tmp_path / "o"))
    assert os.path.getsize(tmp_path / "o.idx") == os.path.getsize(store + ".idx")
    os.replace(tmp_path / "o.idx", store + ".idx")
    with pytest.raises(FormatError, match=r"document 1 of the store .*cat_001.dat.*: length expected 3 tokens "
                                          r".* got 4 in the store"):
        open_packed(store)


def test_sidecar_wrong_size(store: str) -> None:
    size = os.path.getsize(store + ".bin")
    edit_sidecar(store, size_bin=size + 8)
    with pytest.raises(FormatError, match=f"size expected {size + 8} bytes .* got {size}"):
        open_packed(store)


def test_sidecar_wrong_document_count(store: str) -> None:
    edit_sidecar(store, documents=16)
    with pytest.raises(FormatError, match="document count expected 16 .* got 17"):
        open_packed(store)


def test_sidecar_wrong_fields(store: str) -> None:
    good = Path(store + ".consumer.json").read_text()
    cases = [({"n_bytes": 4}, "'n_bytes': expected one of"), ({"dtype": "uint16"}, "'dtype': expected 'int32'"),
             ({"classes": ["dog", "cat", "eel"]}, "'classes': expected sorted"),
             ({"format_version": 2}, "'format_version': expected 1, got 2"),
             ({"with_header": False}, "'with_header': expected True"),
             ({"tokens": 5}, "token count expected 5"), ({"store": "arrow"}, "'store': expected one of")]
    for change, message in cases:
        edit_sidecar(store, **change)
        with pytest.raises(FormatError, match=message):
            open_packed(store)
        Path(store + ".consumer.json").write_text(good)
    Path(store + ".consumer.json").write_text("{not json")
    with pytest.raises(FormatError, match="unparsable"):
        open_packed(store)


def test_table_edited_document_length(store: str) -> None:
    """A file table whose sizes disagree with the store: FormatError naming the document, expected vs actual."""
    table = store + ".consumer.npz"
    with np.load(table, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["doc_size"][4] += 2  # cat_004: 5 bytes -> 7 bytes, one token more than stored
    os.unlink(table)
    with open(table, "wb") as f:
        np.savez(f, **arrays)
    edit_sidecar(store, size_table=os.path.getsize(table))
    with pytest.raises(FormatError, match=r"document 4 of the store .*cat_004.dat.*: length expected "
                                          r"(\d+) tokens .*got (\d+) in the store"):
        open_packed(store)


def test_table_refuses_pickles(store: str) -> None:
    table = store + ".consumer.npz"
    with np.load(table, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["paths"] = np.array([object()] * 3, dtype=object)
    os.unlink(table)
    with open(table, "wb") as f:
        np.savez(f, **arrays)
    edit_sidecar(store, size_table=os.path.getsize(table))
    with pytest.raises(FormatError, match="file table"):
        open_packed(store)


# ------------------------------------------------------------------------------------------ atomicity

KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    import consumer.packed.write as P
    from consumer import Consumer
    slow_read = P.read_segments
    def read_segments(*args, **kwargs):
        time.sleep(0.15)
        return slow_read(*args, **kwargs)
    P.read_segments = read_segments
    ds = Consumer(sys.argv[1], style="concat", n_bytes=2, seqlen=64, metadata=None)
    ds.pack(sys.argv[2], format=sys.argv[3], chunk_tokens=1)
""")


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
def test_killed_pack_leaves_nothing_that_looks_complete(tmp_path: Path, corpus_dir: str, fmt: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    prefix = str(out / "store")
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, corpus_dir, prefix, fmt],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not [n for n in os.listdir(out) if n.startswith(".store.")]:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the pack never created its temporary files"
            time.sleep(0.01)
        time.sleep(0.3)  # a few chunks into the write
        assert proc.poll() is None, "the pack finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert store_files(prefix) == []
    assert [n for n in os.listdir(out) if n.startswith(".store.")]  # only hidden temporary files
    with pytest.raises(InputError, match="no packed store .* temporary files of an interrupted pack"):
        Consumer.from_packed(prefix)
    # a later pack at the same prefix is not confused by the leftovers
    Consumer(corpus_dir, n_bytes=2, metadata=None).pack(prefix, format=fmt)
    assert len(Consumer.from_packed(prefix).files) == 17


def test_failed_pack_cleans_up_and_keeps_the_old_store(tmp_path: Path) -> None:
    fps = write_corpus(tmp_path / "data", {"a": [10, 20, 30, 40]})
    prefix = str(tmp_path / "s")
    ds = Consumer(fps, n_bytes=1, metadata=None)
    ds.pack(prefix)
    before = {p: Path(p).read_bytes() for p in store_files(prefix)}
    os.truncate(fps["a"][3], 5)  # the file shrank after the build: the reader notices mid-pack
    for fmt in ("megatron", "modalities"):
        with pytest.raises(FileChangedError):
            ds.pack(prefix, format=fmt, chunk_tokens=10)
    assert {p: Path(p).read_bytes() for p in store_files(prefix)} == before
    assert sorted(os.listdir(tmp_path)) == ["data"] + sorted(os.path.basename(p) for p in before)
    assert len(Consumer.from_packed(prefix).files) == 4


@pytest.mark.parametrize("source", ["raw", "packed"])
def test_out_dtype_int32_gives_the_same_values_in_half_the_bytes(tmp_path: Path, source: str) -> None:
    fps = write_corpus(tmp_path / "data", SMALL)
    raw = Consumer(fps, style="concat", seqlen=37, cache_dir=False)
    ds = raw
    if source == "packed":
        raw.pack(str(tmp_path / "s"))
        ds = Consumer.from_packed(str(tmp_path / "s"), style="concat", seqlen=37)
    ids = np.arange(len(ds))
    for query, epoch in ((ALL_COLUMNS, 0), (None, 0), (["input_array", "labels", "attention_mask"], 2)):
        wide = raw.fetch_numpy(ids, query, epoch=epoch)
        narrow = ds.fetch_numpy(ids, query, epoch=epoch, out_dtype=np.int32)
        for k in ("input_array", "labels", "output_tensor", "attention_mask"):
            if k in narrow:
                assert narrow[k].dtype == np.int32 and np.array_equal(narrow[k], wide[k]), k
    tensors = ds.fetch(ids[:4], "mlm", out_dtype=np.int32)
    assert str(tensors["input_array"].dtype) == "torch.int32" and tensors["input_array"].shape == (4, 37)
    with pytest.raises(InputError, match="out_dtype must be numpy.int64 or numpy.int32"):
        ds.fetch_numpy(ids, out_dtype=np.int16)
