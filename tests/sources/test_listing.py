"""A directory scan on real trees: bad files (raise or skip), aliases, path order, one libmagic call per file,
and ``cache_dir=False`` writing nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from consumer import Consumer
from consumer.cli.main import main
from consumer.errors import ConsumerWarning, InputError
from consumer.sources.corpus import _scan_directory, corpus_of_walk
from consumer.sources.listing import scan_directory

REPO = Path(__file__).resolve().parents[2]


def _tree(root: Path) -> Path:
    """Two classes with three plain files each."""
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            (root / cls / f"{cls}{i}.txt").write_bytes(f"{cls} file {i}\n".encode())
    return root


def _build(root: Path, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = Consumer(str(root), metadata=None, cache_dir=False, seqlen=16, **kw)
    return ds, [w for w in caught if issubclass(w.category, ConsumerWarning) and "bad file" in str(w.message)]


BAD = {
    "broken symlink": lambda d: os.symlink(d / "missing", d / "zz_broken"),
    "symlink loop": lambda d: (os.symlink(d / "loop2", d / "loop1"), os.symlink(d / "loop1", d / "loop2")),
    "special file": lambda d: os.mkfifo(d / "fifo"),
}


@pytest.mark.parametrize("reason", sorted(BAD))
def test_a_bad_file_stops_the_strict_scan_naming_the_option_and_is_skipped_on_request(tmp_path, reason):
    root = _tree(tmp_path / "data")
    BAD[reason](root / "b")
    with pytest.raises(InputError, match=rf"\({reason}\); pass on_bad_file='skip' \(--skip-bad-files\)"):
        Consumer(str(root), metadata=None, cache_dir=False)
    ds, warned = _build(root, on_bad_file="skip")
    n = 2 if reason == "symlink loop" else 1
    assert ds.build_info["skipped"] == {reason: n}
    assert all(r == reason and p.startswith(str(root / "b")) for p, r in ds.build_info["skipped_examples"])
    assert len(ds.files) == 6 and all(p.endswith(".txt") for p in ds.files)
    assert len(warned) == 1 and f"{n} bad file(s) skipped ({reason}: {n})" in str(warned[0].message)


def test_an_empty_file_set_and_bad_setting_are_refused(tmp_path):
    root = _tree(tmp_path / "data")
    with pytest.raises(InputError, match=r"on_bad_file must be one of \['raise', 'skip'\], got 'ignore'"):
        Consumer(str(root), metadata=None, cache_dir=False, on_bad_file="ignore")
    only = tmp_path / "only"
    (only / "c").mkdir(parents=True)
    os.symlink(only / "nothing", only / "c" / "x")
    with pytest.raises(InputError, match=r"class 'c' has no files \(1 bad file\(s\) skipped \(broken symlink: 1\)\)"):
        Consumer(str(only), metadata=None, cache_dir=False, on_bad_file="skip")


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv to drop CAP_DAC_OVERRIDE")
def test_an_unreadable_file_is_skipped_when_asked(tmp_path):
    """A mode-000 file, unreadable to a process without CAP_DAC_OVERRIDE (root drops it with setpriv; as any
    other user the mode alone denies): refused by the strict scan only at its first read, skipped by the
    skipping scan, which opens every file once."""
    root = _tree(tmp_path / "data")
    secret = root / "a" / "secret.txt"
    secret.write_bytes(b"x")
    secret.chmod(0)
    code = ("import json, sys; from consumer.sources.listing import scan_directory\n"
            "got = scan_directory(sys.argv[1], 'skip')\n"
            "print(json.dumps([got.bad.counts, got.bad.examples, len(got.corpus.flat()[0])]))\n")
    drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    proc = subprocess.run([*drop, sys.executable, "-c", code, str(root)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    counts, examples, n = json.loads(proc.stdout)
    assert counts == {"unreadable": 1} and examples == [[str(secret), "unreadable"]] and n == 6


def test_aliases_in_one_class_keep_the_first_name_and_count_the_rest(tmp_path):
    root = _tree(tmp_path / "data")
    os.link(root / "a" / "a1.txt", root / "a" / "z_hard.txt")
    os.symlink(root / "a" / "a2.txt", root / "a" / "0_soft.txt")  # sorts first: the first name by path is kept
    ds, warned = _build(root)
    assert ds.build_info["aliases"] == 2 and ds.build_info["skipped"] == {} and not warned
    assert [os.path.basename(p) for p in ds.files] == ["0_soft.txt", "a0.txt", "a1.txt", "b0.txt", "b1.txt",
                                                      "b2.txt"]
    # explicitly listed names of one file stay strict
    with pytest.raises(InputError, match="are the same file"):
        Consumer([str(root / "a" / "a1.txt"), str(root / "a" / "z_hard.txt")], metadata=None, cache_dir=False)


def test_one_file_in_two_classes_stays_refused_and_is_left_out_when_skipping(tmp_path):
    root = _tree(tmp_path / "data")
    os.link(root / "a" / "a0.txt", root / "b" / "hard.txt")
    with pytest.raises(InputError, match=r"are the same file .*\(classes 'a' and 'b'\).*on_bad_file='skip'"):
        Consumer(str(root), metadata=None, cache_dir=False)
    ds, _ = _build(root, on_bad_file="skip")  # two real names: the label is ambiguous, both go
    assert ds.build_info["skipped"] == {"same file in two classes": 2} and len(ds.files) == 5
    os.unlink(root / "b" / "hard.txt")
    os.symlink(root / "a" / "a0.txt", root / "b" / "soft.txt")  # a link into class a: a's name stays
    ds, _ = _build(root, on_bad_file="skip")
    assert ds.build_info["skipped"] == {"link into another class": 1}
    assert str(root / "a" / "a0.txt") in list(ds.files) and len(ds.files) == 6


def test_the_scan_lists_what_the_walk_listed_in_the_same_order(tmp_path):
    """Names that sort differently as folders and as paths (``b`` vs ``b-c``, ``b.x``), nested folders, hidden
    entries, a link to a folder inside a class (not followed)."""
    root = tmp_path / "data"
    for rel in ("k/b/x", "k/b-c", "k/b.x", "k/b/y/z", "k/a", "k/.hidden", "k/B", "k/é", "m/b0/q", "m/b/q"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(rel.encode())
    os.symlink(root / "k" / "b", root / "m" / "linked_dir")
    old = corpus_of_walk(_scan_directory(str(root)))
    new = scan_directory(str(root)).corpus
    assert new.class_names == old.class_names
    assert [list(c.paths) for c in new.classes] == [list(c.paths) for c in old.classes]


@pytest.mark.parametrize("flat", [False, True])
def test_listing_through_descriptors_equals_listing_by_paths(tmp_path, monkeypatch, flat):
    """The walk lists each folder through an open descriptor where the platform allows it (each stat an
    ``fstatat`` of one name) and by its path elsewhere: both give the same files, sizes, stamps and identities, the
    same skipped entries, links to files followed and links to folders not."""
    from consumer.sources import walk

    root = tmp_path / "data"
    base = root if flat else root / "k"
    for rel in ("b/x", "b-c", "b.x", "b/y/z", "a", ".hidden", "é"):
        if flat and "/" in rel:
            continue
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(rel.encode() * 3)
    (tmp_path / "outside.txt").write_bytes(b"outside")
    os.symlink(tmp_path / "outside.txt", base / "link_out")  # to a file: followed (to "a" it would be an alias)
    os.symlink(base / "missing", base / "broken")
    if not flat:
        os.symlink(base / "b", base / "linked_dir")
        (root / "m").mkdir()
        (root / "m" / "q").write_bytes(b"q")

    def scan():
        got = scan_directory(str(root), "skip")
        return (list(got.paths), got.sizes.tolist(), got.stamps.tolist(), got.ident.tolist(), got.bad.counts,
                got.corpus.class_names)

    assert walk._BY_DESCRIPTOR  # Linux: folders are listed through descriptors
    through_fd = scan()
    monkeypatch.setattr(walk, "_BY_DESCRIPTOR", False)
    assert scan() == through_fd
    paths = through_fd[0]
    assert any(p.endswith("link_out") for p in paths) and not any("linked_dir" in p for p in paths)
    assert through_fd[4] == {"broken symlink": 1}
    assert paths == sorted(paths)  # in path order as strings (a folder b sorts as "b/")


def test_info_runs_libmagic_once_per_file(tmp_path, magic_calls, capsys):
    root = _tree(tmp_path / "data")
    for metadata in ("file", "mime", "none"):
        magic_calls.clear()
        assert main(["info", str(root), "--cache-dir", str(tmp_path / f"cache-{metadata}"), "--metadata", metadata,
                     "--no-content", "--quiet"]) == 0
        out = capsys.readouterr().out
        assert sorted(magic_calls) == sorted(str(p) for p in root.rglob("*.txt")), metadata
        assert ("top file types" if metadata == "file" else "top MIME types") in out


def test_info_reports_the_skipped_files_and_aliases(tmp_path, capsys):
    root = _tree(tmp_path / "data")
    os.symlink(root / "missing", root / "a" / "broken")
    os.link(root / "b" / "b0.txt", root / "b" / "b9.txt")
    assert main(["info", str(root), "--cache-dir", "off", "--metadata", "none", "--no-content",
                 "--skip-bad-files"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "warning: fps: 1 bad file(s) skipped (broken symlink: 1)" in captured.err
    assert "skipped 1 bad file(s) (broken symlink: 1)" in out and f"{root / 'a' / 'broken'} (broken symlink)" in out
    assert "aliases: 1 second name(s)" in out


def test_cache_dir_false_writes_nothing_to_disk(tmp_path):
    """A fresh process with its home, temporary and cache folders pointed at empty folders builds, answers a
    GROUP BY and reads a row: afterwards those folders are still empty and the corpus is unchanged."""
    root = _tree(tmp_path / "data")
    before = sorted((str(p), p.stat().st_mtime_ns) for p in root.rglob("*"))
    empty = {k: tmp_path / k for k in ("home", "tmp", "cache", "cwd")}
    for d in empty.values():
        d.mkdir()
    code = ("import sys; from consumer import Consumer\n"
            "ds = Consumer(sys.argv[1], metadata=None, cache_dir=False, seqlen=16)\n"
            "print(list(ds.sql('SELECT class, count(*), sum(size) FROM files GROUP BY class ORDER BY class')))\n"
            "ds[0]\n")
    env = {**os.environ, "HOME": str(empty["home"]), "TMPDIR": str(empty["tmp"]),
           "CONSUMER_CACHE_DIR": str(empty["cache"]), "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120,
                          check=False, cwd=empty["cwd"], env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[('a', 3, 27), ('b', 3, 27)]"
    assert {k: sorted(os.listdir(d)) for k, d in empty.items()} == {k: [] for k in empty}
    assert sorted((str(p), p.stat().st_mtime_ns) for p in root.rglob("*")) == before


@pytest.mark.skipif(not os.path.isdir("/usr/share/doc"), reason="no /usr/share/doc on this machine")
def test_a_copy_of_usr_share_doc_builds_when_skipping_bad_files(tmp_path):
    root = tmp_path / "doc"
    shutil.copytree("/usr/share/doc", root, symlinks=True)
    ds, warned = _build(root, on_bad_file="skip")
    regular = {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
               if not f.startswith(".") and os.path.isfile(os.path.join(d, f))
               and not os.path.islink(os.path.join(d, f))}
    assert all(os.path.isfile(p) for p in ds.files)
    assert len(set(ds.files) & regular) > 0.9 * len(regular)
    skipped = ds.build_info["skipped"]
    assert len(warned) == (1 if skipped else 0)
    if skipped:
        with pytest.raises(InputError, match="on_bad_file='skip'"):
            Consumer(str(root), metadata=None, cache_dir=False)
