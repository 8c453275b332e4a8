"""``consumer demo``: a dataset over files every machine with Python has (the standard library, one class per
file type), a summary and a decoded batch; :func:`stdlib_corpus` is also the examples' corpus."""

from __future__ import annotations

import argparse
import os
import sysconfig
import time
from collections import defaultdict

from ..sources.open import check_root

__all__ = ["DEMO_TYPES", "stdlib_corpus", "demo"]


# file types of the demo corpus: class name -> extensions (every CPython install has most of them)
DEMO_TYPES = {
    "python": ("py",),
    "bytecode": ("pyc",),
    "text": ("txt", "rst"),
    "data": ("json", "toml", "xml", "csv"),
    "image": ("png", "gif", "jpg", "ico"),
    "audio": ("wav", "aiff", "au"),
    "library": ("so", "dll", "pyd", "dylib"),
    "archive": ("zip", "gz", "tar", "bz2", "xz"),
}


def stdlib_corpus(max_per_class: int = 200, min_per_class: int = 5, root: str | None = None) -> dict[str, list[str]]:
    """F3 corpus of the Python standard library, one class per file type of :data:`DEMO_TYPES`.

    Only classes with at least ``min_per_class`` files are kept, each capped at ``max_per_class``
    files picked evenly over its sorted list (deterministic). ``site-packages`` is skipped.
    """
    root = root or sysconfig.get_paths()["stdlib"]
    by_ext = {ext: cls for cls, exts in DEMO_TYPES.items() for ext in exts}
    groups: dict[str, list[str]] = defaultdict(list)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "dist-packages")
                             and not d.startswith("."))
        for name in filenames:
            path = os.path.join(dirpath, name)
            cls = by_ext.get(os.path.splitext(name)[1].lstrip(".").lower())
            if cls and not name.startswith(".") and os.path.isfile(path) and not os.path.islink(path):
                groups[cls].append(path)
    out = {}
    for cls, paths in sorted(groups.items()):
        if len(paths) < min_per_class:
            continue
        paths.sort()
        step = max(1, len(paths) // max_per_class)
        out[cls] = paths[::step][:max_per_class]
    return out


def _printable(raw: bytes) -> str:
    """Bytes shown as text: printable ASCII kept, tags kept, everything else as a middle dot."""
    return "".join(chr(c) if 32 <= c < 127 else "\\n" if c == 10 else "\u00b7" for c in raw)


def demo(args: argparse.Namespace) -> int:
    from ..consumer import Consumer  # noqa: PLC0415

    fps = check_root(args.dir, "--dir", urls=False) if args.dir else stdlib_corpus(args.max_files)
    t0 = time.perf_counter()
    ds = Consumer(fps, style=args.style, n_bytes=args.n_bytes, seqlen=args.seqlen, long_files=args.long_files,
                  verbose=args.verbose)
    build = time.perf_counter() - t0
    print(f"{ds!r}  built in {build:.2f} s")
    print(f"vocab: size {ds.vocab.size}, specials {ds.vocab.specials}")
    info = ds.get_dict()
    print(f"{'class':<10} {'id':>3} {'files':>6} {'bytes':>10} {'tokens':>10} {'samples':>8}")
    for c in ds.classes:
        pc = info["per_class"][c]
        print(f"{c:<10} {ds.class_to_id[c]:>3} {pc['files']:>6} {pc['bytes']:>10} {pc['tokens']:>10} "
              f"{pc['samples']:>8}")
    ds.create_batches(args.batch_size, seed=ds.seed)
    query = ["input_array", "attention_mask", "class", "file_id", "offset"]
    ds.fetch([0], query)  # the first fetch imports torch: keep that out of the timing
    t0 = time.perf_counter()
    batch = ds.get_next_batch(query)
    fetch = time.perf_counter() - t0
    shapes = {k: tuple(v.shape) for k, v in batch.items()}
    print(f"\nnext batch in {fetch * 1e3:.2f} ms: {shapes}")
    root = os.path.commonpath(ds.files) if len(ds.files) > 1 else os.path.dirname(ds.files[0])
    for row in range(min(args.show, len(batch["class"]))):
        fid = int(batch["file_id"][row])
        real = int(batch["attention_mask"][row].sum())
        text = ds.decode(batch["input_array"][row][:real], specials="tags")
        shown = _printable(text[: args.chars])
        print(f"\n[{ds.id_to_class[int(batch['class'][row])]}] {os.path.relpath(ds.files[fid], root)} "
              f"(from token {int(batch['offset'][row])}, {real} real tokens{', then PAD' if real < ds.seqlen else ''})")
        print(f"  {shown}{' ...' if len(text) > args.chars else ''}")
    print(f"\ncorpus report: {ds.report(args.report, title=args.dir or 'the Python standard library')}")
    return 0

