"""The commands of the ``consumer`` command line: one function per subcommand (``demo``, ``index``, ``info``,
``sql``, ``cache``, ``pack``, ``verify``, ``inspect``), each taking the parsed arguments and returning the exit
code, plus the shared output helpers. :mod:`consumer.cli.main` builds the parser and dispatches here."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import sys
import sysconfig
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..dataset.display import human_bytes as _human
from ..errors import FormatError, InputError
from ..sources.open import check_root
from ..storage import Storage
from ..tokens.index import padding_share

__all__ = ["DEMO_TYPES", "stdlib_corpus", "content_summary", "demo", "index", "info", "sql", "cache", "pack",
           "verify", "inspect", "merge"]


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
    return 0


def _show_progress(args: argparse.Namespace) -> bool:
    """Progress bars: never with ``--quiet``, always with ``--verbose``, else only when stderr is a terminal."""
    if getattr(args, "quiet", False):
        return False
    return bool(getattr(args, "verbose", False)) or sys.stderr.isatty()


@contextlib.contextmanager
def _engine(args: argparse.Namespace) -> Iterator[Any]:
    """The Dask client of ``--scheduler ADDR`` (closed at the end), or None without it."""
    address = getattr(args, "scheduler", None)
    if not address:
        yield None
        return
    from ..scale.engines import connect  # noqa: PLC0415

    client = connect(address, "--scheduler")
    try:
        yield client
    finally:
        client.close()


def _open(args: argparse.Namespace, engine: Any = None):
    from ..consumer import Consumer  # noqa: PLC0415

    fps: Any = check_root(args.dir, "DIR")
    cache_dir = False if args.cache_dir == "off" else args.cache_dir
    class_to_id = None
    if getattr(args, "shard", None):  # this machine's deterministic 1/N of the files, ids of the whole corpus
        fps, class_to_id = _shard_of(fps, args.shard[0], args.shard[1],
                                     Storage.of(args.storage_options, cache_dir), _on_bad_file(args))
    return Consumer(fps, style=args.style, n_bytes=args.n_bytes, seqlen=args.seqlen, class_to_id=class_to_id,
                    long_files=args.long_files, metadata=None if args.metadata == "none" else args.metadata,
                    cache_dir=cache_dir, verbose=_show_progress(args), storage_options=args.storage_options,
                    engine=engine, on_bad_file=_on_bad_file(args))


def _on_bad_file(args: argparse.Namespace) -> str:
    """``on_bad_file`` of ``--skip-bad-files``."""
    return "skip" if getattr(args, "skip_bad_files", False) else "raise"


def _shard_of(root: str, i: int, n: int, storage: Storage,
              mode: str = "raise") -> tuple[dict[str, list[str]], dict[str, int]]:
    """Shard ``i`` of ``n`` of a directory corpus or URL prefix (by a hash of each path: stable when files
    are added) and the ``class_to_id`` of the whole corpus, so every shard numbers classes alike."""
    from ..sources.corpus import normalise  # noqa: PLC0415
    from ..sources.listing import local_directory, scan_directory  # noqa: PLC0415
    from ..sources.open import expand_fps  # noqa: PLC0415
    from ..sources.urls import shard_of  # noqa: PLC0415

    local = local_directory(root)
    corpus = normalise(expand_fps(root, storage)) if local is None else scan_directory(local, mode).corpus
    paths, cls = corpus.flat()
    mine = shard_of(paths, n) == i
    out: dict[str, list[str]] = {}
    for p, c, keep in zip(paths, cls, mine.tolist()):
        if keep:
            out.setdefault(corpus.class_names[c], []).append(p)
    if not out:
        raise InputError(f"--shard {i}/{n}: this shard holds no file of {root!r} ({len(paths)} files in all)")
    return out, {c: k for k, c in enumerate(corpus.class_names)}


def merge(args: argparse.Namespace) -> int:
    """``consumer merge OUT IN...``: packed stores into one (corpus order), or ``--catalogs`` cache dirs."""
    t0 = time.perf_counter()
    if args.catalogs:
        from ..catalog.catalog import CATALOG_NAME, Catalog  # noqa: PLC0415

        os.makedirs(args.out, exist_ok=True)
        target = Catalog(os.path.join(args.out, CATALOG_NAME))
        rows = target.merge_from([os.path.join(check_root(d, "IN", urls=False), CATALOG_NAME) for d in args.inputs])
        print(f"merged {rows} catalog rows from {len(args.inputs)} catalogs into {args.out} "
              f"({target.count()} rows), {time.perf_counter() - t0:.2f} s")
        target.close()
        return 0
    from ..packed import merge_packed  # noqa: PLC0415

    summary = merge_packed(args.inputs, args.out)
    print(f"merged {len(args.inputs)} stores: {summary['documents']} documents, {summary['tokens']} tokens into "
          f"{summary['prefix']} in {summary['seconds']:.2f} s")
    return 0


def _describe_all(ds, args: argparse.Namespace, engine: Any = None, content: bool = False,
                  want: tuple[str, ...] = ("description", "mime")) -> int:
    """Compute the libmagic columns ``want`` (description, MIME type) of every file lacking one (what the first SQL
    query needs), with a progress bar like the build's; returns the number of libmagic calls made. A packed store's
    files are not described (their headers were recorded at pack time). With ``engine`` (``--scheduler``)
    libmagic runs on the cluster (both columns), and the content columns too when ``content``."""
    source = ds.documents.source
    if not source.durable:
        return 0
    if engine is not None:
        from ..scale.engines import resolve_engine  # noqa: PLC0415
        from ..scale.scan import complete_catalog  # noqa: PLC0415

        on = resolve_engine(engine, "--scheduler")
        if on is None:
            raise InputError("--scheduler: no engine")
        done = complete_catalog(ds.catalog, ds.documents, on, content=content, verbose=_show_progress(args))
        return done["libmagic"]
    before = ds.catalog.magic_calls
    ds.catalog.sync(ds.files, source.sizes, source.stamps, want=want, verbose=_show_progress(args),
                    describe=source.describe)
    return ds.catalog.magic_calls - before


def _summary(ds, seconds: float, extra_calls: int = 0) -> str:
    """One line: files, bytes, index cache hit or miss, libmagic calls, wall time."""
    info = ds.build_info
    return (f"{len(ds.files)} files, {_human(float(ds.documents.doc_size.sum()))}, index cache {info['cache']}, "
            f"libmagic calls {info['libmagic_calls'] + extra_calls}, {seconds:.2f} s")


def _finish(ds, args: argparse.Namespace, t0: float, extra_calls: int = 0) -> None:
    """The summary line on stderr (not with ``--quiet``), after the command's output."""
    sys.stdout.flush()
    if not args.quiet:
        print(f"consumer: {_summary(ds, time.perf_counter() - t0, extra_calls)}", file=sys.stderr)


def index(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    with _engine(args) as engine:
        ds = _open(args, engine)
    print(f"{ds!r}")
    print(_summary(ds, time.perf_counter() - t0))
    if ds.build_info["key"]:
        print(f"cache key {ds.build_info['key']}")
    return 0


def _table(header: list[str], rows: list[tuple]) -> str:
    cells = [[str(c) for c in header]] + [["NULL" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _types_column(ds) -> tuple[str, str]:
    """The libmagic column ``info`` groups files by, and its title: the one the build already computed (the
    description with ``--metadata file``), so each file costs one libmagic call; the MIME type otherwise."""
    return ("description", "file types") if ds.metadata == "file" else ("mime", "MIME types")


def _skipped_lines(info: dict) -> list[str]:
    """What the directory scan left out (bad files, by reason, with examples) and the aliases it dropped."""
    lines = []
    skipped = info.get("skipped") or {}
    if skipped:
        reasons = ", ".join(f"{r}: {n}" for r, n in sorted(skipped.items()))
        lines.append(f"skipped {sum(skipped.values())} bad file(s) ({reasons}), e.g.")
        lines.extend(f"  {path} ({reason})" for path, reason in info.get("skipped_examples", []))
    if info.get("aliases"):
        lines.append(f"aliases: {info['aliases']} second name(s) of files already listed in their class "
                     "(hard links, symlinks) left out")
    return lines


def info(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    with _engine(args) as engine:
        ds = _open(args, engine)
        column, title = _types_column(ds)
        calls = _describe_all(ds, args, engine, content=not args.no_content and ds.documents.source.whole_files,
                              want=(column,))
    per = ds.get_dict()["per_class"]
    print(f"{ds!r}\n")
    rows = [(c, ds.class_to_id[c], per[c]["files"], _human(per[c]["bytes"]), per[c]["tokens"], per[c]["samples"])
            for c in ds.classes]
    rows.append(("(all)", "", len(ds.files), _human(sum(p["bytes"] for p in per.values())),
                 sum(p["tokens"] for p in per.values()), len(ds)))
    print(_table(["class", "id", "files", "bytes", "tokens", "samples"], rows))
    print(f"\nrows: {len(ds)} samples of {ds.seqlen} tokens, {padding_share(ds.index):.0%} of all row tokens are PAD")
    types = ds.sql(f"SELECT {column}, count(*) AS files, sum(size) AS bytes FROM files GROUP BY {column} "
                   f"ORDER BY files DESC, {column} LIMIT ?", (args.top,))
    print(f"\ntop {title}\n" + _table([column, "files", "bytes"], [(m, n, _human(b)) for m, n, b in types]))
    skipped = _skipped_lines(ds.build_info)
    if skipped:
        print("\n" + "\n".join(skipped))
    sizes = np.sort(ds.documents.doc_size)
    q = [0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1]
    print("\nfile sizes\n" + _table(["min", "p10", "p25", "median", "p75", "p90", "p99", "max"],
                                     [tuple(_human(float(np.quantile(sizes, x))) for x in q)]))
    if not ds.documents.source.whole_files:  # the content pass reads whole files: local ones only
        print(f"\ncontent summary: skipped (the files are {ds.documents.source.kind}; entropy, printable and "
              "duplicates need local files)")
    elif not args.no_content:
        print("\n" + content_summary(ds.sql("SELECT class, entropy, printable FROM files"), ds.duplicates()))
    _finish(ds, args, t0, calls)
    return 0


def _cell(value):
    """A value for CSV / JSON output: bytes (BLOBs) as hex, everything else as it is."""
    return value.hex() if isinstance(value, bytes) else value


def content_summary(rows, groups, *, top: int = 5) -> str:
    """The content part of ``consumer info``: per class the 10th, 50th and 90th percentiles of entropy
    (bits per byte) and of the printable fraction (as %), then the duplicate summary.

    ``rows``: ``(class, entropy, printable)`` per file, e.g.
    ``ds.sql("SELECT class, entropy, printable FROM files")`` (rows with NULLs are skipped);
    ``groups``: :class:`~consumer.catalog.duplicates.DuplicateGroup` list (``find_duplicates``); at most
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


def _lazy_calls(ds) -> int:
    """libmagic calls the statement made (the engine runs libmagic only for statements that need it, with its own
    progress bar); 0 when it never opened the catalog."""
    catalog = ds._session.open_catalog  # not ds.catalog: that would open (and check) a catalog it never needed
    return 0 if catalog is None else catalog.magic_calls


def sql(args: argparse.Namespace) -> int:
    from ..catalog.content import named_content_columns  # noqa: PLC0415

    t0 = time.perf_counter()
    with _engine(args) as engine:
        ds = _open(args, engine)
        calls = 0
        if engine is not None:  # --scheduler: the cluster describes (and, when named, reads) every file up front
            calls = _describe_all(ds, args, engine, content=bool(named_content_columns(args.statement)))
    before = _lazy_calls(ds)  # without a cluster the engine computes lazy columns only when a statement needs them
    if args.format == "parquet":
        from ..query.export import write_parquet  # noqa: PLC0415
        if not args.output:
            raise InputError("--format parquet needs -o/--output FILE.parquet")
        table = ds.to_arrow(args.statement, timeout=args.timeout or None)
        print(f"wrote {table.num_rows} rows to {write_parquet(table, args.output)}")
        _finish(ds, args, t0, calls + _lazy_calls(ds) - before)
        return 0
    rows = ds.sql(args.statement, timeout=args.timeout or None)
    if args.format == "json":
        print(json.dumps([{k: _cell(v) for k, v in r.items()} for r in rows.as_dicts()], indent=1, default=str))
    elif args.format == "csv":
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(rows.columns)
        out.writerows([_cell(v) for v in r] for r in rows)
    else:
        print(_table(rows.columns, list(rows)))
    _finish(ds, args, t0, calls + _lazy_calls(ds) - before)
    return 0


def cache(args: argparse.Namespace) -> int:
    from ..dataset.cache import clear, list_entries
    from ..storage import check_cache_dir  # noqa: PLC0415

    root = check_cache_dir(args.cache_dir)
    if root is None:
        raise InputError(f"--cache-dir: the cache command needs a directory, got {args.cache_dir!r}")
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


def pack(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    with _engine(args) as engine:
        ds = _open(args, engine)
        summary = ds.pack(args.prefix, format=args.format, verbose=_show_progress(args), engine=engine)
    print(f"packed {summary['documents']} documents, {summary['tokens']} tokens ({summary['dtype']}) "
          f"from {_human(summary['source_bytes'])} of files into {_human(summary['bytes'])} "
          f"in {summary['seconds']:.2f} s:")
    for kind, path in summary["files"].items():
        print(f"  {kind:<8} {path}")
    _finish(ds, args, t0)
    return 0


def _store_options(args: argparse.Namespace) -> dict:
    """``storage_options`` and ``cache_dir`` of a store at a URL (a local store uses neither)."""
    return {"storage_options": args.storage_options, "cache_dir": False if args.cache_dir == "off" else args.cache_dir}


def verify(args: argparse.Namespace) -> int:
    from ..packed import verify_packed  # noqa: PLC0415

    r = verify_packed(args.prefix, errors="report", **_store_options(args))
    if args.json:
        print(json.dumps(r, indent=1))
        return 0 if r["ok"] else 2
    if not r["ok"]:  # every damaged chunk on its own line (stdout), then the one-line error (stderr, exit 2)
        for b in r["bad_chunks"]:
            print(f"{r['prefix']}: damaged chunk {b['chunk']}: bytes {b['bytes'][0]}..{b['bytes'][1]} of {b['file']}: "
                  f"crc32c expected {b['expected']}, got {b['actual']}")
        raise FormatError(r["error"])
    check = "sha256 ok" if r["checksum"] == "ok" else "no checksum recorded (packed by an older version)"
    chunks = f"{r['chunks']} chunks of {r['chunk_bytes']} bytes ok" if r["chunks"] else \
        "no chunk sums (packed by an older version)"
    print(f"{r['prefix']}: ok: {r['documents']} documents, {r['tokens']} tokens, ids in [0, {r['max_id']}], {check}, "
          f"{chunks}, {r['seconds']:.2f} s")
    return 0


def inspect(args: argparse.Namespace) -> int:
    from ..packed import inspect_packed  # noqa: PLC0415

    info = inspect_packed(args.prefix, preview_tokens=args.tokens, **_store_options(args))
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


