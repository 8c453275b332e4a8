"""The table of bad inputs (issue 9, groups 4-8 of this branch): each row is one input, the documented
error class it must raise and a fragment of the message naming the value. ``docs/reliability.md`` lists
the same rows with their outcome."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import Consumer, Vocab, decode_ids
from consumer.catalog.catalog import Catalog
from consumer.errors import FormatError, InputError, QueryError, SampleIndexError
from consumer.fetch.select import as_sample_ids, resolve
from consumer.formats.megatron_sampling import build_document_index, build_gpt_indices
from consumer.formats.mmidx import IndexedReader, IndexedWriter, read_index
from consumer.formats.pbin import load_index_pickle, read_pbin, write_pbin
from consumer.query.rows import check_timeout
from consumer.query.sqlite import DatasetSQL
from consumer.sources.corpus import normalise, stat_files
from consumer.tokens.index import AUTO_SEQLEN_CAP, MAX_SEQLEN, build_index, resolve_seqlen
from consumer.util.fileio import ensure_directory, load_json_bounded, stat_regular
from consumer.util.validate import check_bool, check_class_to_id, check_int, int_vector

U64_MAX = 2**64 - 1


@pytest.fixture
def ds(tmp_path: Path) -> Consumer:
    for c, n in (("cat", 3), ("dog", 2)):
        (tmp_path / "data" / c).mkdir(parents=True)
        for i in range(n):
            (tmp_path / "data" / c / f"{i}.txt").write_bytes(bytes(range(i + 5)))
    return Consumer(str(tmp_path / "data"), cache_dir=False, metadata=None, seqlen=16)


def _loop_inside_class(tmp: Path) -> object:
    (tmp / "d" / "cat").mkdir(parents=True)
    (tmp / "d" / "cat" / "ok.txt").write_bytes(b"x")
    os.symlink("b", tmp / "d" / "cat" / "a")
    os.symlink("a", tmp / "d" / "cat" / "b")
    paths, _ = normalise(str(tmp / "d")).flat()
    return stat_files(paths)


def _loop_as_class(tmp: Path) -> object:
    (tmp / "d").mkdir()
    os.symlink(tmp / "d" / "cls", tmp / "d" / "cls")
    return normalise(str(tmp / "d"))


def _one_file_three_labels(tmp: Path) -> object:
    for c in ("cat", "dog", "eel"):
        (tmp / "d" / c).mkdir(parents=True)
    (tmp / "d" / "cat" / "x.bin").write_bytes(b"same bytes")
    os.symlink(tmp / "d" / "cat" / "x.bin", tmp / "d" / "dog" / "link.bin")
    os.link(tmp / "d" / "cat" / "x.bin", tmp / "d" / "eel" / "hard.bin")
    corpus = normalise(str(tmp / "d"))
    paths, cls = corpus.flat()
    return stat_files(paths, [corpus.class_names[c] for c in cls])


def _hard_link_same_class(tmp: Path) -> object:
    (tmp / "a.bin").write_bytes(b"1")
    os.link(tmp / "a.bin", tmp / "b.bin")
    return stat_files([str(tmp / "a.bin"), str(tmp / "b.bin")])


def _sql(tmp: Path) -> DatasetSQL:
    return DatasetSQL(None, Catalog(None).connection, lambda: iter(()))


def _file_then_dir(tmp: Path) -> object:
    (tmp / "f").write_bytes(b"")
    return ensure_directory(tmp / "f" / "cache", "cache_dir")


def _write_ragged_idx(tmp: Path) -> object:
    with IndexedWriter(tmp / "ragged", np.uint16) as writer:
        writer.add_document([[1], [2, 3]])


RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
DEEP_PICKLE = b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b"."

# (id, call(tmp_path, ds), error class, fragment of the message)
ROWS: list[tuple[str, Callable, type[Exception], str]] = [
    # group 4: bounded memory
    ("pbin memo key 2**31-1", lambda t, d: load_index_pickle(b"\x80\x04K\x01r\xff\xff\xff\x7f."), FormatError,
     "expected a list of (offset, length) tuples, got int"),
    ("pbin BINBYTES8 8 GiB", lambda t, d: load_index_pickle(b"\x80\x04\x8e" + (2**33).to_bytes(8, "little") + b"."),
     FormatError, "expected 8589934592 more byte(s)"),
    ("seqlen 2**31", lambda t, d: resolve_seqlen(2**31, None), InputError,
     "at most 2147483647 tokens (2**31 - 1), got 2147483648"),
    ("seqlen 10**12", lambda t, d: resolve_seqlen(10**12, None), InputError, "got 1000000000000"),
    ("seqlen 10**12 (Consumer)", lambda t, d: Consumer([__file__], seqlen=10**12, cache_dir=False), InputError,
     "seqlen must be at most"),
    # group 5: nothing hangs, only allowed functions
    ("sql runaway CTE, timeout 0.2", lambda t, d: _sql(t).query(RUNAWAY, timeout=0.2), QueryError,
     "stopped after the timeout of 0.2 s: 'WITH RECURSIVE"),
    ("sql fts3_tokenizer", lambda t, d: _sql(t).query("SELECT fts3_tokenizer('simple')"), QueryError,
     "function fts3_tokenizer() is not in the allowed list"),
    ("sql load_extension", lambda t, d: _sql(t).query("SELECT load_extension('x.so')"), QueryError,
     "function load_extension() is not in the allowed list"),
    ("sql timeout=-1", lambda t, d: check_timeout(-1), QueryError,
     "timeout must be a number of seconds > 0 or None, got -1"),
    ("sql timeout='5'", lambda t, d: _sql(t).query("SELECT 1", timeout="5"), QueryError, "got '5'"),
    # group 6: only documented errors, naming the value
    ("symlink loop inside a class folder", lambda t, d: _loop_inside_class(t), InputError,
     "Too many levels of symbolic links"),
    ("symlink loop as a class folder", lambda t, d: _loop_as_class(t), InputError, "/d/cls' in the directory"),
    ("NUL byte in a path (F0)", lambda t, d: normalise(["/tmp/a\x00b"]), InputError, "NUL byte, got '/tmp/a\\x00b'"),
    ("NUL byte in a directory path", lambda t, d: normalise("/tmp/x\x00"), InputError, "NUL byte"),
    ("NUL byte in a path (Consumer)", lambda t, d: Consumer({"cat": ["/tmp/\x00"]}, cache_dir=False), InputError,
     "NUL byte"),
    ("NUL byte to stat_regular", lambda t, d: stat_regular("a\x00", "idx_path"), InputError, "idx_path: a path"),
    ("seqlen 2**63 (Consumer)", lambda t, d: Consumer([__file__], seqlen=2**63, cache_dir=False), InputError,
     "got 9223372036854775808"),
    ("class_to_id cat 2**70", lambda t, d: check_class_to_id({"cat": 2**70}, ["cat"]), InputError,
     "class_to_id['cat'] must be an int in [0, 9223372036854775807], got 1180591620717411303424"),
    ("class_to_id from a sidecar",
     lambda t, d: check_class_to_id({"cat": -1}, ["cat"], "class_to_id in p.consumer.json"),
     InputError, "class_to_id in p.consumer.json['cat']"),
    ("class_to_id bool id", lambda t, d: check_class_to_id({"cat": True}, ["cat"]), InputError, "got True"),
    ("ds[10**20]", lambda t, d: d[10**20], SampleIndexError, "index 100000000000000000000 out of range"),
    ("ds[-10**20]", lambda t, d: d[-(10**20)], SampleIndexError, "index -100000000000000000000"),
    ("ds[[uint64 2**64-1]]", lambda t, d: d[[np.uint64(U64_MAX)]], SampleIndexError, "index 18446744073709551615"),
    ("ds[uint64 array]", lambda t, d: d[np.array([U64_MAX], dtype=np.uint64)], SampleIndexError,
     "18446744073709551615"),
    ("ds[{cat: [uint64 2**64-1]}]", lambda t, d: d[{"cat": [np.uint64(U64_MAX)]}], SampleIndexError,
     "class 'cat': index 18446744073709551615"),
    ("resolve [10**20]", lambda t, d: resolve([10**20], 5, np.array([0, 5]), ["a"], np.random.default_rng(0)),
     SampleIndexError, "index 100000000000000000000"),
    ("fetch ids [0.5]", lambda t, d: as_sample_ids([0.5], 5), InputError,
     "sample_ids must be a 1-D integer array, got dtype float64 (e.g. 0.5)"),
    ("fetch ids 0.5", lambda t, d: as_sample_ids(0.5, 5), InputError, "got 0.5"),
    ("fetch ids [True]", lambda t, d: as_sample_ids([True], 5), InputError, "dtype bool"),
    ("fetch ids [2**64-1]", lambda t, d: as_sample_ids([np.uint64(U64_MAX)], 5), InputError,
     "expected integers in [0, 4], got 18446744073709551615"),
    ("fetch ids [5] of 5", lambda t, d: as_sample_ids([5], 5), InputError, "got 5"),
    ("ds.decode([1.7])", lambda t, d: d.decode([1.7]), InputError, "got 1.7 (dtype float64)"),
    ("encode_bytes(10**10)", lambda t, d: Vocab(1).encode(10**10), InputError,
     "data must be bytes, bytearray or memoryview, got int: 10000000000"),
    ("Vocab.tail('a')", lambda t, d: Vocab(2).tail("a"), InputError, "tail length k must be in 1..1, got 'a'"),
    ("decode [True]", lambda t, d: decode_ids([True], Vocab(2)), InputError, "got True"),
    ("decode [uint64 2**64-1]", lambda t, d: decode_ids(np.array([U64_MAX], dtype=np.uint64), Vocab(1)), InputError,
     "[18446744073709551615]"),
    ("cache_dir under a file", lambda t, d: _file_then_dir(t), InputError, "/f' is a file, not a directory"),
    ("sidecar JSON nested 100 deep", lambda t, d: load_json_bounded("[" * 100 + "]" * 100, "x.consumer.json"),
     FormatError, "x.consumer.json: JSON nested 100 levels deep, more than the cap of 64"),
    ("sidecar JSON 10**6 deep", lambda t, d: load_json_bounded("[" * 10**6, "x.json"), FormatError,
     "nested 1000000 levels"),
    ("sidecar JSON 5000-digit int", lambda t, d: load_json_bounded("1" * 5000, "x.json"), FormatError,
     "x.json: invalid JSON"),
    ("sidecar JSON not UTF-8", lambda t, d: load_json_bounded(b"\xff{}", "x.json"), FormatError, "not UTF-8"),
    ("sidecar JSON too big", lambda t, d: load_json_bounded("[]" * 100, "x.json", max_bytes=10), FormatError,
     "JSON of 200 bytes, more than the cap of 10 bytes"),
    ("pickle nested 5000 deep", lambda t, d: load_index_pickle(DEEP_PICKLE), FormatError,
     "nested 65 deep, more than the cap of 64"),
    ("check_int bool", lambda t, d: check_int("n_classes", True, 0), InputError,
     "n_classes must be an int >= 0, got True"),
    ("check_int float", lambda t, d: check_int("seed", 1.0), InputError, "seed must be an int, got 1.0"),
    ("check_int range", lambda t, d: check_int("k", 9, 0, 5), InputError, "k must be an int in [0, 5], got 9"),
    ("check_bool 1", lambda t, d: check_bool("verbose", 1), InputError,
     "verbose must be a bool (True or False), got 1"),
    ("int_vector ragged", lambda t, d: int_vector("ids", [[1], [2, 3]]), InputError, "ids must be a 1-D integer array"),
    ("int_vector 2-D", lambda t, d: int_vector("ids", [[1, 2]]), InputError, "got shape (1, 2)"),
    ("build_index doc_class out of range", lambda t, d: build_index("diff", [3, 4], [0, 2], 2, 8), InputError,
     "doc_class: expected integers in [0, 1], got 2"),
    ("build_index seqlen 2**40", lambda t, d: build_index("diff", [3], [0], 1, 2**40), InputError,
     "got 1099511627776"),
    ("build_index style list", lambda t, d: build_index(["diff"], [3], [0], 1, 8), InputError,
     "style must be one of ['concat', 'diff', 'packed'], got ['diff']"),
    # group 7: one file, one label
    ("one file under three classes", lambda t, d: _one_file_three_labels(t), InputError,
     "are the same file (same device and inode: a symlink or a hard link) (classes 'cat' and 'dog')"),
    ("hard link twice", lambda t, d: _hard_link_same_class(t), InputError, "b.bin' are the same file"),
    ("/proc/self/status", lambda t, d: stat_files(["/proc/self/status"]), InputError,
     "'/proc/self/status' reports size 0 but has content"),
    ("/proc/self/status (Consumer)", lambda t, d: Consumer(["/proc/self/status"], cache_dir=False), InputError,
     "reports size 0 but has content"),
    # readers and writers of this branch: paths and token arrays
    ("IndexedReader(5)", lambda t, d: IndexedReader(5), InputError, "prefix must be a non-empty path, got 5"),
    ("read_index NUL", lambda t, d: read_index("x\x00.idx"), InputError, "idx_path: a path cannot contain a NUL"),
    ("IndexedWriter NUL", lambda t, d: IndexedWriter(str(t / "a\x00b"), np.uint16), InputError, "prefix: a path"),
    ("read_pbin(5)", lambda t, d: read_pbin(5), InputError, "path must be a path (str or os.PathLike), got 5"),
    ("write_pbin NUL", lambda t, d: write_pbin(str(t / "a\x00.pbin"), [[1]], 2), InputError, "NUL byte"),
    ("write_pbin ragged document", lambda t, d: write_pbin(t / "r.pbin", [[[1], [2, 3]]], 2), InputError,
     "documents[0] must be a 1-D array of integer token ids, got [[1], [2, 3]]"),
    ("IndexedWriter ragged document", lambda t, d: _write_ragged_idx(t), InputError,
     "tokens must be a 1-D array of integer token ids"),
    # group 8: Megatron edge
    ("build_gpt_indices seq_length 2**70", lambda t, d: build_gpt_indices([5, 5], 2**70, 1), InputError,
     "seq_length must be an int in"),
    ("build_gpt_indices num_samples 10**12", lambda t, d: build_gpt_indices([5, 5], 4, 1, num_samples=10**12),
     InputError, "needs 400000000001 epochs of 10 tokens"),
    ("build_gpt_indices drop_last='no'", lambda t, d: build_gpt_indices([5, 5], 4, 1, drop_last="no"), InputError,
     "drop_last must be a bool (or 0/1), got 'no'"),
    ("build_gpt_indices 2**40-token document", lambda t, d: build_gpt_indices([2**40, 5], 4, 1), InputError,
     "sample_index: 274877906946 entries need about"),
    ("build_document_index 2**40 epochs", lambda t, d: build_document_index([1, 2], 2**40, 1, False), InputError,
     "document_index: 2199023255552 entries need about"),
    ("build_gpt_indices uint64 sizes", lambda t, d: build_gpt_indices(np.array([U64_MAX, 3], np.uint64), 4, 1),
     InputError, "sizes: expected values <= 9223372036854775807, got 18446744073709551615"),
    ("build_gpt_indices drop_last=False, empty last doc",
     lambda t, d: build_gpt_indices(np.array([4, 3, 0], np.int32), 4, 3, drop_last=False), InputError,
     "the last document of the shuffled document index (document 2) is empty"),
]


@pytest.mark.parametrize(("call", "error", "fragment"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_input(tmp_path: Path, ds: Consumer, call: Callable, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error) as info:
        call(tmp_path, ds)
    assert fragment in str(info.value), str(info.value)
    assert type(info.value).__module__ == "consumer.errors"


def test_valid_neighbours_still_work(tmp_path: Path, ds: Consumer) -> None:
    """The rows' valid neighbours: the checks above refuse only what they should."""
    assert resolve_seqlen(MAX_SEQLEN, None) == MAX_SEQLEN
    assert resolve_seqlen("auto", np.array([3, 5 * 10**9])) == AUTO_SEQLEN_CAP
    assert resolve_seqlen("auto", np.array([3, 9])) == 9
    assert ds[len(ds) - 1]["input_array"].shape[0] == 1
    assert ds[[np.uint64(0), 1]]["input_array"].shape[0] == 2
    assert as_sample_ids([0, np.uint64(4)], 5).tolist() == [0, 4]
    assert as_sample_ids(np.int32(3), 5).tolist() == [3]
    assert ds.decode([65, np.uint64(66)]) == b"\x00A\x00B"
    assert check_class_to_id({"cat": 2**63 - 1, "dog": 0}, ["cat", "dog"]) == {"cat": 2**63 - 1, "dog": 0}
    assert load_json_bounded("[" * 64 + "]" * 64, "x") is not None
    (tmp_path / "a.bin").write_bytes(b"1")
    (tmp_path / "empty.bin").write_bytes(b"")
    os.symlink(tmp_path / "a.bin", tmp_path / "link.bin")
    sizes, _ = stat_files([str(tmp_path / "link.bin"), str(tmp_path / "empty.bin")])
    assert sizes.tolist() == [1, 0]
    indices = build_gpt_indices(np.array([4, 3, 0], np.int32), 4, 3, drop_last=True)
    assert (indices[1] >= 0).all()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to drop CAP_DAC_OVERRIDE")
def test_readability_is_checked_by_opening_even_for_root(tmp_path: Path) -> None:
    """Root without CAP_DAC_OVERRIDE (a container, a root-squashed mount) cannot read a mode-000 file:
    the old mode-bit shortcut said "root reads anything"; opening says otherwise, naming the file."""
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"x")
    secret.chmod(0)
    code = ("import sys; from consumer.sources.corpus import stat_files; from consumer.errors import InputError\n"
            "try:\n    stat_files([sys.argv[1]])\nexcept InputError as e:\n    print(e)\n")
    proc = subprocess.run(["setpriv", "--bounding-set", "-dac_override,-dac_read_search", sys.executable, "-c",
                           code, str(secret)], capture_output=True, text=True, timeout=60, check=False,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"fps: {str(secret)!r} is not readable (permission denied)"


int_like = st.one_of(st.integers(-(2**70), 2**70), st.integers(0, 2**64 - 1).map(np.uint64),
                     st.integers(-(2**63), 2**63 - 1).map(np.int64), st.integers(-128, 127).map(np.int8))


@settings(max_examples=300, deadline=None)
@given(values=st.lists(int_like, max_size=8))
def test_int_vector_is_exact_or_refuses(values: list) -> None:
    """Whatever mix of Python and numpy integers: the exact values, or an InputError; never a wrapped value."""
    exact = [int(v) for v in values]
    if all(-(2**63) <= v < 2**63 for v in exact):
        assert int_vector("ids", values).tolist() == exact
    else:
        with pytest.raises(InputError, match="ids: expected integers in"):
            int_vector("ids", values)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(int_like, min_size=1, max_size=8), n=st.integers(1, 50))
def test_selection_ids_are_exact_or_out_of_range(values: list, n: int) -> None:
    exact = [int(v) for v in values]
    rng = np.random.default_rng(0)
    if all(-n <= v < n for v in exact):
        assert resolve(values, n, np.array([0, n]), ["a"], rng).tolist() == [v % n for v in exact]
    else:
        with pytest.raises(SampleIndexError, match="out of range"):
            resolve(values, n, np.array([0, n]), ["a"], rng)
