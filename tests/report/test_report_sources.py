"""The report of a packed store, of objects on S3 (moto's server on 127.0.0.1), from the command line and at the end
of ``consumer demo``; and its size, which must not grow with the number of files."""

from __future__ import annotations

import numpy as np
import pytest

from consumer import Consumer
from consumer.cli.main import main
from consumer.report import render_report

from ..conftest import write_corpus
from .pagecheck import check_numbers, read_page


def test_a_packed_store_shows_what_it_has_and_says_what_it_cannot(tmp_path):
    fps = write_corpus(tmp_path / "c")
    Consumer(fps, seqlen=64, cache_dir=False).pack(tmp_path / "store")
    ds = Consumer.from_packed(tmp_path / "store", seqlen=64)
    page = read_page(render_report(ds, content=True))
    assert check_numbers(ds, page) > 50
    assert "this dataset's files are in a packed store" in page.section_text["content"]
    assert "No mime is known for these files (in a packed store)." in page.section_text["types"]
    described = next(t for t in page.tables if t.query == "types_description")  # recorded when it was packed
    assert all(r[1] != "NULL" for r in described.rows)
    assert not any(t.query == "duplicates" for t in page.tables)
    assert "sample 0" in page.section_text["samples"]
    assert page.settings["files"] == "in a packed store"


def test_objects_on_s3_get_a_report(tmp_path):
    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    from ..helpers.remote_servers import s3_with_files

    write_corpus(tmp_path / "local")
    with s3_with_files(tmp_path / "local") as (so, _):
        ds = Consumer("s3://data/corpus/", storage_options=so, seqlen=64, cache_dir=tmp_path / "cache")
        page = read_page(render_report(ds, content=True))
        assert check_numbers(ds, page) > 50
    # S3 offers whole objects: the content pass reads them (a source that can't says so, as a packed store does)
    assert any(t.query == "duplicates" for t in page.tables), page.section_text["content"]
    known = next(t for t in page.tables if t.query == "content_known")
    assert known.rows[0][0] == known.rows[0][1]
    assert page.settings["files"] == "URLs"
    assert "s3://data/corpus/" in page.section_text["extremes"]


def test_the_command_writes_the_page_and_prints_its_path(tmp_path, capsys):
    write_corpus(tmp_path / "c")
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "c"), "-o", str(out), "--cache-dir", "off", "--seqlen", "64", "--quiet",
                 "--types"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    ds = Consumer(str(tmp_path / "c"), seqlen=64, cache_dir=False)
    page = read_page(out.read_text(encoding="utf-8"))
    assert check_numbers(ds, page) > 50 and any(t.query == "types_mime" for t in page.tables)
    ds.pack(tmp_path / "store")
    assert main(["report", str(tmp_path / "store"), "--packed", "-o", str(out), "--seqlen", "64"]) == 0
    assert "in a packed store" in read_page(out.read_text(encoding="utf-8")).settings["files"]
    assert main(["report", str(tmp_path / "missing"), "-o", str(out)]) == 2
    assert "DIR: directory not found" in capsys.readouterr().err


def test_demo_ends_with_the_report_path(tmp_path, capsys):
    out = tmp_path / "demo.html"
    assert main(["demo", "--max-files", "5", "--show", "0", "--report", str(out)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"corpus report: {out}"
    html = out.read_text(encoding="utf-8")
    assert "Corpus report: the Python standard library" in html and "sample 0" in html


def _corpus(root, n: int, classes: int = 20) -> str:
    rng = np.random.default_rng(n)
    sizes = np.minimum(rng.lognormal(6.0, 1.5, n), 1 << 16).astype(np.int64)
    for c in range(classes):
        (root / f"class{c:02d}").mkdir(parents=True)
    blob = rng.integers(0, 256, int(sizes.max()), dtype=np.uint8).tobytes()
    for i, size in enumerate(sizes.tolist()):
        (root / f"class{i % classes:02d}" / f"f{i:06d}.bin").write_bytes(blob[:size])
    return str(root)


def test_the_page_does_not_grow_with_the_number_of_files(tmp_path):
    """10x the files, (almost) the same page: the extrapolation to 10^6 files stays far below 5 MB."""
    pages = {}
    for n in (1_000, 10_000):
        ds = Consumer(_corpus(tmp_path / str(n), n), seqlen=256, metadata=None, cache_dir=False)
        pages[n] = len(render_report(ds).encode("utf-8"))
    per_file = max(pages[10_000] - pages[1_000], 0) / 9_000
    assert pages[10_000] + per_file * (10**6 - 10_000) < 5 * 2**20, pages
    assert pages[10_000] < 200_000, pages
