"""A mixture's SQL (the union of the parts with a ``part`` column), ``where`` inside the parts, the JSON round trip,
a part changed on disk, and the report's figures."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pyarrow as pa
import pytest
import torch

from consumer import FileChangedError, InputError, QueryError, SelectionError
from consumer.mixtures import Mixture, mix
from consumer.mixtures.describe import OVERSAMPLED, epochs_per_part, part_figures, render_report, weights_json

from .conftest import write_parts

WEIGHTS = {"raw": 1.0, "text": 2.0, "code": 5.0}


@pytest.fixture(scope="module")
def m(parts) -> Mixture:
    return mix(parts, weights=WEIGHTS, seed=3)


def _np(batch: dict) -> dict:
    return {k: v.numpy() for k, v in batch.items()}


def _same_rows(a: Mixture, b: Mixture, ids: list[int]) -> None:
    x, y = _np(a.fetch(ids)), _np(b.fetch(ids))
    assert x.keys() == y.keys()
    for k in x:
        assert np.array_equal(x[k], y[k]), k


# ----------------------------------------------------------------- SQL
def test_sql_counts_files_and_documents_per_part(m, parts):
    files = dict(m.sql("SELECT part, count(*) FROM files GROUP BY part"))
    assert files == {name: p.sql("SELECT count(*) FROM files")[0][0] for name, p in parts.items()}
    docs = m.sql("SELECT part, count(*) AS n FROM documents GROUP BY part ORDER BY part")
    assert docs.columns == ["part", "n"]
    assert dict(docs) == {name: len(p.documents) for name, p in parts.items()}
    assert files["text"] == 1 and docs[-1] == ("text", 20)  # the JSONL part: one container, 20 documents


def test_sql_rows_are_the_parts_own(m, parts):
    for name, part in parts.items():
        mine = m.sql("SELECT file_id, path, class, size, tokens, samples FROM files WHERE part = ? ORDER BY file_id",
                     [name])
        assert list(mine) == list(part.sql("SELECT file_id, path, class, size, tokens, samples FROM files "
                                           "ORDER BY file_id"))
        mine = m.sql("SELECT doc_id, file_id, record, length, tokens FROM documents WHERE part = $p ORDER BY doc_id",
                     {"p": name})
        assert list(mine) == list(part.sql("SELECT doc_id, file_id, record, length, tokens FROM documents "
                                           "ORDER BY doc_id"))
    cols = m.sql("SELECT * FROM files LIMIT 1").columns
    assert cols[0] == "part" and cols[1:] == parts["raw"].sql("SELECT * FROM files LIMIT 1").columns


def test_sql_reads_a_records_part_json(m, parts):
    rows = m.sql("SELECT doc_id, json_extract_string(json, '$.text') FROM documents WHERE part = 'text' "
                 "ORDER BY doc_id LIMIT 3")
    expected = parts["text"].sql("SELECT doc_id, json_extract_string(json, '$.text') FROM documents "
                                 "ORDER BY doc_id LIMIT 3")
    assert list(rows) == list(expected) and rows[0][1].startswith("doc 0 ")
    # the other parts have no JSON records: NULL, as in their own views
    assert m.sql("SELECT count(json) FROM documents WHERE part <> 'text'")[0][0] == 0


def test_sql_is_sealed_and_gives_arrow(m):
    with pytest.raises(QueryError, match="not allowed"):
        m.sql("SELECT * FROM consumer_mixture_files")
    with pytest.raises(QueryError, match="only read-only SELECT"):
        m.sql("DELETE FROM files")
    with pytest.raises(QueryError, match="DuckDB only"):
        m.sql("SELECT 1", dialect="sqlite")
    table = m.to_arrow("SELECT part, sum(tokens) AS t FROM files GROUP BY part ORDER BY part")
    assert isinstance(table, pa.Table) and table.column_names == ["part", "t"]
    assert table.column("part").to_pylist() == ["code", "raw", "text"]


# ----------------------------------------------------------------- where
def test_where_filters_inside_each_part(m, parts):
    w = m.where("size > ?", [10])
    assert isinstance(w, Mixture) and w.classes == m.classes and w.seed == m.seed
    assert w.weights == pytest.approx(m.weights)
    for name, part in parts.items():
        mine = w.parts[name]
        assert list(mine.files) == list(part.where("size > ?", [10]).files)
        assert 0 < len(mine.files) <= len(part.files)
    assert len(w) == sum(len(p) for p in w.parts.values())
    off = dict(zip(w.classes, w.index.class_ptr.tolist()))
    x = _np(w.fetch([off["text"], off["code"] + 1]))
    y = _np(w.parts["text"].fetch([0])), _np(w.parts["code"].fetch([1]))
    assert np.array_equal(x["input_array"][0], y[0]["input_array"][0])
    assert np.array_equal(x["input_array"][1], y[1]["input_array"][0])


def test_where_refuses_to_empty_a_part(m):
    with pytest.raises(SelectionError, match="part 'raw'"):
        m.where("extension = 'py'")


# ----------------------------------------------------------------- JSON
def test_json_round_trip(m, tmp_path):
    text = m.to_json(include_files=True)
    assert isinstance(text, str)
    d = json.loads(text)
    assert list(d["mixture"]) == ["raw", "text", "code"] and d["seed"] == 3
    written = {k: v / sum(d["weights"].values()) for k, v in d["weights"].items()}  # as given, or normalised
    assert written == pytest.approx({k: v / sum(WEIGHTS.values()) for k, v in WEIGHTS.items()})
    back = Mixture.from_json(text)
    assert len(back) == len(m) and back.classes == m.classes and back.seed == m.seed
    assert back.weights == pytest.approx(m.weights)
    assert back.samples_per_class() == m.samples_per_class()
    ids = [0, len(m) - 1, *range(5, len(m), 7)]
    _same_rows(back, m, ids)
    path = tmp_path / "m.json"
    assert m.to_json(str(path), include_files=True) is None
    again = Mixture.from_dict(str(path))
    _same_rows(again, m, ids)
    for name, part in again.parts.items():  # the same files, classes and counts (data_mode says "rebuilt")
        a, b = part.get_dict(include_files=True), m.parts[name].get_dict(include_files=True)
        assert a["files"] == b["files"] and a["per_class"] == b["per_class"] and a["classes"] == b["classes"]
    # so an order's state survives the round trip: the rebuilt mixture continues it, loader and cursor alike
    loader = m.dataloader(4, query=["sample_id", "input_array"], seed=2)
    for i, _ in enumerate(loader):
        if i == 6:
            break
    state = loader.state_dict()
    resumed = again.dataloader(4, query=["sample_id", "input_array"], seed=2)
    resumed.load_state_dict(state)
    after, resumed_after = next(iter(loader)), next(iter(resumed))
    assert all(torch.equal(after[k], resumed_after[k]) for k in after)
    again.load_state_dict(state)
    assert torch.equal(again[None, ["sample_id"]]["sample_id"], after["sample_id"])


def test_json_without_files_and_unwritable_weights_are_refused(m):
    with pytest.raises(InputError, match="part 'raw'.*include_files=True"):
        Mixture.from_json(m.to_json())
    with pytest.raises(InputError, match="mixture"):
        Mixture.from_dict({"weights": None})
    with pytest.raises(InputError, match="function of the step"):
        weights_json(lambda step: {"raw": 1.0})
    assert weights_json([(0, {"raw": 1}), (100, {"raw": 1, "code": 2})]) == \
        [[0, {"raw": 1.0}], [100, {"raw": 1.0, "code": 2.0}]]
    assert weights_json(None) is None


# ----------------------------------------------------------------- a part changed on disk
def test_a_part_changed_on_disk_is_named(tmp_path):
    parts = write_parts(tmp_path)
    m = mix(parts)
    path = parts["raw"].files[0]
    size = os.path.getsize(path)
    with open(path, "wb") as f:
        f.write(b"z" * (size + 5))
    with pytest.raises(FileChangedError) as info:
        m[0]
    message = str(info.value)
    assert "part 'raw'" in message and "r00.bin" in message
    assert isinstance(info.value.__cause__, FileChangedError)
    assert str(info.value.__cause__) in message  # the part's own message, kept whole
    off = int(m.index.class_ptr[2])
    assert m[off]["input_array"].shape[-1] == m.seqlen  # the other parts still read


# ----------------------------------------------------------------- report
def test_report_figures(m, parts):
    rows = {r["part"]: r for r in part_figures(m)}
    assert list(rows) == m.classes
    for name, part in parts.items():
        assert rows[name]["documents"] == len(part.documents)
        assert rows[name]["tokens"] == int(part.documents.doc_len.sum())
        assert rows[name]["samples"] == len(part)
        assert rows[name]["weight"] == pytest.approx(WEIGHTS[name] / sum(WEIGHTS.values()))
    assert sum(r["documents_share"] for r in rows.values()) == pytest.approx(1.0)
    assert sum(r["tokens_share"] for r in rows.values()) == pytest.approx(1.0)
    total_docs = sum(len(p.documents) for p in parts.values())
    assert rows["text"]["documents_share"] == pytest.approx(20 / total_docs)
    epochs = epochs_per_part(m, 10, 4)
    for name, part in parts.items():
        assert epochs[name] == pytest.approx(10 * 4 * m.weights[name] / len(part))
    zero = mix(parts, weights={"code": 1.0})
    assert epochs_per_part(zero, 10, 4)["raw"] == 0.0


def test_report_page(m, tmp_path):
    epochs = epochs_per_part(m, 10, 8)
    over = [name for name, e in epochs.items() if e > OVERSAMPLED]
    assert over and len(over) < len(epochs)  # some parts repeated more than 4 times, not all
    out = m.report(tmp_path / "mix.html", steps=10, batch_size=8)
    assert out == os.fspath(tmp_path / "mix.html")
    html = (tmp_path / "mix.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in html
    assert 'data-source="mixture-parts"' in html and 'data-source="mixture-epochs"' in html
    for name in m.classes:
        warned = f"part {name!r}".replace("'", "&#x27;") + " is repeated"
        assert (warned in html) == (name in over), name
    assert f"{epochs[over[0]]:.2f}" in html
    short = render_report(m)
    assert "mixture-epochs" not in short and "Warning" not in short
    with pytest.raises(InputError, match="both steps and batch_size"):
        m.report(tmp_path / "x.html", steps=10)
    assert not math.isnan(sum(epochs.values()))
