"""Proof that the document columns give the right attention: FlexAttention with a ``document_ids`` mask, and plain
SDPA over the ``cu_seqlens`` segments, both equal attention computed on each document piece alone.

Real datasets (two classes of files of random sizes; ``diff`` with ``long_files="windows"``, ``concat`` and
``packed`` rows) are fetched with ``["causal", "document_ids", "cu_seqlens", "max_seqlen", "attention_mask"]``.
Before any attention is computed, the pieces that ``document_ids`` marks are checked against the files themselves
(each piece is a contiguous run of one file's bytes and its EOF; every piece but a row's last ends with that EOF),
so the reference below (SDPA ``is_causal=True`` per piece) is attention over the true documents, not over whatever
the columns say. A mask that ignores the documents (plain causal) is shown to be caught.

FlexAttention runs eagerly on CPU (torch runs its unfused implementation through dynamo's eager backend, no C++
compiler needed); it warns once that this is slower than ``torch.compile(flex_attention)``, which does not matter
at these sizes, so the warning is filtered.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from consumer import Consumer
from consumer.tokens.index import STYLES

flex = pytest.importorskip("torch.nn.attention.flex_attention", reason="torch has no FlexAttention")
create_block_mask, flex_attention = flex.create_block_mask, flex.flex_attention

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

HEADS, HEAD_DIM, ROWS = 2, 16, 6
QUERY = ["causal", "document_ids", "cu_seqlens", "max_seqlen", "attention_mask"]
STYLE_OPTIONS = {"diff": {"long_files": "windows"}, "concat": {}, "packed": {}}
CASES = [(style, seed, seqlen) for style in ("diff", "concat", "packed")
         for seed, seqlen in ((0, 64), (1, 200), (2, 96))]


def _skip_unless_style(style: str) -> None:
    if style not in STYLES:
        pytest.skip(f"style {style!r} is not available yet ({sorted(STYLES)})")


def _corpus(root: Path, seed: int, seqlen: int) -> dict[str, list[str]]:
    """Two classes of 4..9 files each; sizes from empty to ~3 rows, most shorter than a row (so rows hold several)."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[str]] = {}
    for cls in ("left", "right"):
        (root / cls).mkdir(parents=True)
        out[cls] = []
        for i in range(int(rng.integers(4, 10))):
            n = int(rng.integers(0, seqlen // 2)) if rng.random() < 0.75 else int(rng.integers(seqlen // 2, 3 * seqlen))
            path = root / cls / f"{i}.bin"
            path.write_bytes(rng.integers(0, 256, size=n, dtype=np.uint8).tobytes())
            out[cls].append(str(path))
    return out


def _batch(tmp_path: Path, style: str, seed: int, seqlen: int) -> tuple[dict[str, torch.Tensor], Consumer, list[str]]:
    _skip_unless_style(style)
    fps = _corpus(tmp_path / "data", seed, seqlen)
    ds = Consumer(fps, style=style, n_bytes=1, seqlen=seqlen, metadata=None, cache_dir=False, seed=seed,
                  **STYLE_OPTIONS[style])
    rng = np.random.default_rng(seed + 100)
    ids = rng.choice(len(ds), size=min(ROWS, len(ds)), replace=False)
    batch = ds.fetch(ids, QUERY)
    eof = ds.vocab.eof
    # each file as a string of token ids (n_bytes=1: a byte's id is its value), its EOF last
    files = ["".join(map(chr, Path(p).read_bytes())) + chr(eof) for ps in fps.values() for p in ps]
    return batch, ds, files


def _pieces(doc: torch.Tensor) -> list[tuple[int, int, int]]:
    """``(row, start, end)`` of every run of one document id >= 0, row-major, found from ``document_ids`` alone."""
    out = []
    for b, row in enumerate(doc.tolist()):
        j = 0
        while j < len(row):
            if row[j] < 0:
                j += 1
                continue
            k = j
            while k < len(row) and row[k] == row[j]:
                k += 1
            out.append((b, j, k))
            j = k
    return out


def _check_pieces_are_documents(batch: dict[str, torch.Tensor], files: list[str], eof: int) -> list:
    """The pieces of ``document_ids`` are the documents of the rows, checked against the files' bytes."""
    doc, tokens, mask = batch["document_ids"], batch["input_array"], batch["attention_mask"]
    assert torch.equal(doc >= 0, mask.bool())  # -1 exactly on PAD
    pieces = _pieces(doc)
    for b in range(doc.shape[0]):  # row-local ordinals 0, 1, 2, ... in order, each used by one run only
        ordinals = [int(doc[b, s]) for r, s, _ in pieces if r == b]
        assert ordinals == list(range(len(ordinals)))
    labels = batch["labels"]
    for i, (b, s, e) in enumerate(pieces):
        seq = tokens[b, s:e].tolist()
        assert eof not in seq[:-1], "a piece runs past its document's EOF"
        text = "".join(map(chr, seq))
        assert any(text in f for f in files), "a piece is not a contiguous run of one file"
        lab = labels[b, s:e].tolist()
        assert all(y in (-100, x) for y, x in zip(lab[:-1], seq[1:])), "a label is not the next token"
        if lab[-1] != -100:  # the piece's last label: the document's next token, read past the row's end
            assert e == doc.shape[1] and any(text + chr(lab[-1]) in f for f in files)
        last_of_row = i + 1 == len(pieces) or pieces[i + 1][0] != b
        if not last_of_row:
            assert seq[-1] == eof, "a piece ends before its document does"
    # no label crosses a piece: a scored position's next token is in its piece (or past the row's end)
    scored = labels != -100
    same_next = torch.ones_like(scored)
    same_next[:, :-1] = doc[:, 1:] == doc[:, :-1]
    assert not (scored & ~same_next).any()
    assert not (scored & (doc < 0)).any()
    return pieces


def _qkv(tokens: torch.Tensor, vocab_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[B, H, L, D]`` q, k, v: a fixed random table per token id plus per-position noise (float32)."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(vocab_size, 3, HEADS, HEAD_DIM, generator=g)
    x = table[tokens] + 0.5 * torch.randn(*tokens.shape, 3, HEADS, HEAD_DIM, generator=g)  # [B, L, 3, H, D]
    q, k, v = x.permute(2, 0, 3, 1, 4).unbind(0)
    return q.contiguous(), k.contiguous(), v.contiguous()


def _reference(q, k, v, pieces) -> torch.Tensor:
    """Causal attention on each piece alone (SDPA, ``is_causal=True``); zeros on PAD."""
    out = torch.zeros_like(q)
    for b, s, e in pieces:
        out[b, :, s:e] = F.scaled_dot_product_attention(q[b:b + 1, :, s:e], k[b:b + 1, :, s:e], v[b:b + 1, :, s:e],
                                                        is_causal=True)[0]
    return out


def _flex(q, k, v, doc: torch.Tensor, documents: bool = True) -> torch.Tensor:
    B, _, L, _ = q.shape

    # PAD (doc -1) positions: a PAD query is given no key at all (`doc[b, q] >= 0`), so FlexAttention returns 0 for
    # it; PAD keys are never seen by a real query since its own id is >= 0 and differs from -1. PAD outputs have no
    # meaning (no label is scored there), so they are left out of every comparison; they are only checked to be 0
    # (and finite), i.e. a fully masked row does not turn into NaN.
    def document_causal(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx) & (doc[b, q_idx] >= 0)

    def causal_only(b, h, q_idx, kv_idx):  # the wrong mask: attends across document boundaries
        return (q_idx >= kv_idx) & (doc[b, q_idx] >= 0) & (doc[b, kv_idx] >= 0)

    block_mask = create_block_mask(document_causal if documents else causal_only, B, None, L, L, device="cpu")
    return flex_attention(q, k, v, block_mask=block_mask)


@pytest.mark.parametrize("style,seed,seqlen", CASES)
def test_flex_document_mask_equals_attention_per_document(tmp_path, style, seed, seqlen):
    batch, ds, files = _batch(tmp_path, style, seed, seqlen)
    pieces = _check_pieces_are_documents(batch, files, ds.vocab.eof)
    q, k, v = _qkv(batch["input_array"], ds.vocab.size, seed)
    ref = _reference(q, k, v, pieces)
    got = _flex(q, k, v, batch["document_ids"])
    real = batch["attention_mask"].bool()  # [B, L]
    diff = (got - ref).abs().permute(0, 2, 1, 3)[real]  # [non-PAD tokens, H, D]
    assert diff.numel() and float(diff.max()) <= 1e-5
    pad = got.permute(0, 2, 1, 3)[~real]
    assert torch.isfinite(pad).all() and not pad.any()


@pytest.mark.parametrize("style,seed,seqlen", CASES)
def test_cu_seqlens_segments_equal_attention_per_document(tmp_path, style, seed, seqlen):
    batch, ds, files = _batch(tmp_path, style, seed, seqlen)
    pieces = _check_pieces_are_documents(batch, files, ds.vocab.eof)
    q, k, v = _qkv(batch["input_array"], ds.vocab.size, seed)
    ref = _reference(q, k, v, pieces)
    real = batch["attention_mask"].bool()
    cu, max_seqlen = batch["cu_seqlens"], batch["max_seqlen"]
    assert cu.dtype == torch.int32 and cu.dim() == 1 and int(cu[0]) == 0 and bool((cu[1:] > cu[:-1]).all())
    assert int(cu[-1]) == int(batch["attention_mask"].sum())
    lengths = (cu[1:] - cu[:-1]).tolist()
    assert lengths == [e - s for _, s, e in pieces]  # one segment per piece, row-major
    assert max_seqlen.dim() == 0 and max_seqlen.dtype == torch.int32 and int(max_seqlen) == max(lengths)
    # the varlen layout: the non-PAD tokens flattened row-major ([N, H, D]), cut at cu_seqlens
    flat = [t.permute(0, 2, 1, 3)[real] for t in (q, k, v)]
    out = torch.empty_like(flat[0])
    bounds = cu.tolist()
    for a, z in zip(bounds[:-1], bounds[1:]):
        seg = [t[a:z].transpose(0, 1).unsqueeze(0) for t in flat]  # [1, H, n, D]
        out[a:z] = F.scaled_dot_product_attention(*seg, is_causal=True)[0].transpose(0, 1)
    expected = ref.permute(0, 2, 1, 3)[real]
    assert float((out - expected).abs().max()) <= 1e-5


@pytest.mark.parametrize("style", ["concat", "packed"])
def test_a_mask_that_ignores_documents_is_caught(tmp_path, style):
    batch, ds, files = _batch(tmp_path, style, 3, 128)
    pieces = _check_pieces_are_documents(batch, files, ds.vocab.eof)
    rows = [b for b, _, _ in pieces]
    assert max(rows.count(b) for b in set(rows)) >= 2, "the batch needs a row with two pieces"
    q, k, v = _qkv(batch["input_array"], ds.vocab.size, 3)
    ref = _reference(q, k, v, pieces)
    real = batch["attention_mask"].bool()
    good = (_flex(q, k, v, batch["document_ids"]) - ref).abs().permute(0, 2, 1, 3)[real]
    bad = (_flex(q, k, v, batch["document_ids"], documents=False) - ref).abs().permute(0, 2, 1, 3)[real]
    assert float(good.max()) <= 1e-5
    assert float(bad.max()) > 1e-3
    # and only the pieces after a row's first differ: its first piece sees no other document in either mask
    first = torch.zeros_like(real)
    for b, s, e in pieces:
        if s == 0:
            first[b, s:e] = True
    wrong = (_flex(q, k, v, batch["document_ids"], documents=False) - ref).abs().permute(0, 2, 1, 3)
    assert float(wrong[first].max()) <= 1e-5
