"""Notebook display: repr_html is valid, escaped HTML with the settings, the class table and the vocabulary;
text_repr is one concise line."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from consumer import Consumer
from consumer.dataset import display
from consumer.dataset.display import repr_html, text_repr

from ..conftest import write_corpus

EVIL = "<b>&'x\""  # a legal folder name that must never reach the page as markup


class _Page(HTMLParser):
    """Checks that tags nest and close properly and collects the cells of each table (by its class)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.captions: dict[str, str] = {}
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._caption: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.stack.append(tag)
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "table":
            self._table = attrs.get("class", "")
            self.tables[self._table] = []
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "caption":
            self._caption = []

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()
        if tag in ("td", "th"):
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr":
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "caption":
            self.captions[self._table] = "".join(self._caption)
            self._caption = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._caption is not None:
            self._caption.append(data)


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    page.close()
    assert page.stack == [], f"unclosed tags {page.stack}"
    assert "script" not in page.tags and "b" not in page.tags
    return page


@pytest.fixture
def ds(tmp_path):
    write_corpus(tmp_path / "data", {"cat": [10, 300, 7], EVIL: [5000], "dog": [1, 2, 3, 4]})
    out = Consumer(str(tmp_path / "data"), style="concat", seqlen=64, cache_dir=False)
    yield out
    out.close()


def test_repr_html_is_valid_and_has_the_class_table(ds):
    info = ds.get_dict()
    page = _parse(repr_html(ds))
    assert page.tags[0] == "div" and set(page.tables) == {"consumer-settings", "consumer-classes", "consumer-vocab"}
    assert page.captions == {"consumer-settings": "settings", "consumer-classes": "classes",
                             "consumer-vocab": "vocabulary"}
    rows = page.tables["consumer-classes"]
    assert rows[0] == ["class", "id", "files", "bytes", "tokens", "samples"]
    assert [r[0] for r in rows[1:-1]] == ds.classes == [EVIL, "cat", "dog"]  # shown as text, unescaped by the parser
    for row in rows[1:-1]:
        per = info["per_class"][row[0]]
        assert row[1:] == [str(ds.class_to_id[row[0]])] + [f"{per[k]:,}" for k in ("files", "bytes", "tokens",
                                                                                     "samples")]
    assert rows[-1] == ["(all)", "", "8", f"{sum(p['bytes'] for p in info['per_class'].values()):,}",
                        f"{int(ds.documents.doc_len.sum()):,}", f"{len(ds):,}"]
    settings = dict(page.tables["consumer-settings"])
    assert settings["style"] == "concat" and settings["seqlen"] == "64" and settings["n_bytes"] == "2"
    assert settings["long_files"] == "truncate" and settings["sampling"] == "consumer"
    assert settings["mode (default query)"] == "none" and "masking" not in settings
    vocab = dict(page.tables["consumer-vocab"])
    assert vocab["size"] == f"{ds.vocab.size:,}" and vocab["data ids"] == "0 .. 65,535"
    assert f"EOF={ds.vocab.eof}" in vocab["special ids"] and f"PAD={ds.vocab.pad}" in vocab["special ids"]


def test_repr_html_escapes_everything(ds):
    text = repr_html(ds)
    assert EVIL not in text and "&lt;b&gt;&amp;&#x27;x&quot;" in text


def test_repr_html_follows_the_mode_and_caps_the_class_rows(ds, monkeypatch):
    ds.set_mlm_mode(mask_frequency=0.2, add_cls=True)
    settings = dict(_parse(repr_html(ds)).tables["consumer-settings"])
    assert settings["mode (default query)"] == "mlm"
    assert settings["masking"] == "frequency=0.2, rule=bert, add_cls=True"
    monkeypatch.setattr(display, "MAX_CLASS_ROWS", 1)
    rows = _parse(repr_html(ds)).tables["consumer-classes"]
    assert [r[0] for r in rows] == ["class", EVIL, "... 2 more classes not shown (ds.get_dict()['per_class'] has "
                                                   "them all)", "(all)"]
    assert rows[-1][2] == "8"  # the total still counts every class


def test_text_repr(ds, tmp_path):
    assert text_repr(ds) == (f"Consumer(style='concat', n_bytes=2, seqlen=64, classes={[EVIL, 'cat', 'dog']!r}, "
                             f"files=8, samples={len(ds)})")
    ds.set_supervised_mode()
    assert text_repr(ds).endswith(", mode='supervised')")
    many = {f"c{i}": [3] for i in range(9)}
    write_corpus(tmp_path / "many", many)
    big = Consumer(str(tmp_path / "many"), seqlen=16, long_files="windows", cache_dir=False, metadata=None)
    assert text_repr(big) == "Consumer(style='diff', n_bytes=2, seqlen=16, long_files='windows', classes=9, files=9, " \
                             "samples=9)"


def test_facade_uses_the_display_functions(ds):
    assert ds._repr_html_() == repr_html(ds) and repr(ds) == text_repr(ds)
