"""GPU feed benchmark: does ``ds.dataloader`` keep a GPU busy while it trains a byte-level model?

Workload: the generated ``small`` corpus (:func:`benchmarks.corpora.make_corpus`), ``n_bytes=1``, ``concat``
style, read from the raw files (``raw``) and from its Megatron ``.bin/.idx`` pack (``packed``). The model is a
byte-level next-token predictor: an embedding, ``--layers`` residual blocks of a 1-D convolution (kernel
``--kernel``, ``--width`` channels) and GELU, and a linear head over the vocabulary; AdamW; bf16 autocast on
CUDA. With the defaults (width 384, 4 blocks) a step of batch 32 x 2048 is about 0.6 TFLOP, a few
milliseconds on a current data-centre GPU; the default batch is the largest power of two up to 512 that fits.

For each store and each ``--workers`` count, batches come from ``ds.dataloader(B, num_workers=w,
pin_memory=True)`` and reach the device with ``tensor.to(device, non_blocking=True)``; the loop never
synchronises inside the measured steps (no ``loss.item()``), so the host enqueues work ahead of the GPU
whenever the loader lets it. The ceiling row trains on a batch made once on the device (no loader, no copy).

Measured per configuration, after ``--warmup`` steps, over ``--steps`` steps:

- ``steps_per_s``: steps over the host wall time between two ``torch.cuda.synchronize()`` calls;
- ``gpu_wait_fraction``: the fraction of the GPU timeline of those steps during which the GPU had no step
  to run. Two CUDA events per step on the current stream, one before the host-to-device copy and one after
  the optimizer step, give each step's busy time (``start.elapsed_time(end)``); the span is the first start
  to the last end, and ``1 - sum(busy) / span`` is the idle share: the GPU waiting for the host, hence for
  data (the ceiling row shows the part that is launch overhead, not data);
- ``host_wait_fraction``: the share of host wall time spent inside ``next(loader)``.

Without a CUDA device the GPU rows are skipped with that reason; ``--smoke`` runs the same loop on the CPU
with a tiny model and corpus (the wait fractions are then host-side: time in ``next(loader)`` over the step
time), which is what the test suite runs. The largest batch that fits (``--batch 0``) is found by doubling
a synthetic step until the device runs out of memory.

Run: ``python -m benchmarks probe gpu_feed [--files 10000] [--seqlen 2048] [--batch 0] [--workers 0,1,2,4,8]
[--steps 100] [--json]``; ``--smoke`` for the CPU check.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

from ..corpora import make_corpus

NAME = "gpu_feed"
DESCRIPTION = "training a byte-level model from ds.dataloader: GPU busy fraction (raw and packed)"

__all__ = ["FeedSettings", "SMOKE", "FULL_GPU", "cuda_reason", "measure", "render_section", "add_arguments", "run"]

QUERY = ["input_array"]


@dataclass(frozen=True)
class FeedSettings:
    """Sizes of one run of the benchmark."""

    files: int = 10000
    seqlen: int = 2048
    batch: int = 0  # 0: the largest power of two up to max_batch that fits on the device (found by doubling)
    workers: tuple[int, ...] = (0, 1, 2, 4, 8)
    steps: int = 100
    warmup: int = 10
    width: int = 384
    layers: int = 4
    kernel: int = 5
    max_batch: int = 512
    smoke: bool = False  # CPU, tiny: checks the loop end to end without a GPU


SMOKE = FeedSettings(files=60, seqlen=256, batch=4, workers=(0, 1), steps=4, warmup=1, width=32, layers=1, kernel=3,
                     smoke=True)
FULL_GPU = FeedSettings()


def cuda_reason() -> str | None:
    """Why the GPU part cannot run here (None when a CUDA device is usable)."""
    try:
        import torch
    except ImportError as e:
        return f"torch is not installed: {e}"
    if not torch.cuda.is_available():
        return f"no CUDA device (torch {torch.__version__}, torch.cuda.is_available() is False)"
    return None


def make_model(vocab_size: int, width: int, layers: int, kernel: int):
    """The byte-level model: embedding, residual conv + GELU blocks, linear head (next-token logits)."""
    import torch
    from torch import nn

    class ConvLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab_size, width)
            self.convs = nn.ModuleList(nn.Conv1d(width, width, kernel, padding=kernel // 2) for _ in range(layers))
            self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(layers))
            self.head = nn.Linear(width, vocab_size)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.embed(x)  # [B, L, C]
            for conv, norm in zip(self.convs, self.norms):
                h = h + nn.functional.gelu(conv(norm(h).transpose(1, 2)).transpose(1, 2))
            return self.head(h)

    return ConvLM()


class _Trainer:
    """One model, optimizer and step function on ``device``."""

    def __init__(self, s: FeedSettings, vocab_size: int, device) -> None:
        import torch

        self.torch, self.device, self.vocab_size = torch, device, vocab_size
        torch.manual_seed(0)
        self.model = make_model(vocab_size, s.width, s.layers, s.kernel).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.cuda = device.type == "cuda"

    def step(self, x) -> object:
        """One training step on the device batch ``x`` ([B, L] int64); returns the loss tensor (not synced)."""
        torch = self.torch
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.cuda):
            logits = self.model(x[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, self.vocab_size).float(),
                                                     x[:, 1:].reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss

    def run(self, batches, steps: int, warmup: int) -> dict:
        """Train ``warmup + steps`` steps on the host batches from the iterator ``batches`` (``None``: on one
        synthetic batch already on the device); the figures of the module docstring."""
        torch = self.torch
        synthetic = None
        if batches is None:
            synthetic = torch.randint(0, self.vocab_size - 1, self._shape, device=self.device)
        fetch = (lambda: synthetic) if synthetic is not None else (lambda: next(batches)["input_array"])
        for _ in range(warmup):
            x = fetch().to(self.device, non_blocking=True)
            self.step(x)
        if self.cuda:
            torch.cuda.synchronize(self.device)
        events = []
        host_wait = 0.0
        t0 = time.perf_counter()
        for _ in range(steps):
            w0 = time.perf_counter()
            host = fetch()
            host_wait += time.perf_counter() - w0
            if self.cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                self.step(host.to(self.device, non_blocking=True))
                end.record()
                events.append((start, end))
            else:
                self.step(host)
        loss = self.step(fetch().to(self.device, non_blocking=True)).detach()
        if self.cuda:
            torch.cuda.synchronize(self.device)
        wall = time.perf_counter() - t0
        out = {"steps": steps, "wall_s": wall, "steps_per_s": steps / wall, "host_wait_fraction": host_wait / wall,
               "loss": float(loss)}
        if self.cuda:
            busy = sum(a.elapsed_time(b) for a, b in events) / 1e3
            span = events[0][0].elapsed_time(events[-1][1]) / 1e3
            out.update(gpu_busy_s=busy, gpu_span_s=span, gpu_wait_fraction=max(0.0, 1.0 - busy / span),
                       ms_per_step_gpu=busy / steps * 1e3)
        else:  # the CPU computes synchronously: the step waits for data exactly while the loader runs
            out["gpu_wait_fraction"] = None
        return out

    def shape(self, batch: int, seqlen: int) -> None:
        """The [B, L] shape of the synthetic batch."""
        self._shape = (batch, seqlen)


def largest_batch(trainer: _Trainer, seqlen: int, start: int = 8, cap: int = 4096) -> int:
    """The largest power-of-two batch (from ``start`` up to ``cap``) whose training step fits on the device."""
    torch = trainer.torch
    fits, b = 0, start
    while b <= cap:
        try:
            trainer.shape(b, seqlen)
            trainer.run(None, 2, 1)
            fits, b = b, b * 2
        except torch.cuda.OutOfMemoryError:
            break
        finally:
            trainer.opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
    if not fits:
        raise RuntimeError(f"not even a batch of {start} x {seqlen} fits on the device")
    return fits


def _stores(s: FeedSettings, data: str, work: str):
    from consumer import Consumer

    corpus = make_corpus(data, "small", s.files, 3)
    raw = Consumer(corpus.root, n_bytes=1, style="concat", seqlen=s.seqlen, metadata=None,
                   cache_dir=os.path.join(work, "cache"))
    prefix = os.path.join(work, "store")
    raw.pack(prefix, format="megatron")
    packed = Consumer.from_packed(prefix, style="concat", seqlen=s.seqlen)
    return {"raw": raw, "packed": packed}


def measure(s: FeedSettings, data: str, work: str, log=print) -> dict:
    """Every figure of the module docstring for settings ``s`` (corpora under ``data``, scratch under
    ``work``), as a JSON-able dict. The GPU rows are absent, with the reason, when no CUDA device is usable;
    in smoke mode the loop runs on the CPU instead."""
    import torch

    reason = cuda_reason()
    out: dict = {"settings": asdict(s), "cuda": reason is None, "skipped": None, "rows": [], "ceiling": None}
    if reason is not None and not s.smoke:
        out["skipped"] = reason
        return out
    device = torch.device("cuda" if reason is None else "cpu")
    if reason is None:
        out["device"] = torch.cuda.get_device_name(device)
    else:
        out["device"] = "cpu (smoke mode; GPU part skipped: " + reason + ")"
    os.makedirs(work, exist_ok=True)
    stores = _stores(s, data, work)
    vocab_size = stores["raw"].vocab.size
    trainer = _Trainer(s, vocab_size, device)
    batch = s.batch
    if batch == 0:
        batch = largest_batch(trainer, s.seqlen, cap=s.max_batch) if device.type == "cuda" else 4
    out["batch"], out["seqlen"] = batch, s.seqlen
    out["samples"] = {k: len(v) for k, v in stores.items()}
    trainer.shape(batch, s.seqlen)
    out["ceiling"] = trainer.run(None, s.steps, s.warmup)
    log(f"  gpu feed ceiling (synthetic batch on {device.type}): {out['ceiling']['steps_per_s']:.1f} steps/s")
    need = (s.steps + s.warmup + 2) * batch
    for name, ds in stores.items():
        for w in s.workers:
            loader = ds.dataloader(batch, query=QUERY, num_workers=w, pin_memory=True,
                                   epoch_size=max(need, len(ds)), drop_last=True)
            it = iter(loader)
            try:
                row = trainer.run(it, s.steps, s.warmup)
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
                del it, loader
            row.update(store=name, workers=w)
            out["rows"].append(row)
            log(f"  gpu feed {name} workers={w}: {row['steps_per_s']:.1f} steps/s, host wait "
                f"{row['host_wait_fraction']:.2f}" + (f", GPU wait {row['gpu_wait_fraction']:.3f}"
                                                       if row["gpu_wait_fraction"] is not None else ""))
    for ds in stores.values():
        ds.close()
    return out


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def render_section(res: dict | None) -> list[str]:
    """The report's markdown lines for the ``gpu`` results (none when the section did not run)."""
    if not res:
        return []
    s = res["settings"]
    out = ["## GPU feed: training from the loader", ""]
    if res.get("skipped"):
        return out + [f"Not measured in this run: {res['skipped']}.", ""]
    c = res["ceiling"]
    out += [f"Device: {res['device']}. Byte-level conv model ({s['layers']} blocks, width {s['width']}, kernel "
            f"{s['kernel']}), batch {res['batch']} × {res['seqlen']}, {s['steps']} steps after {s['warmup']} "
            "warm-up steps; batches from `ds.dataloader(B, num_workers=w, pin_memory=True)`, copied with "
            "`non_blocking=True`. *GPU waits*: share of the GPU timeline with no step to run (CUDA events around "
            "each step); *host waits*: share of wall time inside `next(loader)`. The ceiling trains on one batch "
            "already on the device.", ""]
    head = ["store", "workers", "steps/s", "÷ ceiling", "GPU waits", "host waits"]
    rows = [["ceiling (synthetic, on device)", "—", f"{c['steps_per_s']:.1f}", "1.00", _pct(c["gpu_wait_fraction"]),
             _pct(c["host_wait_fraction"])]]
    for r in res["rows"]:
        rows.append([r["store"], str(r["workers"]), f"{r['steps_per_s']:.1f}",
                     f"{r['steps_per_s'] / c['steps_per_s']:.2f}", _pct(r["gpu_wait_fraction"]),
                     _pct(r["host_wait_fraction"])])
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options (defaults: the full GPU measurement)."""
    d = FULL_GPU
    parser.add_argument("--files", type=int, default=d.files)
    parser.add_argument("--seqlen", type=int, default=d.seqlen)
    parser.add_argument("--batch", type=int, default=d.batch, help="0: the largest power of two that fits")
    parser.add_argument("--max-batch", type=int, default=d.max_batch, help="cap of --batch 0")
    parser.add_argument("--workers", default=",".join(map(str, d.workers)))
    parser.add_argument("--steps", type=int, default=d.steps)
    parser.add_argument("--warmup", type=int, default=d.warmup)
    parser.add_argument("--width", type=int, default=d.width)
    parser.add_argument("--layers", type=int, default=d.layers)
    parser.add_argument("--kernel", type=int, default=d.kernel)
    parser.add_argument("--smoke", action="store_true", help="tiny, on the CPU (no GPU needed)")
    parser.add_argument("--data", default=None, help="corpora folder (default: a temporary one)")


def run(args: argparse.Namespace) -> dict:
    """Measure with the settings of the options (``--smoke``: the tiny CPU run)."""
    if args.smoke:
        s = SMOKE
    else:
        s = FeedSettings(files=args.files, seqlen=args.seqlen, batch=args.batch,
                         workers=tuple(int(w) for w in args.workers.split(",") if w), steps=args.steps,
                         warmup=args.warmup, width=args.width, layers=args.layers, kernel=args.kernel,
                         max_batch=args.max_batch)
    tmp = tempfile.mkdtemp(prefix="bench-gpu-feed-")
    try:
        return measure(s, args.data or os.path.join(tmp, "data"), os.path.join(tmp, "work"),
                       log=lambda *a: print(*a, file=sys.stderr, flush=True))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
