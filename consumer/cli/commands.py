"""The commands of the ``consumer`` command line: one function per subcommand (``demo``, ``index``, ``info``,
``sql``, ``cache``, ``pack``, ``verify``, ``inspect``, ``merge``), each taking the parsed arguments and returning the
exit code. :mod:`consumer.cli.main` builds the parser and dispatches here. The dataset commands live here; the
demo in :mod:`~consumer.cli.demo`, the store commands in :mod:`~consumer.cli.store`, opening a dataset in
:mod:`~consumer.cli.opening` and the output helpers in :mod:`~consumer.cli.output`."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time

import numpy as np

from ..dataset.display import human_bytes as _human
from ..errors import InputError
from ..tokens.index import padding_share
from .demo import DEMO_TYPES, demo, stdlib_corpus
from .opening import _describe_all, _engine, _lazy_calls, _open
from .output import _cell, _finish, _summary, _table, _unit, content_summary
from .records import raw_index
from .store import inspect, merge, pack, verify

__all__ = ["DEMO_TYPES", "stdlib_corpus", "content_summary", "demo", "index", "info", "sql", "cache", "pack",
           "verify", "inspect", "merge"]


def index(args: argparse.Namespace) -> int:
    if args.raw_index:
        return raw_index(args)
    t0 = time.perf_counter()
    with _engine(args) as engine:
        ds = _open(args, engine)
    print(f"{ds!r}")
    print(_summary(ds, time.perf_counter() - t0))
    if ds.build_info["key"]:
        print(f"cache key {ds.build_info['key']}")
    return 0


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
        calls = _describe_all(ds, args, engine, content=not args.no_content, want=(column,))
    per = ds.get_dict()["per_class"]
    unit = _unit(ds)  # the documents relation is files in files mode: one set of statements for both
    print(f"{ds!r}\n")
    rows = [(c, ds.class_to_id[c], per[c]["files"], _human(per[c]["bytes"]), per[c]["tokens"], per[c]["samples"])
            for c in ds.classes]
    rows.append(("(all)", "", len(ds.files), _human(sum(p["bytes"] for p in per.values())),
                 sum(p["tokens"] for p in per.values()), len(ds)))
    print(_table(["class", "id", unit, "bytes", "tokens", "samples"], rows))
    print(f"\nrows: {len(ds)} samples of {ds.seqlen} tokens, {padding_share(ds.index):.0%} of all row tokens are PAD")
    types = ds.sql(f"SELECT {column}, count(*) AS n, sum(size) AS bytes FROM documents GROUP BY {column} "
                   f"ORDER BY n DESC, {column} LIMIT ?", (args.top,))
    print(f"\ntop {title}\n" + _table([column, unit, "bytes"], [(m, n, _human(b)) for m, n, b in types]))
    skipped = _skipped_lines(ds.build_info)
    if skipped:
        print("\n" + "\n".join(skipped))
    sizes = np.sort(ds.documents.doc_size)
    q = [0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1]
    print(f"\n{unit[:-1]} sizes\n" + _table(["min", "p10", "p25", "median", "p75", "p90", "p99", "max"],
                                     [tuple(_human(float(np.quantile(sizes, x))) for x in q)]))
    if not args.no_content:  # the content pass reads the files' bytes: a packed store has tokens instead
        print("\n" + ds.documents.source.choose(
            files=lambda _: content_summary(ds.sql("SELECT class, entropy, printable FROM documents"),
                                            ds.duplicates(), unit=unit),
            store=lambda _: f"content summary: skipped (the files are {ds.documents.source.kind}; entropy, "
                            "printable and duplicates read the files' bytes)"))
    _finish(ds, args, t0, calls)
    return 0


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
    from ..dataset.cache import list_entries
    from ..dataset.clear import clear
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

