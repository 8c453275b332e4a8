"""Exact duplicates and the dedupe plan on a corpus with planted copies (within and across classes)."""

from __future__ import annotations

import hashlib
import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.catalog.catalog import Catalog
from consumer.catalog.duplicates import catalog_sha256s, dedupe_plan, find_duplicates
from consumer.cli.main import content_summary
from consumer.errors import FileChangedError, InputError

from ..conftest import identity


@pytest.fixture
def planted(tmp_path):
    """Three classes of unique random files, plus planted copies:
    - ``ant/a03`` copied to ``bee/zz_from_ant`` (cross class) and to ``cow/c_from_ant`` (cross class);
    - ``bee/b01`` copied to ``bee/b01_copy`` (same class);
    - ``cow/c05`` copied to ``ant/a00_from_cow`` (cross class; the copy sorts first: it is kept);
    - two empty files in ``cow`` (equal content too)."""
    rng = np.random.default_rng(11)
    root = tmp_path / "corpus"
    for cls, n in (("ant", 6), ("bee", 5), ("cow", 7)):
        (root / cls).mkdir(parents=True)
        for i in range(n):
            size = int(rng.integers(50, 3000))
            (root / cls / f"{cls[0]}{i:02d}").write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
    copies = {"ant/a03": ["bee/zz_from_ant", "cow/c_from_ant"], "bee/b01": ["bee/b01_copy"],
              "cow/c05": ["ant/a00_from_cow"]}
    for src, dsts in copies.items():
        for dst in dsts:
            shutil.copyfile(root / src, root / dst)
    (root / "cow" / "empty1").write_bytes(b"")
    (root / "cow" / "empty2").write_bytes(b"")
    return root


def _sha(paths):
    return [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths]


def test_find_duplicates_groups_in_corpus_order(planted):
    ds = Consumer(str(planted), cache_dir=False, metadata=None)
    paths = ds.files
    classes = [ds.classes[c] for c in ds.documents.doc_class]
    sizes, _ = identity(paths)
    groups = find_duplicates(paths, classes, _sha(paths), sizes)
    rel = [[(os.path.relpath(m.path, planted), m.cls) for m in g.members] for g in groups]
    assert rel == [
        [("ant/a00_from_cow", "ant"), ("cow/c05", "cow")],
        [("ant/a03", "ant"), ("bee/zz_from_ant", "bee"), ("cow/c_from_ant", "cow")],
        [("bee/b01", "bee"), ("bee/b01_copy", "bee")],
        [("cow/empty1", "cow"), ("cow/empty2", "cow")],
    ]
    assert [g.cross_class for g in groups] == [True, True, False, False]
    assert groups[1].classes == ["ant", "bee", "cow"]
    assert all(paths[m.file_id] == m.path for g in groups for m in g.members)
    assert groups[1].size == os.path.getsize(planted / "ant" / "a03") and groups[3].size == 0
    assert groups[1].as_dict()["members"][1] == {"file_id": groups[1].members[1].file_id,
                                                 "path": str(planted / "bee" / "zz_from_ant"), "class": "bee"}
    # input order does not matter: the rule is (class, path), not position
    perm = np.random.default_rng(0).permutation(len(paths)).tolist()
    shuffled = find_duplicates([paths[i] for i in perm], [classes[i] for i in perm], [_sha(paths)[i] for i in perm])
    assert [[m.path for m in g.members] for g in shuffled] == [[m.path for m in g.members] for g in groups]


@pytest.mark.parametrize("style", ["diff", "concat"])
def test_dedupe_drops_exactly_the_later_copies(planted, tmp_path, style):
    ds = Consumer(str(planted), cache_dir=tmp_path / "cache", style=style, seqlen=64)
    paths = ds.files
    classes = [ds.classes[c] for c in ds.documents.doc_class]
    sizes, mtimes = identity(paths)
    cat = Catalog(str(tmp_path / "cache" / "catalog.sqlite"))
    sha = catalog_sha256s(cat, paths, sizes, mtimes)
    assert sha == _sha(paths)
    assert cat.ensure_content(paths, sizes, mtimes) == 0  # computed once
    plan = dedupe_plan(paths, classes, sha, sizes)
    dropped = sorted(os.path.relpath(paths[i], planted) for i in plan.drop)
    assert dropped == ["bee/b01_copy", "bee/zz_from_ant", "cow/c05", "cow/c_from_ant", "cow/empty2"]
    report = plan.report()
    assert report["dropped_files"] == 5 and report["kept"] == len(paths) - 5 and report["files"] == len(paths)
    assert report["dropped_bytes"] == sum(os.path.getsize(planted / d) for d in dropped)
    assert report["groups"] == 4 and report["cross_class_groups"] == 2
    assert {(os.path.relpath(d["path"], planted), os.path.relpath(d["kept"], planted)) for d in report["dropped"]} == {
        ("bee/b01_copy", "bee/b01"), ("bee/zz_from_ant", "ant/a03"), ("cow/c_from_ant", "ant/a03"),
        ("cow/c05", "ant/a00_from_cow"), ("cow/empty2", "cow/empty1")}
    assert np.array_equal(np.sort(np.concatenate([plan.keep, plan.drop])), np.arange(len(paths)))
    assert len({sha[i] for i in plan.keep}) == plan.keep.size  # no content twice among the kept
    # the surviving dataset serves the same samples as a corpus built without the copies
    survivors = ds.where(f"file_id IN ({','.join(map(str, plan.keep.tolist()))})")
    deduped = Consumer(str(planted), cache_dir=tmp_path / "cache", style=style, seqlen=64, dedupe="content")
    assert deduped.build_info["dedupe"] == report and deduped.get_dict()["dedupe"] == "content"
    groups = ds.duplicates()
    assert [[os.path.relpath(m.path, planted) for m in g.members] for g in groups] == \
        [[os.path.relpath(m.path, planted) for m in g.members] for g in plan.groups]
    assert sum(g.cross_class for g in groups) == 2 and deduped.duplicates() == []
    for d in dropped:
        os.remove(planted / d)
    clean = Consumer(str(planted), cache_dir=False, style=style, seqlen=64)
    query = ["input_array", "class", "attention_mask"]
    want = clean.fetch_numpy(np.arange(len(clean)), query)
    for kept in (survivors, deduped):
        assert kept.files == clean.files and len(kept) == len(clean)
        got = kept.fetch_numpy(np.arange(len(kept)), query)
        for k in query:
            assert np.array_equal(got[k], want[k]), k


def test_no_duplicates_and_bad_inputs(tmp_path):
    paths = [str(tmp_path / f"f{i}") for i in range(3)]
    sha = [hashlib.sha256(bytes([i])).hexdigest() for i in range(3)]
    assert find_duplicates(paths, ["a"] * 3, sha) == []
    plan = dedupe_plan(paths, ["a"] * 3, sha, [1, 1, 1])
    assert plan.keep.tolist() == [0, 1, 2] and plan.drop.size == 0
    assert plan.report() == {"files": 3, "kept": 3, "dropped_files": 0, "dropped_bytes": 0, "groups": 0,
                             "cross_class_groups": 0, "dropped": []}
    assert find_duplicates([], [], []) == []
    with pytest.raises(InputError, match=r"sha256s\[1\].*f1.*None"):
        find_duplicates(paths, ["a"] * 3, [sha[0], None, sha[2]])
    with pytest.raises(InputError, match="one entry per file"):
        dedupe_plan(paths, ["a"] * 2, sha, [1, 1, 1])


def test_a_class_made_only_of_copies_disappears(tmp_path):
    """Every file of class 'zz' is a copy of a file of an earlier class: the plan keeps none of them."""
    (tmp_path / "aa").mkdir()
    (tmp_path / "zz").mkdir()
    for i in range(3):
        (tmp_path / "aa" / f"{i}").write_bytes(bytes([i]) * 10)
        (tmp_path / "zz" / f"{i}").write_bytes(bytes([2 - i]) * 10)
    paths = sorted(str(p) for p in tmp_path.glob("*/*"))
    classes = [os.path.basename(os.path.dirname(p)) for p in paths]
    plan = dedupe_plan(paths, classes, _sha(paths), [10] * 6)
    assert [classes[i] for i in plan.keep] == ["aa"] * 3 and plan.report()["cross_class_groups"] == 3
    cat = Catalog(None)
    sizes, mtimes = identity(paths)
    (tmp_path / "zz" / "1").write_bytes(b"changed!")
    with pytest.raises(FileChangedError):
        catalog_sha256s(cat, paths, sizes, mtimes)


def test_info_content_summary(planted):
    ds = Consumer(str(planted), cache_dir=False, metadata=None)
    paths, classes = ds.files, [ds.classes[c] for c in ds.documents.doc_class]
    sizes, mtimes = identity(paths)
    ds.catalog.ensure_content(paths, sizes, mtimes)
    rows = ds.sql("SELECT class, entropy, printable FROM files")
    text = content_summary(rows, find_duplicates(paths, classes, _sha(paths), sizes), top=1)
    lines = text.splitlines()
    ant = next(line for line in lines if line.startswith("ant "))
    ent = [float(r[1]) for r in rows if r[0] == "ant"]
    assert ant.split()[1] == str(len(ent)) and ant.split()[3] == f"{np.quantile(ent, 0.5):.2f}"
    assert "4 groups of equal content, 5 redundant copies" in text and "2 groups across classes" in text
    assert "... and 1 more cross-class groups" in text and "a00_from_cow [ant]" in text


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 5)), min_size=0, max_size=40, unique=True))
def test_plan_matches_a_brute_force_rule(files):
    """Random corpora of (class, content id): the plan keeps, per content, the smallest (class, path)."""
    entries = sorted((cls, f"/x/{cls}/{i:03d}", content) for i, (cls, content) in enumerate(files))
    paths = [p for _, p, _ in entries]
    classes = [c for c, _, _ in entries]
    sha = [hashlib.sha256(bytes([content])).hexdigest() for _, _, content in entries]
    sizes = [content + 1 for _, _, content in entries]
    plan = dedupe_plan(paths, classes, sha, sizes)
    first: dict[str, tuple] = {}
    for i, (c, p, _) in enumerate(entries):
        first[sha[i]] = min(first.get(sha[i], (c, p, i)), (c, p, i))
    keep = sorted(v[2] for v in first.values())
    assert plan.keep.tolist() == keep
    assert plan.dropped_bytes == sum(sizes) - sum(sizes[i] for i in keep)
    multi = {h for h in sha if sha.count(h) > 1}
    assert len(plan.groups) == len(multi)
    assert plan.cross_class_groups == sum(len({classes[i] for i in range(len(sha)) if sha[i] == h}) > 1 for h in multi)


def test_cli_info_shows_content_and_duplicates(planted, tmp_path, capsys):
    from consumer.cli.main import main
    assert main(["info", str(planted), "--cache-dir", str(tmp_path / "c"), "--seqlen", "64", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "content (entropy in bits/byte, printable in %)" in out
    assert "duplicates: 4 groups of equal content, 5 redundant copies" in out and "2 groups across classes" in out
    assert main(["info", str(planted), "--cache-dir", str(tmp_path / "c"), "--seqlen", "64", "--quiet",
                 "--no-content"]) == 0
    assert "duplicates:" not in capsys.readouterr().out
    assert main(["sql", str(planted), "SELECT class, round(avg(entropy), 2) FROM files GROUP BY class ORDER BY class",
                 "--cache-dir", str(tmp_path / "c"), "--format", "csv", "--quiet"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].startswith("class,") and len(rows) == 4 and all(7.0 < float(r.split(",")[1]) <= 8.0
                                                                   for r in rows[1:3])
