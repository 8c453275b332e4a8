"""Masked-byte pretraining (BERT-style) on the files of this Python installation, through the training loader.

The standard library's files are read as raw bytes (``n_bytes=1``) in ``concat`` style: per class one
stream cut into windows of ``--seqlen`` bytes. ``ds.set_mlm_mode()`` makes the ``"mlm"`` query mask 15% of
the content bytes (80% MASK, 10% random, 10% kept); the loader fetches every batch with its epoch, so
each epoch sees new masks, and a resumed run sees bit-identical ones. A small Transformer encoder learns to
predict the masked bytes; the loss is printed as it falls (from ln(256) ~ 5.5 for a uniform guess).

Run (a few minutes on 2 CPU cores; ``--small`` for a quick run)::

    python examples/pretrain_mlm.py
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from consumer import Consumer
from consumer.cli.main import stdlib_corpus
from consumer.fetch.columns import IGNORE_INDEX


class ByteEncoder(nn.Module):
    """Token + position embeddings -> Transformer encoder -> a linear head over the vocabulary."""

    def __init__(self, vocab_size: int, seqlen: int, dim: int = 64, layers: int = 2, heads: int = 4):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, dim)
        self.pos = nn.Parameter(torch.zeros(1, seqlen, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size)

    def forward(self, tokens: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, L, V]``; PAD positions (``attention_mask == 0``) are not attended to."""
        x = self.tok(tokens) + self.pos[:, :tokens.shape[1]]
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        return self.head(self.norm(x))


def main(argv: list[str] | None = None) -> tuple[float, float]:
    """Pretrain; print the loss as it goes; return (mean loss of the first, of the last 10% of steps)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-files", type=int, default=150, help="files per file type at most")
    p.add_argument("--seqlen", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=400, help="optimizer steps (the loader crosses epochs as needed)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads of the training loop (default 1: the loader workers use the other cores)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--small", action="store_true", help="a quick run: 20 files per type, 16 x 64 bytes, 60 steps")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.small:
        args.max_files, args.steps = min(args.max_files, 20), min(args.steps, 60)
        args.batch_size, args.seqlen = min(args.batch_size, 16), min(args.seqlen, 64)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    ds = Consumer(stdlib_corpus(max_per_class=args.max_files), style="concat", n_bytes=1, seqlen=args.seqlen,
                  metadata=None, seed=args.seed)
    ds.set_mlm_mode(mask_frequency=0.15)
    print(f"{ds!r}: {len(ds)} windows of {ds.seqlen} bytes, vocabulary {ds.vocab.size}")
    loader = ds.dataloader(args.batch_size, query="mlm", num_workers=args.workers,
                           persistent_workers=args.workers > 0, drop_last=True)
    model = ByteEncoder(ds.vocab.size, ds.seqlen)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, min(50, args.steps // 5))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)
    losses: list[float] = []
    bar = tqdm(total=args.steps, disable=args.quiet)
    t0 = time.perf_counter()
    tokens = 0
    while len(losses) < args.steps:
        for batch in loader:
            logits = model(batch["input_array"], batch["attention_mask"])
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            tokens += int(batch["attention_mask"].sum())
            bar.update(1)
            bar.set_postfix(epoch=loader.epoch, loss=f"{np.mean(losses[-20:]):.3f}")
            if len(losses) % max(1, args.steps // 10) == 0:
                tqdm.write(f"step {len(losses):5d}  epoch {loader.epoch}  loss {np.mean(losses[-20:]):.4f}")
            if len(losses) == args.steps:
                break
    bar.close()
    seconds = time.perf_counter() - t0
    k = max(1, args.steps // 10)
    first, last = float(np.mean(losses[:k])), float(np.mean(losses[-k:]))
    print(f"{args.steps} steps in {seconds:.1f} s ({tokens / seconds:.0f} tokens/s); masked-byte loss "
          f"{first:.3f} -> {last:.3f} (uniform guess: ln 256 = {math.log(256):.3f})")
    return first, last


if __name__ == "__main__":
    main()
