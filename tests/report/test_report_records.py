"""The report of a records dataset (documents inside files): every panel counts documents through the ``documents``
relation, a per-container panel joins ``files`` (one row per container), and every number still equals its
statement's answer through ``ds.sql``; from the API and from ``consumer report --documents``."""

from __future__ import annotations

import json

import pytest

from consumer import Consumer
from consumer.cli.main import main
from consumer.report import render_report

from ..records.writers import write_jsonl, write_lines
from .pagecheck import built_figures, check_numbers, number, read_page, styles_tables

PER_DOCUMENT = {"overview", "per_class", "seqlen_choices", "sizes", "size_quantiles", "largest", "smallest"}
CONTAINERS = {"containers", "container_sizes", "top_containers"}


def _jsonl(root) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    a = root / "a.jsonl"
    a.write_text("".join(json.dumps({"text": "hello <b>world</b> " * i, "label": "xy"[i % 2]}) + "\n"
                         for i in range(30)), encoding="utf-8")
    b = write_jsonl(root / "b.jsonl", [f"doc {i} \x00 </script>" * (i % 4) for i in range(12)],
                    extra={"label": "z"})
    c = write_jsonl(root / "c.jsonl", ["same text"] * 5, extra={"label": "x"})  # duplicates across containers
    return [str(a), str(b), str(c)]


def _summary(page) -> dict[str, str]:
    """The Containers panel's summary row, by column."""
    table = next(t for t in page.tables if t.query == "containers")
    return dict(zip(table.header, table.rows[0]))


def _statements(page) -> set[str]:
    return {t.query for t in page.tables if t.query}


@pytest.mark.parametrize("content", [False, True])
def test_jsonl_with_class_field_counts_documents_and_containers(tmp_path, content):
    fps = _jsonl(tmp_path / "d")
    ds = Consumer(fps, documents="jsonl", class_field="label", seqlen=32, cache_dir=tmp_path / "cache")
    page = read_page(render_report(ds, content=content))
    assert check_numbers(ds, page) > 100
    assert PER_DOCUMENT | CONTAINERS <= _statements(page)
    for key in PER_DOCUMENT - {"seqlen_choices"}:
        assert "FROM documents" in page.statements[key] and "FROM files" not in page.statements[key], key
    overview = next(t for t in page.tables if t.query == "overview")
    assert overview.header[0] == "documents" and overview.rows[0][0] == "47" == str(len(ds.files))
    per_class = next(t for t in page.tables if t.query == "per_class")
    assert [r[0] for r in per_class.rows] == ["x", "y", "z"]
    assert [int(r[4]) for r in per_class.rows] == list(ds.samples_per_class().values())
    summary = next(t for t in page.tables if t.query == "containers")
    assert dict(zip(summary.header, summary.rows[0]))["containers"] == "3"
    assert dict(zip(summary.header, summary.rows[0]))["documents"] == "47"
    top = next(t for t in page.tables if t.query == "top_containers")
    assert [r[0] for r in top.rows] == fps[:1] + fps[1:2] + fps[2:]  # 30, 12, 5 documents
    assert [r[1] for r in top.rows] == ["30", "12", "5"]
    largest = next(t for t in page.tables if t.query == "largest")
    assert largest.rows[0][0] == f"{fps[0]}#29"  # the longest record, named container#record
    assert page.settings["documents"] == "jsonl" and page.settings["class_field"] == "label"
    if content:
        dup = next(t for t in page.tables if t.query == "duplicates")
        assert int(dup.rows[0][1]) >= 4  # the five equal records of c.jsonl: four redundant copies at least


def test_styles_side_by_side_count_documents_in_their_stream_order(tmp_path):
    """diff, concat and packed at two seqlen choices over documents inside containers equal each style's build
    (concat's cuts follow each class's stream in doc_id order)."""
    fps = _jsonl(tmp_path / "d")
    options = {"documents": "jsonl", "class_field": "label"}
    ds = Consumer(fps, seqlen=32, cache_dir=False, **options)
    page = read_page(render_report(ds))
    sql, plan = styles_tables(page)
    assert "FROM documents" in page.statements["style_choices"]
    for a, b in zip(sql.rows[:2], plan.rows[:2]):  # current and p50
        seqlen = int(number(a[1]))
        for style, long_files, shown in (("diff", "truncate", a[2:5]), ("concat", "truncate", a[5:8]),
                                         ("packed", "windows", b[2:5])):
            rows, pad, cut = built_figures(fps, style, long_files, seqlen, **options)
            assert int(number(shown[0])) == rows, (a[0], style)
            assert number(shown[1]) == pytest.approx(pad, abs=0.006), (a[0], style)
            assert number(shown[2]) == pytest.approx(cut, abs=0.006), (a[0], style)
        assert b[5] == "packing plan"


def test_lines_from_folders_per_document(tmp_path):
    for cls, n in (("en", 20), ("fr", 7)):
        (tmp_path / "d" / cls).mkdir(parents=True)
        write_lines(tmp_path / "d" / cls / "part0.txt", [f"{cls} line {i} ".encode() * (i + 1) for i in range(n)])
        write_lines(tmp_path / "d" / cls / "part1.txt", [b"x" * i for i in range(1, 4)])
    ds = Consumer(str(tmp_path / "d"), documents="lines", seqlen=16, style="concat", cache_dir=False)
    page = read_page(render_report(ds, types=True))
    assert check_numbers(ds, page) > 80
    assert PER_DOCUMENT | CONTAINERS <= _statements(page)
    per_class = next(t for t in page.tables if t.query == "per_class")
    assert [(r[0], r[1]) for r in per_class.rows] == [("en", "23"), ("fr", "10")]
    summary = _summary(page)
    assert summary["containers"] == "4" and summary["max_documents"] == "20" and summary["min_documents"] == "3"
    assert "lines records inside container files" in page.section_text["containers"]


def test_a_files_dataset_has_no_container_panel(tmp_path):
    from ..conftest import write_corpus

    ds = Consumer(write_corpus(tmp_path / "c"), seqlen=64, cache_dir=False)
    page = read_page(render_report(ds))
    assert not CONTAINERS & _statements(page) and "containers" not in page.section_text
    assert "documents" not in page.settings and "FROM files" in page.statements["overview"]


def test_the_command_takes_the_record_options(tmp_path, capsys):
    fps = _jsonl(tmp_path / "d")
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "d" / "*.jsonl"), "-o", str(out), "--documents", "jsonl",
                 "--class-field", "label", "--text-field", "text", "--seqlen", "32", "--cache-dir", "off",
                 "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    ds = Consumer(fps, documents="jsonl", class_field="label", seqlen=32, cache_dir=False)
    page = read_page(out.read_text(encoding="utf-8"))
    assert check_numbers(ds, page) > 100 and CONTAINERS <= _statements(page)
    assert page.settings["class_field"] == "label"
    assert main(["report", fps[0], "-o", str(out), "--documents", "lines", "--class-field", "label"]) == 2
    assert "class_field" in capsys.readouterr().err


def test_the_records_page_renders_in_the_browser(tmp_path):
    from .browser import render
    from .test_report_browser import _ink

    ds = Consumer(_jsonl(tmp_path / "d"), documents="jsonl", class_field="label", seqlen=32, cache_dir=False)
    page = tmp_path / "records.html"
    page.write_text(render_report(ds, content=True), encoding="utf-8")
    pixels, console = render(page, tmp_path)
    assert console == []
    std, ink = _ink(pixels)
    assert std > 20 and ink > 0.05, (std, ink)


def test_parquet_with_a_class_column_counts_rows_as_documents(tmp_path):
    from ..records.writers import write_parquet

    (tmp_path / "d").mkdir()
    docs = [f"row {i} <i>é</i> ".encode() * (1 + i % 5) for i in range(23)]
    labels = ["pos" if i % 3 else "neg" for i in range(23)]
    write_parquet(tmp_path / "d" / "a.parquet", docs[:15], row_group_size=4, binary=False, label=labels[:15])
    write_parquet(tmp_path / "d" / "b.parquet", docs[15:], row_group_size=3, label=labels[15:])
    ds = Consumer(str(tmp_path / "d"), documents="parquet", class_field="label", seqlen=24, cache_dir=False)
    page = read_page(render_report(ds, content=True))
    assert check_numbers(ds, page) > 80
    assert PER_DOCUMENT | CONTAINERS <= _statements(page)
    per_class = next(t for t in page.tables if t.query == "per_class")
    assert [(r[0], r[1]) for r in per_class.rows] == [("neg", "8"), ("pos", "15")]
    summary = _summary(page)
    assert summary["containers"] == "2" and summary["documents"] == "23"
    assert "parquet records inside container files" in page.section_text["containers"]
    largest = next(t for t in page.tables if t.query == "largest")
    assert largest.rows[0][0].endswith(("a.parquet#4", "a.parquet#9", "a.parquet#14"))  # a row of 5 repeats
    assert page.settings["documents"] == "parquet"


def test_tar_members_are_named_and_typed_by_their_own_bytes(tmp_path):
    from ..records.writers import write_tar

    (tmp_path / "d" / "img").mkdir(parents=True)
    (tmp_path / "d" / "txt").mkdir()
    png = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
    write_tar(tmp_path / "d" / "img" / "shard0.tar", [png, png + b"x"], names=["a.png", "b.png"])
    write_tar(tmp_path / "d" / "txt" / "shard0.tar", [b"plain text here\n" * k for k in range(1, 6)],
              names=[f"t{k}.txt" for k in range(5)])
    ds = Consumer(str(tmp_path / "d"), documents="tar", seqlen=32, cache_dir=False)
    page = read_page(render_report(ds, types=True))
    assert check_numbers(ds, page) > 60
    assert PER_DOCUMENT | CONTAINERS <= _statements(page)
    per_class = next(t for t in page.tables if t.query == "per_class")
    assert [(r[0], r[1]) for r in per_class.rows] == [("img", "2"), ("txt", "5")]
    mimes = [tuple(r[:3]) for r in next(t for t in page.tables if t.query == "types_mime").rows]
    assert mimes == [("img", "image/png", "2"), ("txt", "text/plain", "5")]  # libmagic on each member's bytes
    largest = next(t for t in page.tables if t.query == "largest")
    assert largest.rows[0][0].endswith("txt/shard0.tar/t4.txt")  # member names show as shard.tar/name
    summary = _summary(page)
    assert summary["containers"] == "2" and summary["documents"] == "7"


def test_a_store_packed_from_records_reports_its_documents(tmp_path):
    fps = _jsonl(tmp_path / "d")
    records = Consumer(fps, documents="jsonl", class_field="label", seqlen=32, cache_dir=False)
    records.pack(tmp_path / "store")
    ds = Consumer.from_packed(tmp_path / "store", seqlen=32)
    page = read_page(render_report(ds))
    assert check_numbers(ds, page) > 50
    overview = next(t for t in page.tables if t.query == "overview")
    assert overview.rows[0][0] == "47" == str(len(ds.files)) == str(len(records.files))
    per_class = next(t for t in page.tables if t.query == "per_class")
    assert [(r[0], r[1]) for r in per_class.rows] == [("x", "20"), ("y", "15"), ("z", "12")]
    assert [int(r[4]) for r in per_class.rows] == list(records.samples_per_class().values())
    assert page.settings["files"] == "in a packed store"
