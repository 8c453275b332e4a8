"""The ``consumer`` command line (console script and ``python -m consumer``).

- ``consumer demo``: a :class:`~consumer.Consumer` over files every machine with Python has (the
  standard library, grouped by file type): a summary and a decoded batch;
- ``consumer index DIR``: build or refresh the catalog and the sample index (with progress);
- ``consumer info DIR``: classes, files, bytes, samples, top MIME types, file-size distribution;
- ``consumer sql DIR "SELECT ..."``: a table, or ``--json``;
- ``consumer pack DIR PREFIX --format megatron|modalities``: a packed store of every file's tokens;
- ``consumer inspect PREFIX``: counts, dtype, classes and a decoded document of a packed store;
- ``consumer cache list|clear``.

Exit codes: 0 ok, 2 bad input (one line on stderr), 1 a system error (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
import time
from collections import defaultdict

import numpy as np

from .errors import ConsumerError

__all__ = ["main", "stdlib_corpus", "content_summary"]


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


def _demo(args: argparse.Namespace) -> int:
    from . import Consumer  # noqa: PLC0415

    fps = args.dir if args.dir else stdlib_corpus(args.max_files)
    t0 = time.perf_counter()
    ds = Consumer(fps, style=args.style, n_bytes=args.n_bytes, seqlen=args.seqlen, verbose=args.verbose)
    build = time.perf_counter() - t0
    print(f"{ds!r}  built in {build:.2f} s")
    print(f"vocab: size {ds.vocab.size}, specials {ds.vocab.specials}")
    info = ds.get_dict()
    print(f"{'class':<10} {'id':>3} {'files':>6} {'bytes':>10} {'tokens':>10} {'samples':>8}")
    for c in ds.classes:
        pc = info["per_class"][c]
        print(f"{c:<10} {ds.class_to_id[c]:>3} {pc['files']:>6} {pc['bytes']:>10} {pc['tokens']:>10} {pc['samples']:>8}")
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
    return 0


def _open(args: argparse.Namespace, verbose: bool = False):
    from . import Consumer  # noqa: PLC0415

    return Consumer(args.dir, style=args.style, n_bytes=args.n_bytes, seqlen=args.seqlen,
                    metadata=None if args.metadata == "none" else args.metadata,
                    cache_dir=False if args.cache_dir == "off" else args.cache_dir, verbose=verbose)


def _index(args: argparse.Namespace) -> int:
    ds = _open(args, verbose=not args.quiet)
    info = ds.build_info
    print(f"{ds!r}")
    print(f"index cache {info['cache']} ({info['key'] or 'not cached'}), libmagic calls {info['libmagic_calls']}, "
          f"{info['seconds']:.2f} s")
    return 0


def _table(header: list[str], rows: list[tuple]) -> str:
    cells = [[str(c) for c in header]] + [["NULL" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _info(args: argparse.Namespace) -> int:
    ds = _open(args)
    per = ds.get_dict()["per_class"]
    print(f"{ds!r}\n")
    rows = [(c, ds.class_to_id[c], per[c]["files"], _human(per[c]["bytes"]), per[c]["tokens"], per[c]["samples"])
            for c in ds.classes]
    rows.append(("(all)", "", len(ds.files), _human(sum(p["bytes"] for p in per.values())),
                 sum(p["tokens"] for p in per.values()), len(ds)))
    print(_table(["class", "id", "files", "bytes", "tokens", "samples"], rows))
    mimes = ds.sql("SELECT mime, count(*) AS files, sum(size) AS bytes FROM files GROUP BY mime "
                   "ORDER BY files DESC, mime LIMIT ?", (args.top,))
    print("\ntop MIME types\n" + _table(["mime", "files", "bytes"], [(m, n, _human(b)) for m, n, b in mimes]))
    sizes = np.sort(ds.documents.doc_size)
    q = [0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1]
    print("\nfile sizes\n" + _table(["min", "p10", "p25", "median", "p75", "p90", "p99", "max"],
                                     [tuple(_human(float(np.quantile(sizes, x))) for x in q)]))
    return 0


def content_summary(rows, groups, *, top: int = 5) -> str:
    """The content part of ``consumer info``: per class the 10th, 50th and 90th percentiles of entropy
    (bits per byte) and of the printable fraction (as %), then the duplicate summary.

    ``rows``: ``(class, entropy, printable)`` per file, e.g.
    ``ds.sql("SELECT class, entropy, printable FROM files")`` (rows with NULLs are skipped);
    ``groups``: :class:`~consumer.duplicates.DuplicateGroup` list (``find_duplicates``); at most
    ``top`` cross-class groups are listed.
    """
    per: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for cls, ent, prn in rows:
        if ent is not None and prn is not None:
            per[cls].append((ent, prn))
    q = [0.1, 0.5, 0.9]
    table = []
    for cls in sorted(per):
        vals = np.array(per[cls], dtype=np.float64)
        ent = np.quantile(vals[:, 0], q)
        prn = np.quantile(vals[:, 1], q) * 100
        table.append((cls, len(vals), *(f"{v:.2f}" for v in ent), *(f"{v:.1f}" for v in prn)))
    out = ["content (entropy in bits/byte, printable in %)",
           _table(["class", "files", "entropy p10", "p50", "p90", "printable p10", "p50", "p90"], table)]
    copies = sum(len(g.members) - 1 for g in groups)
    wasted = sum(g.size * (len(g.members) - 1) for g in groups)
    cross = [g for g in groups if g.cross_class]
    out.append(f"\nduplicates: {len(groups)} groups of equal content, {copies} redundant copies "
               f"({_human(wasted)}), {len(cross)} groups across classes")
    for g in cross[:top]:
        members = ", ".join(f"{m.path} [{m.cls}]" for m in g.members)
        out.append(f"  {g.sha256[:12]} {_human(g.size)}: {members}")
    if len(cross) > top:
        out.append(f"  ... and {len(cross) - top} more cross-class groups")
    return "\n".join(out)


def _sql(args: argparse.Namespace) -> int:
    ds = _open(args)
    rows = ds.sql(args.statement)
    if args.json:
        print(json.dumps(rows.as_dicts(), indent=1, default=lambda v: v.hex() if isinstance(v, bytes) else str(v)))
    else:
        print(_table(rows.columns, list(rows)))
    return 0


def _cache(args: argparse.Namespace) -> int:
    from .cache import check_cache_dir, clear, list_entries  # noqa: PLC0415

    root = check_cache_dir(args.cache_dir)
    if args.action == "list":
        entries = list_entries(root)
        print(f"cache: {root}")
        rows = [(e["key"][:16], e["style"], e["n_bytes"], e["files"], e["samples"], _human(e["bytes"]),
                 time.strftime("%Y-%m-%d %H:%M", time.localtime(e["created"])) if e["created"] else "?")
                for e in entries]
        print(_table(["key", "style", "n_bytes", "files", "samples", "size", "created"], rows))
        catalog = os.path.join(root, "catalog.sqlite")
        if os.path.exists(catalog):
            print(f"catalog: {_human(os.path.getsize(catalog))}")
    else:
        freed = clear(root, catalog=args.catalog)
        print(f"cleared {_human(freed)} from {root}")
    return 0


def _pack(args: argparse.Namespace) -> int:
    ds = _open(args, verbose=args.verbose)
    summary = ds.pack(args.prefix, format=args.format, verbose=args.verbose)
    print(f"packed {summary['documents']} documents, {summary['tokens']} tokens ({summary['dtype']}) "
          f"from {_human(summary['source_bytes'])} of files into {_human(summary['bytes'])} "
          f"in {summary['seconds']:.2f} s:")
    for kind, path in summary["files"].items():
        print(f"  {kind:<8} {path}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from .packed import inspect_packed  # noqa: PLC0415

    info = inspect_packed(args.prefix, preview_tokens=args.tokens)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"{info['prefix']}: {info['format']} store, {info['dtype']} tokens, n_bytes={info['n_bytes']} "
          f"(vocab {info['vocab_size']}), metadata={info['metadata']}")
    print(f"{info['documents']} documents, {info['tokens']} tokens\n")
    print(_table(["class", "id", "documents"],
                 [(c, info["class_to_id"].get(c, ""), n) for c, n in info["classes"].items()]))
    p = info["preview"]
    if p:
        print(f"\nfirst document: {p['path']} [{p['class']}] header {p['header']!r}")
        print(f"  ids  {p['ids']}")
        print(f"  text {p['text']}")
    return 0


def _add_dataset_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="the corpus directory (sub-folders are classes)")
    p.add_argument("--style", default="diff", choices=["diff", "concat"])
    p.add_argument("--n-bytes", type=int, default=2, choices=[1, 2, 3])
    p.add_argument("--seqlen", type=_seqlen, default="auto")
    p.add_argument("--metadata", default="file", choices=["file", "mime", "none"])
    p.add_argument("--cache-dir", default=None, help="cache directory (default: $CONSUMER_CACHE_DIR or "
                   "~/.cache/consumer; 'off' keeps everything in memory)")


def _seqlen(text: str):
    return text if text == "auto" else int(text)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``consumer`` command."""
    p = argparse.ArgumentParser(prog="consumer", description="Training batches from the raw bytes of files.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="build a Consumer over the Python standard library and show a batch")
    d.add_argument("--dir", help="use this directory (sub-folders = classes) instead of the standard library")
    d.add_argument("--style", default="diff", choices=["diff", "concat"])
    d.add_argument("--n-bytes", type=int, default=2, choices=[1, 2, 3])
    d.add_argument("--seqlen", type=_seqlen, default=512)
    d.add_argument("--max-files", type=int, default=200, help="files per class at most (default 200)")
    d.add_argument("--batch-size", type=int, default=8)
    d.add_argument("--show", type=int, default=3, help="rows to decode")
    d.add_argument("--chars", type=int, default=240, help="decoded bytes shown per row")
    d.add_argument("--verbose", action="store_true", help="progress bar while libmagic runs")
    d.set_defaults(func=_demo)
    i = sub.add_parser("index", help="build or refresh the catalog and the sample index of a directory")
    _add_dataset_options(i)
    i.add_argument("--quiet", action="store_true", help="no progress bar")
    i.set_defaults(func=_index)
    n = sub.add_parser("info", help="classes, files, bytes, samples, top MIME types, file sizes")
    _add_dataset_options(n)
    n.add_argument("--top", type=int, default=10, help="MIME types shown")
    n.set_defaults(func=_info)
    q = sub.add_parser("sql", help="run a read-only SQL statement over the files view")
    _add_dataset_options(q)
    q.add_argument("statement", help='e.g. "SELECT class, count(*), sum(size) FROM files GROUP BY class"')
    q.add_argument("--json", action="store_true", help="rows as JSON objects")
    q.set_defaults(func=_sql)
    k = sub.add_parser("pack", help="pack every file's tokens into a Megatron .bin/.idx or Modalities .pbin store")
    _add_dataset_options(k)
    k.add_argument("prefix", help="output prefix: PREFIX.bin/.idx or PREFIX.pbin, plus PREFIX.consumer.*")
    k.add_argument("--format", default="megatron", choices=["megatron", "modalities"])
    k.add_argument("--verbose", action="store_true", help="progress bars")
    k.set_defaults(func=_pack)
    t = sub.add_parser("inspect", help="counts, dtype, classes and a decoded document of a packed store")
    t.add_argument("prefix")
    t.add_argument("--tokens", type=int, default=64, help="tokens of the first document shown")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=_inspect)
    c = sub.add_parser("cache", help="list or clear cached indexes")
    c.add_argument("action", choices=["list", "clear"])
    c.add_argument("--cache-dir", default=None)
    c.add_argument("--catalog", action="store_true", help="clear: also delete the file catalog")
    c.set_defaults(func=_cache)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 2 bad input, 1 other failure)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConsumerError as e:
        print(f"consumer: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"consumer: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001  (a bug: still one line, with its type, and exit 1)
        print(f"consumer: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
