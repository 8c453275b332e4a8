"""The report page as a person reads it: every number in a table equals the answer of the SQL statement shown beside
it, the charts draw the same numbers, the samples and PAD agree with the sample index, and no name or byte of a file
can turn into markup."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer, InputError
from consumer.dataset.cache import file_table_sha256
from consumer.report import fingerprint, plans, render_report
from consumer.report.page import text
from consumer.report.samples import bytes_html, sample_html

from ..conftest import write_corpus
from .pagecheck import Table, built_figures, check_numbers, number, read_page, styles_tables

ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p", "nav", "a", "main",
                "section", "table", "thead", "tbody", "tr", "th", "td", "div", "svg", "text", "rect", "line",
                "details", "summary", "pre", "code", "span"}


def _index_pad_pct(ds: Consumer) -> list[float]:
    """PAD share (%) per class, from the sample index itself."""
    real = ds.index.sample_tokens()
    out = []
    for c in range(len(ds.classes)):
        lo, hi = int(ds.index.class_ptr[c]), int(ds.index.class_ptr[c + 1])
        out.append(round(100 * (1 - real[lo:hi].sum() / ((hi - lo) * ds.seqlen)), 2))
    return out


@pytest.mark.parametrize("style, long_files, seqlen", [("diff", "truncate", 40), ("diff", "windows", 40),
                                                        ("concat", "truncate", 64), ("diff", "truncate", "auto"),
                                                        ("packed", "windows", 40), ("packed", "truncate", 64)])
def test_every_number_equals_its_sql_answer(tmp_path, style, long_files, seqlen):
    fps = write_corpus(tmp_path / "c")
    ds = Consumer(fps, style=style, long_files=long_files, seqlen=seqlen, cache_dir=tmp_path / "cache")
    page = read_page(render_report(ds, content=True))
    assert check_numbers(ds, page) > 100
    queries = {t.query for t in page.tables if t.query}
    assert {"overview", "per_class", "seqlen_choices", "types_mime", "types_description", "sizes", "size_quantiles",
            "content_known", "content_entropy", "content_printable", "duplicates", "duplicate_groups", "largest",
            "smallest", "empty"} <= queries
    per_class = next(t for t in page.tables if t.query == "per_class")
    samples = per_class
    if style == "packed":  # best-fit rows have no SQL: samples and PAD come from the index, in their own table
        assert per_class.header == ["class", "files", "bytes", "tokens"]
        samples = next(t for t in page.tables if t.source == "per_class_index")
        assert [r[0] for r in samples.rows] == [r[0] for r in per_class.rows] == ds.classes
        samples = Table(None, None, samples.header, [[r[0], "", "", "", r[1], r[2]] for r in samples.rows])
        assert "not from SQL" in page.section_text["balance"] and "not from SQL" in page.section_text["padding"]
    assert [int(r[4].replace(",", "")) for r in samples.rows] == list(ds.samples_per_class().values())
    assert [float(r[5]) for r in samples.rows] == pytest.approx(_index_pad_pct(ds), abs=0.006)
    d = ds.get_dict()
    for key in ("style", "n_bytes", "seqlen", "long_files", "metadata"):
        assert page.settings[key] == str(d[key]), key
    assert page.settings["samples"] == str(len(ds))
    docs = ds.documents
    table = file_table_sha256(docs.paths, docs.doc_class, docs.doc_size, docs.doc_mtime)
    canonical = json.dumps({"settings": ds.spec.to_dict(), "classes": ds.classes, "files_sha256": table},
                           sort_keys=True, separators=(",", ":"))
    assert page.settings["fingerprint"] == hashlib.sha256(canonical.encode()).hexdigest() == fingerprint(ds)
    # the bars of the class balance carry the same numbers as its table
    titles = page.titles["balance"]
    for row, counts in zip(per_class.rows, samples.rows):
        assert {f"{row[0]}: {row[1]}", f"{row[0]}: {row[2]}", f"{row[0]}: {counts[4]}"} <= set(titles)


def test_the_seqlen_choices_are_what_auto_pnn_resolves_to(tmp_path):
    fps = write_corpus(tmp_path / "c")
    ds = Consumer(fps, seqlen=64, cache_dir=False)
    page = read_page(render_report(ds))
    choices = {r[0]: int(r[1].replace(",", "")) for r in next(t for t in page.tables
                                                               if t.query == "seqlen_choices").rows}
    assert choices["current"] == 64
    for name in ("p50", "p90", "p95", "p99"):
        assert Consumer(fps, seqlen=f"auto:{name}", cache_dir=False).seqlen == choices[name], name
    assert Consumer(fps, seqlen="auto", cache_dir=False).seqlen == choices["max"]


@pytest.mark.parametrize("style, long_files", [("diff", "truncate"), ("diff", "windows"), ("concat", "truncate"),
                                               ("packed", "windows"), ("packed", "truncate")])
def test_diff_concat_and_packed_side_by_side_are_what_each_style_builds(tmp_path, style, long_files):
    fps = write_corpus(tmp_path / "c")
    ds = Consumer(fps, style=style, long_files=long_files, seqlen=23, cache_dir=False)
    concat = Consumer(fps, style="concat", seqlen=23, cache_dir=False).index
    doc_len = np.asarray(ds.documents.doc_len)
    assert ((concat.seg_col + concat.seg_len == 23) & (concat.seg_start == 0) &  # a whole document ends a window
            (concat.seg_len == doc_len[concat.seg_doc])).any()  # exactly: concat must not count it cut
    page = read_page(render_report(ds))
    sql, plan = styles_tables(page)
    diff_files = long_files if style == "diff" else "truncate"  # each style's own long_files, else its default
    packed_files = long_files if style == "packed" else "windows"
    text_ = page.section_text["padding"]
    assert f"diff (long_files={diff_files!r}), concat and packed (long_files={packed_files!r}) side by side" in text_
    assert "packed: packed_choices from the packing plan, not SQL" in text_
    compared = set()
    for a, b in zip(sql.rows, plan.rows):
        if a[0] not in ("current", "p90"):
            continue
        seqlen = int(number(a[1]))
        for name, lf, shown in (("diff", diff_files, a[2:5]), ("concat", "truncate", a[5:8]),
                                ("packed", packed_files, b[2:5])):
            rows, pad, cut = built_figures(fps, name, lf, seqlen)
            assert int(number(shown[0])) == rows, (a[0], name)
            assert number(shown[1]) == pytest.approx(pad, abs=0.006), (a[0], name)
            assert number(shown[2]) == pytest.approx(cut, abs=0.006), (a[0], name)
        assert b[5] == ("index" if style == "packed" and a[0] == "current" else "packing plan")
        compared.add(seqlen)
    assert compared == {23, 531}  # two seqlen choices, each built in every style
    assert ("from its sample index" in text_) == (style == "packed")
    assert "lower bound" not in text_


def test_a_corpus_too_large_to_plan_gets_packed_lower_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(plans, "PLAN_DOCS", 5)  # the corpus has 17 documents: "large"
    fps = write_corpus(tmp_path / "c")
    ds = Consumer(fps, style="packed", seqlen=40, cache_dir=False)
    doc_len, doc_class = np.asarray(ds.documents.doc_len), np.asarray(ds.documents.doc_class)
    page = read_page(render_report(ds))
    _, plan = styles_tables(page)
    assert "more than 5 documents" in page.section_text["padding"]
    for r in plan.rows:
        seqlen = int(number(r[1]))
        rows, pad, cut = built_figures(fps, "packed", "windows", seqlen)
        assert number(r[4]) == pytest.approx(cut, abs=0.006)  # documents cut: exact in every case
        if r[0] == "current":  # the dataset's own seqlen: its index, exact
            assert (r[5], int(number(r[2]))) == ("index", rows)
            continue
        bound = sum(-(-int(doc_len[doc_class == c].sum()) // seqlen) for c in range(len(ds.classes)))
        assert r[5] == "lower bound" and int(number(r[2])) == bound <= rows
        assert number(r[3]) <= pad + 0.006


def test_fingerprint_follows_the_settings_and_the_files(tmp_path):
    fps = write_corpus(tmp_path / "c")
    a = Consumer(fps, seqlen=64, cache_dir=False)
    before = fingerprint(a)
    a.create_batches(4)
    a.set_supervised_mode()
    assert fingerprint(a) == before == fingerprint(Consumer(fps, seqlen=64, cache_dir=False))
    assert fingerprint(Consumer(fps, seqlen=65, cache_dir=False)) != before
    assert fingerprint(a.subset([0, 1, 2])) != before
    with open(fps["cat"][-1], "ab") as f:
        f.write(b"one more")
    assert fingerprint(Consumer(fps, seqlen=64, cache_dir=False)) != before


def test_metadata_none_says_so_and_computes_types_only_when_asked(tmp_path, magic_calls):
    fps = write_corpus(tmp_path / "c")
    ds = Consumer(fps, seqlen=64, metadata=None, cache_dir=False)
    calls = len(magic_calls)
    page = read_page(render_report(ds))
    assert "built with metadata=None" in page.section_text["types"]
    assert not any(t.query and t.query.startswith("types") for t in page.tables)
    assert "Not computed: pass content=True" in page.section_text["content"]
    assert len(magic_calls) == calls  # no libmagic for a report without types
    page = read_page(render_report(ds, types=True))
    assert {"types_mime", "types_description"} <= {t.query for t in page.tables}
    assert len(magic_calls) > calls
    check_numbers(ds, page)


# names and bytes meant to break a page: closing tags, event handlers, comment and CDATA ends, NUL, bad UTF-8
HOSTILE_CLASSES = ["</script><script>alert('class')</script>", "<img src=x onerror=alert(1)>", "--> ]]> &amp; \"'"]
HOSTILE_FILES = [b"\xff\xfe not utf-8 \xc3\x28.bin", b"<img src=x onerror=alert(2)>.txt", b"--> <!-- ]]>.txt",
                 b"new\nline\ttab.txt", b"<style>*{display:none}<b>bold.txt"]
HOSTILE_BYTES = [b"</script><script>alert(3)</script>", b"<img src=x onerror=alert(4)>", b"\x00NUL\x00\x01\x7f",
                 b"\xff\xfe\xc3\x28 invalid utf-8 \xed\xa0\x80", b"--> <!-- ]]> <![CDATA[ x", b"</pre></section>"]


def _hostile(tmp_path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    root = os.fsencode(tmp_path / "h")
    os.makedirs(root, exist_ok=True)
    for c, cls in enumerate(HOSTILE_CLASSES):
        folder = os.path.join(root, b"c%d" % c)
        os.makedirs(folder, exist_ok=True)
        out[cls] = []
        for i, name in enumerate(HOSTILE_FILES):
            path = os.path.join(folder, name)
            with open(path, "wb") as f:
                k = (i + c) % len(HOSTILE_BYTES)
                f.write(b" ".join(HOSTILE_BYTES[k:] + HOSTILE_BYTES[:k]) * (1 + i))
            out[cls].append(os.fsdecode(path))
    return out


@pytest.mark.parametrize("n_bytes", [1, 2])
def test_hostile_names_and_bytes_never_become_markup(tmp_path, n_bytes):
    ds = Consumer(_hostile(tmp_path), n_bytes=n_bytes, seqlen=256, cache_dir=False)
    raw = render_report(ds, content=True).encode("utf-8")
    html = raw.decode("utf-8", errors="strict")  # no lone surrogate or invalid byte reached the page
    page = read_page(html)
    assert {t for t, _ in page.tags} <= ALLOWED_TAGS, {t for t, _ in page.tags} - ALLOWED_TAGS
    for tag, attrs in page.tags:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            if name == "href":
                assert value and value.startswith("#"), value
    assert html.count("<script") == 0 and html.count("<img") == 0 and "\x00" not in html
    check_numbers(ds, page)  # the class names in the tables read back as themselves
    for cls in HOSTILE_CLASSES:
        assert cls in page.section_text["balance"]
    samples = page.section_text["samples"]
    for shown in ("</script><script>alert(3)</script>", "<img src=x onerror=alert(4)>", "\\x00NUL\\x00\\x01\\x7f",
                  "\\xff\\xfe\\xc3( invalid utf-8 \\xed\\xa0\\x80", "--> <!-- ]]> <![CDATA[ x", "</pre></section>"):
        assert shown in samples, shown
    assert "\\xff\\xfe not utf-8 \\xc3(.bin" in page.section_text["extremes"]  # a name that is not UTF-8
    assert "/--> <!-- ]]>.txt, token 0" in samples


def test_text_escapes_what_a_page_must_not_hold():
    assert text("<a href='x'>&</a>") == "&lt;a href=&#x27;x&#x27;&gt;&amp;&lt;/a&gt;"
    assert text("a\x00b\x1fc\x7f\ud8ff\ufffe") == "a\\x00b\\x1fc\\x7f\\ud8ff\\ufffe"
    assert text("line\nand\ttab") == "line\nand\ttab"
    assert bytes_html(b"ok <b>\x00\xff\n") == 'ok &lt;b&gt;<span class="esc">\\x00\\xff</span>\n'


def test_a_sample_marks_header_specials_and_the_pad_run(tmp_path):
    fps = write_corpus(tmp_path / "c", {"a": [5, 3]})
    ds = Consumer(fps, style="concat", n_bytes=2, seqlen=200, cache_dir=False)
    row = ds.fetch_numpy(np.array([0]), ["input_array"])["input_array"][0]
    body = sample_html(row, ds.vocab, starts_document=True, headers=True, limit=1000)
    assert body.count('class="tok EOF"') == 2 and body.count('class="tok SEP"') == 2
    assert body.count('class="hdr"') == 2 and 'class="tok TAIL"' in body  # 5 and 3 bytes: odd, a tail each
    assert body.endswith(f" \u00d7 {int((row == ds.vocab.pad).sum())}</span>")
    short = sample_html(row, ds.vocab, starts_document=True, headers=True, limit=4)
    assert "more tokens" in short


def test_bad_arguments_name_themselves(tmp_path):
    ds = Consumer(write_corpus(tmp_path / "c"), seqlen=64, cache_dir=False)
    with pytest.raises(InputError, match="content must be"):
        ds.report(tmp_path / "r.html", content="yes")
    with pytest.raises(InputError, match=r"path must be a file path .* got 3"):
        ds.report(3)
    assert ds.report(tmp_path / "r.html") == str(tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
