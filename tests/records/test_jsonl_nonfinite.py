"""Records holding NaN or Infinity in another field (Python's ``json.dumps`` writes them; they are not JSON): the
scanner's first tier (Arrow) accepts them, and every read of the texts must too (msgspec refuses them: the record
is read with them as null), one document at a time, in batches, and when packed; a record that is bad for another
reason stays bad, named by its line."""

from __future__ import annotations

import json

import pytest

from consumer import Consumer
from consumer.errors import FormatError


def _records(n: int) -> list[dict]:
    out = []
    for i in range(n):
        extra = [{"x": float("nan")}, {"y": [float("inf"), -float("inf")]}, {"z": {"deep": [float("nan")]}}, {}][i % 4]
        out.append({"text": f"doc {i} é", **extra})
    return out


@pytest.mark.parametrize("n", [3, 40])  # a few lines (decoded one by one) and a batch (decoded in one call)
def test_records_with_nan_or_infinity_read_back(tmp_path, n):
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in _records(n)) + "\n", encoding="utf-8")
    assert "NaN" in path.read_text() and "Infinity" in path.read_text()
    ds = Consumer(str(path), documents="jsonl", cache_dir=tmp_path / "c", seqlen=32)
    want = [f"doc {i} é".encode() for i in range(n)]
    assert [ds.decode(ds.document_tokens(i)) for i in range(n)] == want  # one at a time
    rows = ds[list(range(len(ds)))]["input_array"]  # one batch
    assert [ds.decode(r) for r in rows] == want
    ds.pack(str(tmp_path / "p"))
    back = Consumer.from_packed(str(tmp_path / "p"), seqlen=32, cache_dir=False)
    assert [back.decode(back.document_tokens(i)) for i in range(n)] == want


def test_a_record_bad_otherwise_stays_bad(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "fine", "x": NaN}\n{"other": NaN}\n')
    with pytest.raises(FormatError, match="line 2"):
        Consumer(str(path), documents="jsonl", cache_dir=False)
