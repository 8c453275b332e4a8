"""Train a byte-level classifier straight from a JSONL file with ``text`` and ``label`` fields.

The example writes its own data first: ``--records`` JSON records of three kinds of text (English-like prose,
German-like prose with umlauts, Python-like code), each ``{"text": ..., "label": ...}``, one per line. Then one
``Consumer(..., documents="jsonl", class_field="label")`` reads the records in place (no file per document), the
dataset is split per class into train and held-out records, and a small embedding + 1-D convolution + max-pool
network learns the label from the raw UTF-8 bytes (``n_bytes=1``). It prints the held-out accuracy.

Run (under a minute on 2 CPU cores)::

    python examples/train_from_jsonl.py
    python examples/train_from_jsonl.py --jsonl my.jsonl      # your own file: {"text": ..., "label": ...} per line
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from consumer import Consumer

WORDS = {
    "english": "the of and to in is that it was for on are with as his they be at one have this from or had by "
               "word but what some we can out other were all there when up use your how said an each she".split(),
    "german": "der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als auch es an werden "
              "aus er hat daß sie nach wird bei über große schön müssen können würde".split(),
    "code": "def return self import from if else for in while class None True False lambda yield (x) [i] {k: v} "
            "== != += -> print(x) len(a) range(n) __init__ try: except".split(),
}


def write_records(path: Path, n: int, seed: int) -> None:
    """``n`` records of the three kinds, as JSONL."""
    rng = np.random.default_rng(seed)
    labels = list(WORDS)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            label = labels[int(rng.integers(len(labels)))]
            words = WORDS[label]
            text = " ".join(words[int(k)] for k in rng.integers(len(words), size=int(rng.integers(8, 60))))
            f.write(json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n")


class ByteCNN(nn.Module):
    """Embedding -> 1-D convolution -> ReLU -> global max pool -> linear."""

    def __init__(self, vocab_size: int, n_classes: int, pad_id: int, emb: int = 16, channels: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb, padding_idx=pad_id)
        self.conv = nn.Conv1d(emb, channels, kernel_size=5, padding=2)
        self.head = nn.Linear(channels, n_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Class logits ``[B, C]`` of token rows ``[B, L]``."""
        h = torch.relu(self.conv(self.embed(tokens).transpose(1, 2)))
        return self.head(h.amax(dim=-1))


def accuracy(model: nn.Module, ds: Consumer, batch_size: int) -> float:
    """Share of ``ds``'s samples whose label the model predicts."""
    model.eval()
    right = total = 0
    with torch.no_grad():
        for batch in ds.dataloader(batch_size, query="supervised", shuffle=False):
            right += int((model(batch["input_array"]).argmax(dim=1) == batch["class"]).sum())
            total += int(batch["class"].numel())
    model.train()
    return right / max(total, 1)


def main(argv: list[str] | None = None) -> float:
    """Write (or take) the JSONL file, train, print and return the held-out accuracy."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jsonl", default=None, help="a JSONL file with text and label fields (default: write one)")
    p.add_argument("--records", type=int, default=3000, help="records to write (default 3000)")
    p.add_argument("--seqlen", type=int, default=256, help="bytes per sample (default 256)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.jsonl) if args.jsonl else Path(tmp) / "records.jsonl"
        if not args.jsonl:
            write_records(path, args.records, args.seed)
        t0 = time.perf_counter()
        ds = Consumer(str(path), documents="jsonl", class_field="label", n_bytes=1, seqlen=args.seqlen,
                      style="diff", seed=args.seed, cache_dir=Path(tmp) / "cache")
        print(f"{ds!r} from {path.name} in {time.perf_counter() - t0:.2f} s")
        parts = ds.split({"train": 0.8, "val": 0.2}, seed=args.seed)
        train, val = parts["train"], parts["val"]
        model = ByteCNN(ds.vocab.size, ds.n_classes, ds.vocab.pad)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        loss_fn = nn.CrossEntropyLoss()
        for epoch in range(args.epochs):
            steps = 0
            for batch in train.dataloader(args.batch_size, query="supervised", seed=args.seed):
                loss = loss_fn(model(batch["input_array"]), batch["class"])
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps += 1
            print(f"epoch {epoch}: {steps} steps, last loss {loss.item():.3f}")
        acc = accuracy(model, val, 64)
        print(f"held-out accuracy: {acc:.3f} on {len(val)} records ({', '.join(val.classes)})")
        return acc


if __name__ == "__main__":
    main()
