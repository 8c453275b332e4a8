"""Train a small MalConv-style byte classifier on the files of this Python installation, labelled by kind.

The files of the standard library (``.py`` sources, ``.pyc`` bytecode, text, data, shared libraries, images,
...) are split per class into train and held-out files (seeded, stratified), read as raw bytes
(``n_bytes=1``, the first ``--seqlen`` bytes of each file) and fed through ``ds.dataloader(...)``
(a resumable torch ``DataLoader``) to an embedding + gated 1-D convolution + global max pool network.

``metadata=None``: the libmagic header put in front of each file names its type ("Python script", "PNG
image", ...) and would give the label away; a file-type classifier must learn from the bytes alone.

Run (a few minutes on 2 CPU cores; ``--small`` for a quick run)::

    python examples/train_classifier.py
    python examples/train_classifier.py --checkpoint ckpt.pt --stop-after 50   # interrupted run
    python examples/train_classifier.py --checkpoint ckpt.pt --resume          # continues exactly there
    torchrun --standalone --nproc_per_node=2 examples/train_classifier.py --small   # data parallel (DDP)

The checkpoint holds the model, the optimizer, the loader state and both datasets
(``ds.get_dict(include_files=True)``), so a resumed run rebuilds the very same datasets from it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from consumer import Consumer
from consumer.cli.main import stdlib_corpus

# classes that are plentiful in every CPython installation (at least ~20 files each)
DEFAULT_CLASSES = ("python", "bytecode", "text", "data", "library", "image", "audio")
SMALL_CLASSES = ("python", "bytecode", "library")


class MalConv(nn.Module):
    """Embedding -> gated 1-D convolution (``a * sigmoid(b)``) -> global max pool -> MLP (Raff et al. 2017)."""

    def __init__(self, vocab_size: int, n_classes: int, pad_id: int, emb: int = 8, channels: int = 128,
                 kernel: int = 32, stride: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb, padding_idx=pad_id)
        self.conv = nn.Conv1d(emb, 2 * channels, kernel_size=kernel, stride=stride)
        self.head = nn.Sequential(nn.Linear(channels, channels), nn.ReLU(), nn.Linear(channels, n_classes))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Class logits ``[B, C]`` of token rows ``[B, L]``."""
        x = self.embed(tokens).transpose(1, 2)  # [B, emb, L]
        a, b = self.conv(x).chunk(2, dim=1)
        h = (a * torch.sigmoid(b)).amax(dim=-1)  # global max pool over positions
        return self.head(h)


def build(fps: dict, args: argparse.Namespace) -> Consumer:
    """The dataset: raw bytes, no type header (libmagic's would give the file type away), the first ``seqlen``
    bytes of each file."""
    return Consumer(fps, style="diff", n_bytes=1, seqlen=args.seqlen, metadata=None, seed=args.seed,
                    long_files="truncate")


def evaluate(model: nn.Module, ds: Consumer, batch_size: int) -> tuple[float, np.ndarray]:
    """Accuracy and confusion matrix over every sample of ``ds`` (one pass, sample order)."""
    model.eval()
    n = len(ds.class_to_id)
    confusion = np.zeros((n, n), dtype=np.int64)
    with torch.no_grad():
        # rank 0 of 1: every process evaluates the whole held-out set, even under torch.distributed
        for batch in ds.dataloader(batch_size, query="supervised", shuffle=False, rank=0, world_size=1):
            pred = model(batch["input_array"]).argmax(dim=1)
            np.add.at(confusion, (batch["class"].numpy(), pred.numpy()), 1)
    model.train()
    return float(np.trace(confusion) / confusion.sum()), confusion


def init_distributed() -> tuple[int, int]:
    """Under ``torchrun`` (``WORLD_SIZE`` > 1) join the process group (gloo: this example trains on CPU)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("gloo")
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--classes", nargs="+", default=None, help=f"default: {' '.join(DEFAULT_CLASSES)}")
    p.add_argument("--max-files", type=int, default=400, help="files per class at most (default 400)")
    p.add_argument("--seqlen", type=int, default=4096, help="bytes read from the start of each file")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--balance", default="0.5", help="None, 'uniform' or an alpha (p_c ~ n_c**alpha); default 0.5")
    p.add_argument("--val-fraction", type=float, default=0.2)
    p.add_argument("--workers", type=int, default=1, help="loader worker processes")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads of the training loop (default 1: the loader workers use the other cores)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default=None, help="save model + optimizer + loader + datasets here")
    p.add_argument("--save-every", type=int, default=50, help="steps between checkpoints (and at each epoch end)")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    p.add_argument("--stop-after", type=int, default=None, help="stop after this many steps (simulate a crash)")
    p.add_argument("--small", action="store_true", help="a quick run: 3 classes, 60 files each, 1 KiB, 3 epochs")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.small:
        args.classes = args.classes or list(SMALL_CLASSES)
        args.max_files, args.seqlen, args.epochs = min(args.max_files, 60), min(args.seqlen, 1024), 3
    args.classes = args.classes or list(DEFAULT_CLASSES)
    if args.resume and not args.checkpoint:
        p.error("--resume needs --checkpoint PATH")
    balance = args.balance
    args.balance = None if balance == "None" else balance if balance == "uniform" else float(balance)
    return args


def main(argv: list[str] | None = None) -> float:
    """Train, print the held-out accuracy, return it."""
    args = parse(argv)
    rank, world_size = init_distributed()
    log = print if rank == 0 else (lambda *a, **k: None)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)  # model initialisation only; the data order comes from the loader's seed
    ckpt = torch.load(args.checkpoint, weights_only=False) if args.resume else None
    if ckpt is not None:  # the checkpoint holds both datasets: rebuilt exactly (same files, same samples)
        train_ds, val_ds = Consumer.from_dict(ckpt["train_dataset"]), Consumer.from_dict(ckpt["val_dataset"])
    else:
        corpus = stdlib_corpus(max_per_class=args.max_files)
        missing = [c for c in args.classes if c not in corpus]
        if missing:
            sys.exit(f"--classes: {missing} not found in this Python installation; found {sorted(corpus)}")
        corpus = {c: corpus[c] for c in args.classes}
        # by file, stratified per class, stable across runs: no file is on both sides
        parts = build(corpus, args).split({"train": 1 - args.val_fraction, "val": args.val_fraction}, seed=args.seed)
        train_ds, val_ds = parts["train"], parts["val"]
    log(f"train: {train_ds!r} {train_ds.samples_per_class()}")
    log(f"held-out: {val_ds!r} {val_ds.samples_per_class()}")

    # under torchrun the loader takes rank and world size from torch.distributed: each rank reads its
    # own share of every epoch, all ranks the same number of batches
    loader = train_ds.dataloader(args.batch_size, query="supervised", balance=args.balance,
                                 num_workers=args.workers, persistent_workers=args.workers > 0)
    net = MalConv(train_ds.vocab.size, len(train_ds.class_to_id), pad_id=train_ds.vocab.pad)
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr)
    if ckpt is not None:
        net.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        loader.load_state_dict(ckpt["loader"])  # one state, saved by rank 0, resumes every rank
        log(f"resumed at epoch {loader.epoch}, batch {loader.position} of {len(loader)}")
    model = nn.parallel.DistributedDataParallel(net) if world_size > 1 else net
    if world_size > 1:
        log(f"data parallel over {world_size} ranks, {len(loader)} batches of {args.batch_size} per rank and epoch")

    def save() -> None:
        if rank != 0:
            return
        tmp = args.checkpoint + ".tmp"
        torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "loader": loader.state_dict(),
                    "train_dataset": json.loads(train_ds.to_json(include_files=True)),
                    "val_dataset": json.loads(val_ds.to_json(include_files=True)), "args": vars(args)}, tmp)
        os.replace(tmp, args.checkpoint)  # atomic: a crash while saving keeps the previous checkpoint

    loss_fn = nn.CrossEntropyLoss()
    steps = samples = 0
    t0 = time.perf_counter()
    while loader.epoch < args.epochs:
        epoch = loader.epoch
        bar = tqdm(loader, total=len(loader), initial=loader.position, desc=f"epoch {epoch}",
                   disable=args.quiet or rank != 0, leave=False)
        running = []
        for batch in bar:
            loss = loss_fn(model(batch["input_array"]), batch["class"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            samples += batch["class"].numel()
            running.append(loss.item())
            bar.set_postfix(loss=f"{np.mean(running[-20:]):.3f}")
            if args.checkpoint and (steps % args.save_every == 0 or loader.epoch != epoch):
                save()
            if args.stop_after is not None and steps >= args.stop_after:
                log(f"stopped after {steps} steps at epoch {loader.epoch}, batch {loader.position} (as asked)")
                if dist.is_initialized():
                    dist.destroy_process_group()
                return float("nan")
        bar.close()
        acc, _ = evaluate(net, val_ds, 64)
        log(f"epoch {epoch}: train loss {np.mean(running):.4f}, held-out accuracy {acc:.3f}", flush=True)
    seconds = time.perf_counter() - t0
    acc, confusion = evaluate(net, val_ds, 64)
    names = [val_ds.id_to_class[i] for i in range(len(val_ds.id_to_class))]
    log("confusion (rows: true, columns: predicted):", names)
    for name, row in zip(names, confusion.tolist()):
        log(f"  {name:>10} {row}")
    samples *= world_size
    log(f"trained {steps} steps, {samples} samples in {seconds:.1f} s ({samples / max(seconds, 1e-9):.0f} samples/s)")
    log(f"held-out accuracy: {acc:.4f} over {len(val_ds)} files ({len(names)} classes, chance "
        f"{np.max(confusion.sum(1)) / confusion.sum():.3f} for the majority class)")
    if dist.is_initialized():
        dist.destroy_process_group()
    return acc


if __name__ == "__main__":
    main()
