"""The "causal" query and the document columns against plain references written out position by position: labels
(the next token of the same document, scored by loss_on), position_ids, document_ids, cu_seqlens, max_seqlen and
loss_mask, over every style, n_bytes and header mode; the loader's workers carry them (cu_seqlens through the ring)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer
from consumer.errors import QueryError
from consumer.tokens.index import STYLES

STYLE_CASES = [("diff", "truncate"), ("diff", "windows"), ("concat", "truncate")] + \
    ([("packed", "windows")] if "packed" in STYLES else [])
KINDS_ALL = ("content", "eof", "header", "sep")


def _corpus(root: Path, sizes: list[int], seed: int) -> Path:
    rng = np.random.default_rng(seed)
    for i, n in enumerate(sizes):
        folder = root / ("a" if i % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes() if i % 3 else (b"plain text line\n" * n)[:n]
        (folder / f"f{i:03d}.bin").write_bytes(data)
    return root


def _pieces(ds: Consumer, s: int) -> list[tuple[int, int, int, int]]:
    """(document, start, length, column) of each piece of sample ``s``."""
    ix = ds.index
    return [(int(ix.seg_doc[g]), int(ix.seg_start[g]), int(ix.seg_len[g]), int(ix.seg_col[g]))
            for g in range(int(ix.seg_ptr[s]), int(ix.seg_ptr[s + 1]))]


def _kind(ds: Consumer, doc: int, p: int) -> str:
    d = ds.documents
    cs = int(d.content_start[doc]) if d.with_header else 0
    if d.with_header and p < cs - 1:
        return "header"
    if d.with_header and p == cs - 1:
        return "sep"
    return "eof" if p == int(d.doc_len[doc]) - 1 else "content"


def reference(ds: Consumer, s: int, loss_on: tuple[str, ...]) -> dict[str, np.ndarray]:
    """One sample's causal columns, written out position by position from the documents' token streams."""
    L = ds.seqlen
    row = np.full(L, ds.vocab.pad, dtype=np.int64)
    labels = np.full(L, -100, dtype=np.int64)
    doc_ids = np.full(L, -1, dtype=np.int32)
    pos = np.zeros(L, dtype=np.int64)
    pieces = _pieces(ds, s)
    for k, (doc, start, n, col) in enumerate(pieces):
        toks = ds.document_tokens(doc)
        row[col:col + n] = toks[start:start + n]
        doc_ids[col:col + n] = k
        pos[col:col + n] = np.arange(n)
        for t in range(n):
            q = start + t + 1  # the next token's position in its document
            last_piece = k == len(pieces) - 1
            if q < toks.size and (t + 1 < n or last_piece) and _kind(ds, doc, q) in loss_on:
                labels[col + t] = toks[q]
    return {"input_array": row, "labels": labels, "document_ids": doc_ids, "position_ids": pos,
            "loss_mask": (labels != -100).astype(np.float32)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 300), min_size=1, max_size=9), seqlen=st.integers(8, 120),
       n_bytes=st.sampled_from([1, 2, 3]), header=st.booleans(), case=st.sampled_from(STYLE_CASES),
       loss_on=st.sampled_from([("content", "eof"), ("content",), KINDS_ALL, ("eof", "sep")]),
       seed=st.integers(0, 3))
def test_causal_and_document_columns_equal_the_reference(tmp_path_factory, sizes, seqlen, n_bytes, header, case,
                                                          loss_on, seed) -> None:
    root = _corpus(tmp_path_factory.mktemp("c"), sizes, seed)
    style, long_files = case
    ds = Consumer(str(root), style=style, long_files=long_files, n_bytes=n_bytes, seqlen=seqlen, cache_dir=False,
                  metadata="file" if header else None)
    ds.set_causal_mode(loss_on=loss_on)
    ids = np.arange(len(ds))
    got = ds.fetch_numpy(ids, ["causal", "document_ids", "position_ids", "loss_mask", "cu_seqlens", "max_seqlen",
                               "attention_mask"])
    for s in ids.tolist():
        want = reference(ds, s, loss_on)
        for name, value in want.items():
            np.testing.assert_array_equal(got[name][s], value, err_msg=f"{name} of sample {s}")
    real = got["attention_mask"].astype(bool)
    lengths = [n for s in ids.tolist() for (_, _, n, _) in _pieces(ds, s)]
    assert got["cu_seqlens"].tolist() == np.concatenate([[0], np.cumsum(lengths)]).tolist()
    assert got["cu_seqlens"][-1] == real.sum() and got["cu_seqlens"].dtype == np.int32
    assert int(got["max_seqlen"]) == max(lengths) and got["max_seqlen"].shape == ()
    # the bare causal query is the same input and labels, and ds[...] hands them to torch
    bare = ds.fetch(ids[:2], "causal")
    assert set(bare) == {"input_array", "labels"}
    np.testing.assert_array_equal(bare["labels"].numpy(), got["labels"][:2])


def test_a_concat_row_s_last_label_is_the_next_window_s_first_token(tmp_path) -> None:
    """No position is lost: the label of a row's last column comes from the token after it (the next window's first
    token when the document goes on), not from a shorter row."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.bin").write_bytes(bytes(range(256)) * 3)
    ds = Consumer(str(tmp_path), style="concat", n_bytes=1, seqlen=100, metadata=None, cache_dir=False)
    got = ds.fetch_numpy(np.arange(len(ds)), "causal")
    rows = ds.fetch_numpy(np.arange(len(ds)))["input_array"]
    for r in range(len(ds) - 1):
        assert got["labels"][r, -1] == rows[r + 1, 0]
        np.testing.assert_array_equal(got["labels"][r, :-1], rows[r, 1:])
    assert (got["labels"] != -100).sum() == 256 * 3  # every byte but the first is predicted, and EOF


def test_causal_rows_of_a_packed_store_equal_those_of_the_files(tmp_path) -> None:
    root = _corpus(tmp_path / "data", [50, 400, 7, 260, 90], 1)
    files = Consumer(str(root), style="concat", n_bytes=2, seqlen=64, cache_dir=False)
    files.pack(str(tmp_path / "store"))
    store = Consumer.from_packed(str(tmp_path / "store"), style="concat", seqlen=64, cache_dir=False)
    query = ["causal", "document_ids", "position_ids", "cu_seqlens", "loss_mask"]
    a, b = files.fetch_numpy(np.arange(len(files)), query), store.fetch_numpy(np.arange(len(store)), query)
    for name in query[1:] + ["input_array", "labels"]:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_causal_over_megatron_rows_drops_the_extra_token_from_the_input(tmp_path) -> None:
    root = _corpus(tmp_path / "data", [120, 300, 80, 45], 2)
    ds = Consumer(str(root), style="concat", n_bytes=1, seqlen=32, sampling="megatron", metadata=None,
                  cache_dir=False)
    ids = np.arange(len(ds))
    text = ds.fetch_numpy(ids)["input_array"]
    got = ds.fetch_numpy(ids, ["causal", "document_ids", "position_ids"])
    assert got["input_array"].shape == (len(ds), 32) and text.shape == (len(ds), 33)
    np.testing.assert_array_equal(got["input_array"], text[:, :-1])
    eof = ds.vocab.eof
    for s in ids.tolist():  # the next token, except after an EOF (the next document's first token)
        want = np.where(text[s, :-1] == eof, -100, text[s, 1:])
        np.testing.assert_array_equal(got["labels"][s], want)
        starts = np.flatnonzero(np.r_[True, text[s, :-2] == eof])
        assert (got["position_ids"][s][starts] == 0).all() and got["document_ids"][s][-1] == starts.size - 1


def test_the_loader_carries_the_document_columns_through_its_workers(tmp_path) -> None:
    root = _corpus(tmp_path / "data", [30, 500, 70, 9, 260, 140, 33], 3)
    ds = Consumer(str(root), style="concat", n_bytes=1, seqlen=48, cache_dir=False)
    query = ["causal", "document_ids", "position_ids", "cu_seqlens", "max_seqlen", "loss_mask"]
    seen = []
    for workers in (0, 2):
        loader = ds.dataloader(4, query=query, seed=1, num_workers=workers)
        batches = list(loader)
        seen.append(batches)
        for batch in batches:
            assert str(batch["cu_seqlens"].dtype) == "torch.int32" and str(batch["loss_mask"].dtype) == "torch.float32"
            assert int(batch["cu_seqlens"][-1]) == int((batch["document_ids"] >= 0).sum())
            assert int(batch["max_seqlen"]) == int(batch["cu_seqlens"].diff().max())
    assert len(seen[0]) == len(seen[1]) > 1
    assert len({int(b["cu_seqlens"].numel()) for b in seen[1]}) > 1  # of a length that varies per batch
    for a, b in zip(*seen):
        assert a.keys() == b.keys()
        for name in a:
            assert a[name].equal(b[name]), name


def test_bad_queries_name_what_is_wrong(tmp_path) -> None:
    root = _corpus(tmp_path / "data", [30, 40], 0)
    ds = Consumer(str(root), style="concat", n_bytes=1, seqlen=16, cache_dir=False)
    with pytest.raises(QueryError, match=r"loss_on must name token kinds from \('content', 'eof', 'header', 'sep'\)"):
        ds.set_causal_mode(loss_on=("content", "bytes"))
    with pytest.raises(QueryError, match="loss_on"):
        ds.set_causal_mode(loss_on=())
    with pytest.raises(QueryError, match="'megatron' query .* needs sampling='megatron'"):
        ds.fetch_numpy(np.arange(2), "megatron")
    with pytest.raises(QueryError, match=r"column\(s\) \['output_tensor'\] have no meaning in a 'causal' query"):
        ds.fetch_numpy(np.arange(2), ["causal", "output_tensor"])
    with pytest.raises(QueryError, match="column.*tokens.*no meaning"):
        ds.fetch_numpy(np.arange(2), ["input_array", "tokens"])
    ds.set_mlm_mode(add_cls=True)
    with pytest.raises(QueryError, match="add_cls: a CLS token belongs to no document"):
        ds.fetch_numpy(np.arange(2), ["mlm", "document_ids"])


@pytest.mark.parametrize("style", [s for s, _ in STYLE_CASES if s != "diff"])
def test_mlm_rows_carry_the_same_document_ids(tmp_path, style) -> None:
    """MLM over packed or concat rows: the masks are those of the plain "mlm" query, and the documents are those of
    the rows (a model can keep attention inside them); supervised rows carry them too."""
    root = _corpus(tmp_path / "data", [30, 500, 70, 9, 260, 140, 33, 5, 77], 4)
    ds = Consumer(str(root), style=style, n_bytes=1, seqlen=96, cache_dir=False)
    ids = np.arange(len(ds))
    mlm = ds.fetch_numpy(ids, "mlm", epoch=3)
    both = ds.fetch_numpy(ids, ["mlm", "document_ids", "position_ids"], epoch=3)
    plain = ds.fetch_numpy(ids, ["input_array", "document_ids", "position_ids"])
    sup = ds.fetch_numpy(ids, ["supervised", "document_ids"])
    for name in mlm:
        np.testing.assert_array_equal(both[name], mlm[name])
    for name in ("document_ids", "position_ids"):
        np.testing.assert_array_equal(both[name], plain[name])
    np.testing.assert_array_equal(sup["document_ids"], plain["document_ids"])
    assert (plain["document_ids"].max(axis=1) >= 1).any()  # rows of several documents
    assert ((both["document_ids"] == -1) == (both["attention_mask"] == 0)).all()
