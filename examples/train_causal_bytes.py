"""Train a small byte-level causal Transformer on the files of this Python installation, with document masks.

The demo corpus (``consumer demo``'s: the standard library's files, one class per file type) is read as raw
bytes (``n_bytes=1``, no type header), split by file into train and held-out files (``ds.split``), and cut into
rows of ``--seqlen`` bytes in one of three ways (``--rows``):

- ``packed`` (the default): whole files packed into rows by best-fit decreasing (a file longer than a row is cut
  into row-sized pieces), so most rows hold several files and little PAD;
- ``concat``: each class's files as one stream cut into rows (a row's first file usually began in the row before);
- ``diff``: one file per row (``long_files="windows"``: a long file fills several rows), the rest of the row PAD.

The loader (``ds.dataloader``) fetches ``["causal", "document_ids", "position_ids"]``: next-byte ``labels`` that
never cross from one file to the next, each token's row-local ``document_ids`` and ``position_ids`` restarting at
0 in each file. Attention is causal *inside each file only*: a document mask made from ``document_ids``, as a
FlexAttention block mask built per batch where FlexAttention can train (CUDA; it runs eagerly here, unfused:
``torch.compile(flex_attention)`` is the fast form); on CPU, where torch's FlexAttention has no backward pass
(torch 2.13 raises ``NotImplementedError``), the same mask as a boolean ``[B, 1, L, L]`` mask for
``scaled_dot_product_attention``. The positions (RoPE) come from ``position_ids``. On CPU the final held-out
evaluation (no gradient) also runs through FlexAttention, as a cross-check that both forms of the mask agree.

It prints held-out **bits per byte** (mean cross-entropy over the scored labels / ln 2; a file's EOF is scored
too) before and after training, against an order-0 baseline: the byte histogram of the train split's labels
(add-one smoothed), scored on the same held-out labels. It exits with status 1 if the model did not end below it.

Run (about a minute on 2 idle CPU cores, 3 when they are busy)::

    python examples/train_causal_bytes.py                  # packed rows
    python examples/train_causal_bytes.py --rows concat    # the same model and steps on concat rows
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from consumer import Consumer
from consumer.cli.demo import stdlib_corpus
from consumer.fetch.columns import IGNORE_INDEX

try:  # FlexAttention (torch >= 2.5)
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
except ImportError:  # pragma: no cover - older torch: the boolean SDPA mask everywhere
    BlockMask = create_block_mask = flex_attention = None

QUERY = ["causal", "document_ids", "position_ids"]
LN2 = math.log(2.0)


def document_mask(doc: torch.Tensor, flex: bool) -> torch.Tensor | BlockMask:
    """Causal attention inside each document piece of each row, from ``document_ids`` ``[B, L]`` (-1 on PAD).

    PAD (-1) attends to the PAD before it and to itself: no real token's id is -1, so no real token sees PAD, and
    no row of the mask is empty (an all-masked row gives NaN in SDPA); PAD positions carry no label.
    """
    B, L = doc.shape
    if flex:
        def same_document_causal(b, h, q, kv):
            return (doc[b, q] == doc[b, kv]) & (q >= kv)
        return create_block_mask(same_document_causal, B, None, L, L, device=doc.device)
    causal = torch.ones(L, L, dtype=torch.bool, device=doc.device).tril()
    return ((doc[:, :, None] == doc[:, None, :]) & causal)[:, None]  # [B, 1, L, L]


def flex_trains_on(device: torch.device) -> bool:
    """Whether FlexAttention has a backward pass on ``device`` (torch 2.13 has none on CPU: it raises)."""
    if flex_attention is None:
        return False
    x = torch.zeros(1, 1, 128, 16, device=device, requires_grad=True)
    try:
        flex_attention(x, x, x).sum().backward()
    except NotImplementedError:
        return False
    return True


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of ``x`` ``[B, H, L, D]`` (halves rotated; ``cos``/``sin`` ``[B, 1, L, D/2]``)."""
    a, b = x.chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class Block(nn.Module):
    """Pre-norm Transformer block: document-masked self-attention with RoPE, then a GELU MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | BlockMask, cos: torch.Tensor,
                sin: torch.Tensor) -> torch.Tensor:
        B, L, C = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, L, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        if isinstance(mask, torch.Tensor):
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            y = flex_attention(q, k, v, block_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(B, L, C))
        return x + self.mlp(self.norm2(x))


class ByteLM(nn.Module):
    """Token embedding -> blocks -> norm -> logits tied to the embedding."""

    def __init__(self, vocab_size: int, dim: int = 128, layers: int = 2, heads: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        half = dim // heads // 2
        self.register_buffer("inv_freq", 10000.0 ** (-torch.arange(half, dtype=torch.float32) / half), persistent=False)
        nn.init.normal_(self.embed.weight, std=0.02)

    def forward(self, tokens: torch.Tensor, document_ids: torch.Tensor, position_ids: torch.Tensor,
                flex: bool = False) -> torch.Tensor:
        """Logits ``[B, L, V]``."""
        angle = position_ids[:, None, :, None].float() * self.inv_freq  # [B, 1, L, D/2]: positions restart per file
        cos, sin = angle.cos(), angle.sin()
        mask = document_mask(document_ids, flex)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask, cos, sin)
        return self.norm(x) @ self.embed.weight.T


def nats(model: ByteLM, batch: dict, flex: bool = False) -> tuple[torch.Tensor, int]:
    """Summed cross-entropy (nats) over the scored labels of ``batch``, and how many there are."""
    logits = model(batch["input_array"], batch["document_ids"], batch["position_ids"], flex=flex)
    labels = batch["labels"]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX,
                           reduction="sum")
    return loss, int((labels != IGNORE_INDEX).sum())


def train_step(model: ByteLM, opt: torch.optim.Optimizer, sched: torch.optim.lr_scheduler.LRScheduler, batch: dict,
               flex: bool) -> float:
    """One optimisation step on ``batch`` (already on the model's device): the mean scored loss, in bits per byte."""
    loss, n = nats(model, batch, flex)
    loss = loss / max(n, 1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    return loss.item() / LN2


@torch.no_grad()
def bits_per_byte(model: ByteLM, batches: list[dict], flex: bool = False) -> float:
    model.eval()
    total, count = 0.0, 0
    for batch in batches:
        loss, n = nats(model, batch, flex)
        total, count = total + float(loss), count + n
    model.train()
    return total / count / LN2


def label_counts(ds: Consumer, vocab_size: int, chunk: int = 4096) -> np.ndarray:
    """Histogram of the scored labels of every row of ``ds`` (one pass over the split)."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    for lo in range(0, len(ds), chunk):
        labels = ds.fetch_numpy(np.arange(lo, min(lo + chunk, len(ds))), "causal")["labels"]
        counts += np.bincount(labels[labels != IGNORE_INDEX], minlength=vocab_size)
    return counts


def unigram_bits(train_counts: np.ndarray, batches: list[dict]) -> float:
    """Order-0 baseline: cross-entropy (bits) of the held-out labels under the add-one smoothed train histogram."""
    logp = np.log2((train_counts + 1) / (train_counts.sum() + train_counts.size))
    labels = np.concatenate([b["labels"].numpy().ravel() for b in batches])
    return float(-logp[labels[labels != IGNORE_INDEX]].mean())


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", choices=("packed", "concat", "diff"), default="packed", help="how files fill rows")
    p.add_argument("--steps", type=int, default=250, help="optimizer steps (default 250: ~1 min on 2 idle cores)")
    p.add_argument("--seqlen", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--max-files", type=int, default=200, help="files per file type at most (the demo's default)")
    p.add_argument("--eval-rows", type=int, default=256, help="held-out rows scored (the same rows every time)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", default=None, help="the dataset cache (default: the library's)")
    p.add_argument("--attention", choices=("auto", "flex", "sdpa"), default="auto",
                   help="training attention: auto = FlexAttention where it has a backward pass (CUDA), else SDPA")
    p.add_argument("--no-check", dest="check", action="store_false",
                   help="exit 0 even if the model did not end below the unigram baseline")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    t_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")  # eager is fine here
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    flex_train = args.attention != "sdpa" and flex_trains_on(device)
    if args.attention == "flex" and not flex_train:
        sys.exit(f"--attention flex: FlexAttention cannot train on {device.type} with this torch ({torch.__version__})")

    options = {} if args.rows == "concat" else {"long_files": "windows"}
    ds = Consumer(stdlib_corpus(max_per_class=args.max_files), style=args.rows, n_bytes=1, seqlen=args.seqlen,
                  metadata=None, seed=args.seed, cache_dir=args.cache_dir, **options)
    parts = ds.split({"train": 0.9, "val": 0.1}, seed=args.seed)  # by file, per class: no file on both sides
    train, val = parts["train"], parts["val"]
    print(f"{args.rows} rows of {ds.seqlen} bytes: train {len(train)} rows, held-out {len(val)} rows "
          f"({len(val.files)} files)")

    rng = np.random.default_rng(args.seed)
    eval_ids = np.sort(rng.choice(len(val), size=min(args.eval_rows, len(val)), replace=False))
    eval_batches = [val.fetch(chunk, QUERY) for chunk in np.array_split(eval_ids, -(-eval_ids.size // 64))]
    eval_batches = [{k: v.to(device) for k, v in b.items()} for b in eval_batches]
    unigram = unigram_bits(label_counts(train, ds.vocab.size), [{"labels": b["labels"].cpu()} for b in eval_batches])
    scored = sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in eval_batches)
    real = sum(int((b["document_ids"] >= 0).sum()) for b in eval_batches)
    print(f"held-out: {len(eval_batches)} batches, {scored} scored labels; PAD is "
          f"{1 - real / sum(b['document_ids'].numel() for b in eval_batches):.2%} of the tokens")

    model = ByteLM(ds.vocab.size, dim=args.dim, layers=args.layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = max(1, args.steps // 10)

    def schedule(s: int) -> float:  # linear warmup, then cosine decay to a tenth
        return min(1.0, (s + 1) / warmup) * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    start_bits = bits_per_byte(model, eval_batches)
    print(f"step 0: val bits/byte {start_bits:.3f} (unigram {unigram:.3f}); training with "
          f"{'FlexAttention block masks' if flex_train else 'SDPA boolean document masks'} on {device.type}")

    loader = train.dataloader(args.batch_size, query=QUERY, seed=args.seed, drop_last=True)
    step, losses, t0 = 0, [], time.perf_counter()
    every = max(1, args.steps // 6)
    while step < args.steps:
        for batch in loader:
            losses.append(train_step(model, opt, sched, {k: v.to(device) for k, v in batch.items()}, flex_train))
            step += 1
            if step % every == 0 or step == args.steps:
                print(f"step {step}: train bits/byte {np.mean(losses[-every:]):.3f} (epoch {loader.epoch}, "
                      f"{time.perf_counter() - t0:.0f} s)", flush=True)
            if step == args.steps:
                break
    train_s = time.perf_counter() - t0

    end_bits = bits_per_byte(model, eval_batches)
    if flex_attention is not None and device.type == "cpu":  # the other form of the same mask, same figure
        flex_bits = bits_per_byte(model, eval_batches, flex=True)
        print(f"held-out through FlexAttention block masks: {flex_bits:.4f} bits/byte (SDPA mask: {end_bits:.4f})")
    below = end_bits < unigram
    print(f"{step} steps in {train_s:.0f} s; train bits/byte {np.mean(losses[:every]):.3f} -> "
          f"{np.mean(losses[-every:]):.3f}; total {time.perf_counter() - t_start:.0f} s")
    print(f"val bits/byte {start_bits:.2f} -> {end_bits:.2f} (unigram {unigram:.2f}): "
          f"{'below' if below else 'NOT below'} the unigram baseline")
    return 0 if below or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
