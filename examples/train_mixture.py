"""Train a small byte-level causal model on a mixture of three sources with a weight schedule (``consumer.mix``).

Three parts, each built its own way, all ``n_bytes=1`` rows of ``--seqlen`` bytes in the ``packed`` style (whole
documents packed into rows; a longer one in row-sized windows):

- ``code``: raw files, the Python sources of this machine's Python installation (``consumer demo``'s corpus,
  :func:`consumer.cli.demo.stdlib_corpus`, its ``python`` class, every other file);
- ``text``: a JSONL corpus written here, one record ``{"text": ...}`` per docstring of the *other* half of those
  Python files (modules, classes, functions; ``documents="jsonl"``);
- ``store``: the demo corpus's text and data files (``.txt``/``.rst``/``.json``/``.toml``/``.xml``/``.csv``) packed
  with ``ds.pack(prefix)`` and opened again with ``Consumer.from_packed(prefix, style="packed", seqlen=...)``.

Each part is split by file (by module for ``text``) into train and held-out data. The mixture of the train parts
has a weight schedule: ``code`` first, ``text`` after step ``--switch``. The loader (``m.dataloader``) serves
``causal`` labels with ``document_ids`` and ``position_ids`` (plus ``class``: the part of each row), and the model
of ``examples/train_causal_bytes.py`` (document-masked attention, RoPE) trains on it for ``--steps`` steps.

It prints the realised proportions (``loader.proportions(window)``) before and after the switch, the held-out bits
per byte of each part before and after training, and resumes a loader from a ``state_dict()`` taken a few steps
before the switch: a new mixture over the same parts, ``load_state_dict``, the next batches. It exits with status 1
if a part's count of rows served ever strays more than one sample from the schedule's cumulative target (the
loader's promise: over every prefix of the run, every part within one sample of its weights), if
``proportions(window)`` disagrees with the rows served, or if the resumed loader's batches differ from the run's.

Run (about a minute on 2 idle CPU cores)::

    python examples/train_mixture.py
    python examples/train_mixture.py --steps 40 --switch 20     # a short run
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
from train_causal_bytes import QUERY, ByteLM, bits_per_byte, flex_trains_on, train_step  # this folder's example

import consumer
from consumer import Consumer
from consumer.cli.demo import stdlib_corpus

PARTS = ("code", "text", "store")
SOURCES = {"code": "raw files", "text": "JSONL records", "store": "a packed store"}


def docstrings(paths: list[str], min_chars: int = 40) -> list[str]:
    """The docstrings (module, classes, functions) of Python files, in file order; files that don't parse skipped."""
    out = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= min_chars:
                    out.append(doc)
    return out


def write_jsonl(path: str, texts: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for text in texts:
            f.write(json.dumps({"text": text}) + "\n")
    return path


def build_parts(args: argparse.Namespace, work: str) -> tuple[dict[str, Consumer], dict[str, Consumer]]:
    """The three parts' train and held-out datasets (see the module docstring)."""
    corpus = stdlib_corpus(max_per_class=2 * args.max_files)
    python = corpus["python"]
    options = {"n_bytes": 1, "style": "packed", "seqlen": args.seqlen, "long_files": "windows", "metadata": None,
               "seed": args.seed, "cache_dir": args.cache_dir or os.path.join(work, "cache")}
    train, val = {}, {}

    code = Consumer({"python": python[0::2]}, **options).split({"train": 0.9, "val": 0.1}, seed=args.seed)
    train["code"], val["code"] = code["train"], code["val"]

    held_out = python[1::2][::10]  # the docstrings of every tenth file of the other half are held out
    rest = sorted(set(python[1::2]) - set(held_out))
    for name, paths in (("train", rest), ("val", held_out)):
        path = write_jsonl(os.path.join(work, f"docstrings_{name}.jsonl"), docstrings(paths))
        (train if name == "train" else val)["text"] = Consumer([path], documents="jsonl", **options)

    files = {cls: corpus[cls] for cls in ("text", "data") if cls in corpus} or {"python": python[1::2]}
    for name, ds in Consumer(files, **options).split({"train": 0.9, "val": 0.1}, seed=args.seed).items():
        prefix = os.path.join(work, f"store_{name}")
        ds.pack(prefix)  # a Megatron .bin/.idx store, opened again as a packed store
        (train if name == "train" else val)["store"] = Consumer.from_packed(prefix, style="packed",
                                                                            seqlen=args.seqlen)
    return train, val


def schedule(args: argparse.Namespace) -> list[tuple[int, dict[str, float]]]:
    return [(0, {"code": 0.5, "text": 0.3, "store": 0.2}), (args.switch, {"code": 0.2, "text": 0.55, "store": 0.25})]


def targets(points: list[tuple[int, dict[str, float]]], steps: int, batch: int) -> np.ndarray:
    """``[steps + 1, parts]``: each part's cumulative target after every step, ``sum_{j<k} batch * w(j)``."""
    per_step = np.zeros((steps, len(PARTS)))
    for k in range(steps):
        w = next(ws for s, ws in reversed(points) if s <= k)
        total = sum(w.values())
        per_step[k] = [batch * w[p] / total for p in PARTS]
    return np.vstack([np.zeros(len(PARTS)), np.cumsum(per_step, axis=0)])


def shares(d: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in d.items())


def same_batches(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
                                    for x, y in zip(a, b))


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="optimizer steps (default 200: ~1 min on 2 idle cores)")
    p.add_argument("--switch", type=int, default=None, help="the step the weights change at (default: steps / 2)")
    p.add_argument("--seqlen", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--max-files", type=int, default=200, help="Python files of the code part (and of the text part)")
    p.add_argument("--eval-rows", type=int, default=64, help="held-out rows scored per part")
    p.add_argument("--resume-batches", type=int, default=6, help="batches compared after the resume")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", default=None, help="the dataset cache (default: in the work folder)")
    p.add_argument("--work", default=None, help="folder of the JSONL files and stores (default: a temporary one)")
    args = p.parse_args(argv)
    args.switch = args.steps // 2 if args.switch is None else args.switch
    if not 0 < args.switch < args.steps:
        p.error(f"--switch must be in (0, --steps={args.steps}), got {args.switch}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.work is None:
        with tempfile.TemporaryDirectory(prefix="train_mixture-") as work:
            return run(args, work)
    os.makedirs(args.work, exist_ok=True)
    return run(args, args.work)


def run(args: argparse.Namespace, work: str) -> int:
    t_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    flex = flex_trains_on(device)

    train, val = build_parts(args, work)
    points = schedule(args)
    m = consumer.mix(train, weights=points, seed=args.seed)
    print(f"{m!r}: built in {time.perf_counter() - t_start:.1f} s")
    for name in PARTS:
        print(f"  {name:5s} {SOURCES[name]:15s} {len(train[name]):5d} train rows, "
              f"{len(val[name]):4d} held-out rows")
    print(f"weights: {points[0][1]} from step 0, {points[1][1]} from step {args.switch}")

    rng = np.random.default_rng(args.seed)
    evals = {}
    for name in PARTS:
        ids = np.sort(rng.choice(len(val[name]), size=min(args.eval_rows, len(val[name])), replace=False))
        evals[name] = [{k: v.to(device) for k, v in val[name].fetch(chunk, QUERY).items()}
                       for chunk in np.array_split(ids, -(-ids.size // 32))]

    model = ByteLM(m.vocab.size, dim=args.dim, layers=args.layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = max(1, args.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) * (
        0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, s / args.steps)))))
    before = {name: bits_per_byte(model, batches) for name, batches in evals.items()}

    query = [*QUERY, "class"]  # class: the part of each row (the mixture's classes are its parts)
    loader = m.dataloader(args.batch_size, seed=args.seed, query=query)
    resume_at = max(1, args.switch - args.resume_batches // 2)  # the resumed batches cross the switch
    state, kept = None, []
    served = np.zeros((args.steps, len(PARTS)), dtype=np.int64)  # rows of each part in every step's batch
    said: dict[str, dict[str, float]] = {}
    step, losses, t0 = 0, [], time.perf_counter()
    every = max(1, args.steps // 5)
    while step < args.steps:
        for batch in loader:
            if resume_at <= step < resume_at + args.resume_batches:
                kept.append({k: v.clone() for k, v in batch.items()})
            served[step] = np.bincount(batch.pop("class").numpy(), minlength=len(PARTS))
            losses.append(train_step(model, opt, sched, {k: v.to(device) for k, v in batch.items()}, flex))
            step += 1
            if step == resume_at:  # the batches of steps 0 .. resume_at - 1 served
                state = json.loads(json.dumps(loader.state_dict()))  # as a checkpoint would keep it
            if step == args.switch:
                said["before"] = loader.proportions(args.switch)
                print(f"step {step}: proportions over steps 0-{step - 1}: {shares(said['before'])}")
            if step % every == 0 or step == args.steps:
                print(f"step {step}: train bits/byte {np.mean(losses[-every:]):.3f} "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
            if step == args.steps:
                break
    said["after"] = loader.proportions(args.steps - args.switch)
    print(f"step {step}: proportions over steps {args.switch}-{step - 1}: {shares(said['after'])}")
    train_s = time.perf_counter() - t0

    # the proportions: every prefix of the run within one sample per part of the schedule's cumulative target
    cumulative = np.vstack([np.zeros(len(PARTS), dtype=np.int64), np.cumsum(served, axis=0)])
    worst = float(np.abs(cumulative - targets(points, args.steps, args.batch_size)).max())
    windows = {"before": served[:args.switch].sum(axis=0), "after": served[args.switch:].sum(axis=0)}
    agree = all(abs(said[w][p] - windows[w][i] / windows[w].sum()) < 1e-9
                for w in windows for i, p in enumerate(PARTS))
    print(f"rows served per part before the switch {dict(zip(PARTS, windows['before'].tolist()))}, after "
          f"{dict(zip(PARTS, windows['after'].tolist()))}; the largest distance of a part's cumulative count from "
          f"its target over all {args.steps} steps: {worst:.3f} samples (at most 1); proportions(window) "
          f"{'agrees' if agree else 'DISAGREES'} with the rows served")

    # the resume: a new mixture over the same parts and schedule, the saved state, the next batches
    again = consumer.mix(train, weights=points, seed=args.seed).dataloader(args.batch_size, seed=args.seed,
                                                                          query=query)
    again.load_state_dict(state)
    resumed = []
    for batch in again:
        resumed.append(batch)
        if len(resumed) == len(kept):
            break
    same = same_batches(kept, resumed)
    print(f"resumed at step {resume_at} from state_dict() (parts at {state['parts']}): the next {len(resumed)} "
          f"batches are {'the same' if same else 'NOT the same'} as the run's")

    after = {name: bits_per_byte(model, batches) for name, batches in evals.items()}
    for name in PARTS:
        print(f"held-out {name:5s}: bits/byte {before[name]:.2f} -> {after[name]:.2f}")
    print(f"{step} steps in {train_s:.0f} s; total {time.perf_counter() - t_start:.0f} s")
    ok = worst <= 1.0 + 1e-9 and agree and same
    print("mixture checks: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
