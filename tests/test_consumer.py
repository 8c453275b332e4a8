"""Construction arguments, headers, export, file changes and the command line."""

import json
import os

import pytest

from consumer import Consumer, FileChangedError, InputError
from consumer.catalog.headers import MAX_HEADER_BYTES, normalise_description
from consumer.cli.main import main, stdlib_corpus
from consumer.sources.magic import describe_files


@pytest.mark.parametrize("kwargs, message", [
    ({"style": "stack"}, "style must be one of"),
    ({"n_bytes": 4}, "n_bytes must be one of"),
    ({"seqlen": 0}, r"seqlen must be a positive int.* 'auto'.*, got 0"),
    ({"seqlen": "max"}, r"seqlen must be a positive int.* 'auto'.*, got 'max'"),
    ({"metadata": "magic"}, "metadata must be one of"),
    ({"seed": -3}, "seed must be an int >= 0, got -3"),
    ({"long_files": "slide"}, "long_files must be one of"),
    ({"verbose": "yes"}, "verbose must be a bool"),
    ({"cache_dir": 123}, "cache_dir must be a directory path, None"),
    ({"class_to_id": {"cat": 0}}, r"class_to_id misses class\(es\) \['dog', 'eel'\]"),
    ({"class_to_id": {"cat": 0, "dog": 0, "eel": 1}}, r"duplicate ids \[0\]"),
    ({"class_to_id": {"cat": 0, "dog": -1, "eel": 1}}, r"class_to_id\['dog'\] must be an int >= 0"),
    ({"class_to_id": ["cat"]}, "class_to_id must be a dict"),
])
def test_bad_arguments(corpus_dir, kwargs, message):
    with pytest.raises(InputError, match=message):
        Consumer(corpus_dir, **kwargs)


def test_class_to_id_may_hold_extra_classes(corpus_dir):
    ds = Consumer(corpus_dir, class_to_id={"cat": 2, "dog": 1, "eel": 0, "fox": 9}, metadata=None)
    assert ds.id_to_class == {2: "cat", 1: "dog", 0: "eel"}


def test_headers_describe_type_not_file(tmp_path):
    cls = tmp_path / "secret_label"
    cls.mkdir()
    (cls / "secret_label_1.py").write_text("#!/usr/bin/env python3\nprint('hi')\n")
    (cls / "secret_label_2.txt").write_text("hello world\n" * 20)
    ds = Consumer(str(tmp_path), n_bytes=1)
    for fid in range(len(ds.files)):
        header = ds.documents.header_text(fid)
        assert header and "secret_label" not in header and len(header.encode()) <= MAX_HEADER_BYTES
        toks = ds.document_tokens(fid)
        assert b"secret_label" not in ds.decode(toks)
    assert "text" in ds.documents.header_text(1).lower()


def test_metadata_modes(corpus_dir):
    none = Consumer(corpus_dir, metadata=None)
    assert ds_has_no_sep(none)
    mime = Consumer(corpus_dir, metadata="mime")
    assert all("/" in h for h in mime.documents.headers)
    calls = []
    custom = Consumer(corpus_dir, metadata=lambda p: calls.append(p) or f"kind {os.path.basename(p)[:3]}")
    assert len(calls) == len(custom.files) and set(custom.documents.headers) == {"kind cat", "kind dog", "kind eel"}


def ds_has_no_sep(ds):
    return all(ds.vocab.sep not in ds.document_tokens(i) for i in range(len(ds.files)))


def test_normalise_description():
    raw = ("ELF 64-bit LSB pie executable, x86-64, BuildID[sha1]=0123456789abcdef0123456789abcdef01234567, "
           "for GNU/Linux 3.2.0, stripped")
    assert normalise_description(raw) == "ELF 64-bit LSB pie executable, x86-64, for GNU/Linux 3.2.0, stripped"
    gz = 'gzip compressed data, was "cat_photo.txt", last modified: Sun Nov 22 05:00:00 2026, from Unix'
    assert normalise_description(gz) == "gzip compressed data, from Unix"
    assert normalise_description("/data/cat/x.bin: data", "/data/cat/x.bin") == "data"
    assert len(normalise_description("x" * 500).encode()) == MAX_HEADER_BYTES


def test_libmagic_runs_in_parallel_and_quietly(corpus, capsys):
    paths = [p for ps in corpus.values() for p in ps] * 10  # above the parallel threshold
    serial = list(describe_files(paths, workers=1))
    assert list(describe_files(paths, workers=2, chunk=7)) == serial
    assert len(serial) == len(paths) and all(isinstance(d, str) and "/" in m for d, m in serial)
    assert capsys.readouterr() == ("", "")


def test_verbose_false_prints_nothing(corpus_dir, capsys):
    ds = Consumer(corpus_dir)
    ds.create_batches(2)
    ds.get_next_batch()
    assert capsys.readouterr() == ("", "")


def test_verbose_shows_progress(corpus_dir, capsys):
    Consumer(corpus_dir, verbose=True)
    assert "libmagic" in capsys.readouterr().err


def test_get_dict_and_to_json(corpus_dir, tmp_path):
    ds = Consumer(corpus_dir, style="concat", seqlen=64, n_bytes=2)
    d = ds.get_dict()
    for key in ("style", "n_bytes", "seqlen", "classes", "class_to_id", "per_class", "vocab", "libmagic_version",
                "data_mode", "total_samples", "files_sha256", "metadata", "seed"):
        assert key in d
    assert d["data_mode"] == "dir" and d["vocab"]["specials"]["EOF"] == 65536
    assert sum(c["samples"] for c in d["per_class"].values()) == len(ds)
    assert d["per_class"]["cat"]["bytes"] == sum(os.path.getsize(p) for p in ds.files if "/cat/" in p)
    assert json.loads(ds.to_json()) == d
    out = tmp_path / "meta.json"
    assert ds.to_json(out) is None and json.loads(out.read_text()) == d
    full = ds.get_dict(include_files=True)
    assert len(full["files"]) == len(ds.files)
    ds.create_batches(4)
    assert ds.get_dict()["batches"]["settings"]["batch_size"] == 4
    assert "samples=" in repr(ds)


def test_file_truncated_after_build_is_detected(corpus_dir):
    ds = Consumer(corpus_dir, metadata=None)
    victim = max(range(len(ds.files)), key=lambda i: os.path.getsize(ds.files[i]))
    with open(ds.files[victim], "r+b") as f:
        f.truncate(5)
    with pytest.raises(FileChangedError, match="shorter than at build time"):
        ds[victim]
    os.remove(ds.files[victim])
    with pytest.raises(FileChangedError, match="cannot open"):
        ds[victim]


def test_source_files_are_never_modified(corpus_dir):
    before = {p: (os.stat(p).st_mtime_ns, open(p, "rb").read()) for p in Consumer(corpus_dir).files}
    ds = Consumer(corpus_dir, style="concat", seqlen=8)
    ds.set_unsupervised_mode()
    ds[:]
    assert {p: (os.stat(p).st_mtime_ns, open(p, "rb").read()) for p in ds.files} == before


def test_cli_demo_on_a_directory(corpus_dir, capsys):
    assert main(["demo", "--dir", corpus_dir, "--seqlen", "64", "--show", "2"]) == 0
    out = capsys.readouterr().out
    assert "Consumer(style='diff'" in out and "next batch in" in out and "<SEP>" in out


def test_cli_bad_input_exit_code(tmp_path, capsys):
    assert main(["demo", "--dir", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("consumer: error:") and err.count("\n") == 1


def test_stdlib_corpus_is_grouped_by_type():
    corpus = stdlib_corpus(max_per_class=5)
    assert "python" in corpus and all(1 <= len(v) <= 5 for v in corpus.values())
    assert all(p.endswith(".py") for p in corpus["python"])


def test_examples_run():
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    trainers = {"train_classifier.py", "pretrain_mlm.py", "train_causal_bytes.py",
                "train_mixture.py"}  # minutes: run small elsewhere
    for name in sorted(os.listdir(os.path.join(root, "examples"))):
        if name.endswith(".py") and name not in trainers:
            res = subprocess.run([sys.executable, os.path.join(root, "examples", name)], env=env,
                                 capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, res.stderr
