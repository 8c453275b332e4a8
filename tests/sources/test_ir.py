import os
from pathlib import Path

import pytest

from consumer import Consumer, InputError
from consumer.sources.corpus import normalise, stat_files


def _forms(corpus):
    f1 = [{p: c} for c, ps in corpus.items() for p in reversed(ps)]
    f2 = {p: c for c, ps in corpus.items() for p in ps}
    f3 = {c: [Path(p) for p in ps] for c, ps in corpus.items()}
    return f1, f2, f3


def test_all_forms_give_the_same_ir(corpus, corpus_dir):
    f1, f2, f3 = _forms(corpus)
    irs = [normalise(x) for x in (f1, f2, f3, corpus_dir, Path(corpus_dir), corpus)]
    assert all(ir.classes == irs[0].classes for ir in irs)
    assert [ir.form for ir in irs] == ["F1", "F2", "F3", "dir", "dir", "F3"]
    assert irs[0].class_names == ["cat", "dog", "eel"]
    for c in irs[0].classes:
        assert list(c.paths) == sorted(c.paths) and all(os.path.isabs(p) for p in c.paths)


def test_f0_is_one_class(corpus):
    paths = [p for ps in corpus.values() for p in ps]
    ir = normalise(list(reversed(paths)))
    assert ir.form == "F0" and ir.class_names == ["null"] and list(ir.classes[0].paths) == sorted(paths)


def test_same_files_same_batches_whatever_the_form(corpus, corpus_dir):
    f1, f2, f3 = _forms(corpus)
    ref = Consumer(corpus_dir, style="concat", seqlen=32)[:]["input_array"]
    for fps in (f1, f2, f3):
        assert (Consumer(fps, style="concat", seqlen=32)[:]["input_array"] == ref).all()


def test_relative_paths(tmp_path, monkeypatch, corpus):
    monkeypatch.chdir(tmp_path)
    rel = {c: [os.path.relpath(p) for p in ps] for c, ps in corpus.items()}
    assert normalise(rel).classes == normalise(corpus).classes


def _fifo(tmp_path):
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return {"x": [str(p)]}


BAD_INPUTS = [
    (lambda t, c: [], "empty list"),
    (lambda t, c: {}, "empty dict"),
    (lambda t, c: 42, "fps must be a list, a dict or a directory"),
    (lambda t, c: [c["cat"][0], 3], "a list must hold only paths"),
    (lambda t, c: [{c["cat"][0]: "a", c["cat"][1]: "b"}], "F1 items must be one"),
    (lambda t, c: {c["cat"][0]: 1}, "a dict must map path -> class name"),
    (lambda t, c: {"cat": c["cat"], "dog": 5}, "a dict must map path -> class name"),
    (lambda t, c: {"cat": [c["cat"][0], c["cat"][0]]}, "given twice"),
    (lambda t, c: {"cat": [c["cat"][0]], "dog": [c["cat"][0]]}, "given twice"),
    (lambda t, c: {"cat": []}, "class 'cat' has no files"),
    (lambda t, c: {"": c["cat"]}, "class names must be non-empty str"),
    (lambda t, c: [{c["cat"][0]: 3}], "class names must be non-empty str"),
    (lambda t, c: {"cat": [str(t / "missing.bin")]}, "file not found"),
    (lambda t, c: {"cat": [str(t)]}, "is a directory"),
    (lambda t, c: _fifo(t), "not a regular file"),
    (lambda t, c: str(t / "nope"), "a single path must be a directory"),
    (lambda t, c: {"cat": [""]}, "empty path"),
    (lambda t, c: {"cat": [None]}, "expected a path"),
]


@pytest.mark.parametrize("make, message", BAD_INPUTS)
def test_bad_inputs_are_refused(tmp_path, corpus, make, message):
    with pytest.raises(InputError, match=message):
        Consumer(make(tmp_path, corpus), metadata=None)


def test_directory_mixing_files_and_classes(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_bytes(b"1")
    (tmp_path / "loose.txt").write_bytes(b"2")
    with pytest.raises(InputError, match="loose.txt"):
        normalise(str(tmp_path))


def test_flat_directory_and_hidden_files(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"1")
    (tmp_path / ".hidden").write_bytes(b"2")
    ir = normalise(tmp_path)
    assert ir.class_names == ["null"] and [os.path.basename(p) for p in ir.classes[0].paths] == ["a.bin"]


def test_nested_class_folders(tmp_path):
    (tmp_path / "a" / "deep").mkdir(parents=True)
    (tmp_path / "a" / "deep" / "x").write_bytes(b"1")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "y").write_bytes(b"2")
    assert normalise(tmp_path).class_names == ["a", "b"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read anything")
def test_unreadable_file(tmp_path):
    p = tmp_path / "secret"
    p.write_bytes(b"x")
    p.chmod(0)
    with pytest.raises(InputError, match="not readable"):
        stat_files([str(p)])


def test_stat_files(corpus):
    paths = corpus["cat"]
    sizes, mtimes = stat_files(paths)
    assert sizes.tolist() == [os.path.getsize(p) for p in paths]
    assert (mtimes > 0).all()


def test_the_first_path_repeating_a_file_is_named_with_the_path_it_repeats(tmp_path):
    """Links found by one vectorised pass name the same pair a scan in order would: the earliest repeat."""
    from consumer.sources.corpus import stat_files

    for name in "acx":
        (tmp_path / name).write_bytes(name.encode())
    os.link(tmp_path / "c", tmp_path / "d")
    os.link(tmp_path / "a", tmp_path / "e")
    paths = [str(tmp_path / n) for n in "xcadeb"[:5]]  # x, c, a, d (= c), e (= a)
    with pytest.raises(InputError, match=r"/c' and '.*/d' are the same file"):
        stat_files(paths)
    sizes, stamps = stat_files([str(tmp_path / n) for n in "xca"])
    assert sizes.tolist() == [1, 1, 1] and (stamps > 0).all()
