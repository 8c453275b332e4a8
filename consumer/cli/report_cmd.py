"""``consumer report PATH -o report.html``: the corpus report of a directory, a URL prefix, container files of
documents (``--documents jsonl|lines|parquet|tar`` with ``--text-field``/``--class-field``: PATH may be a file or a
glob; the corpus options hold them) or (``--packed``) a packed store, as one self-contained HTML page
(docs/report.md). :mod:`consumer.cli.main` registers it."""

from __future__ import annotations

import argparse
import time

from .commands import _finish, _open

__all__ = ["add_arguments", "report"]

EXAMPLE = ("consumer report corpus/ -o corpus.html --content",
           "one HTML page: class balance, file types, sizes, padding per seqlen choice, entropy and duplicates, "
           "extremes and decoded samples, each number beside the SQL statement that computed it")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The report's own options (the corpus options are added by the caller)."""
    p.add_argument("-o", "--output", default="report.html", help="the HTML file written (default: %(default)s)")
    p.add_argument("--content", action="store_true",
                   help="also the content panel (entropy, printable share, duplicates) and libmagic's types: reads "
                        "every file once, remembered in the catalog (default: off)")
    p.add_argument("--types", action="store_true",
                   help="libmagic's MIME types and descriptions per class, even for a dataset built with "
                        "--metadata none: one libmagic call per file, remembered (default: off)")
    p.add_argument("--packed", action="store_true",
                   help="PATH is the prefix of a packed store ('consumer pack'), not a directory (default: off)")


def report(args: argparse.Namespace) -> int:
    """Build (or open from the cache) the dataset, write its report, print the report's path."""
    t0 = time.perf_counter()
    if args.packed:
        from ..consumer import Consumer  # noqa: PLC0415

        ds = Consumer.from_packed(args.dir, style=args.style, seqlen=args.seqlen, long_files=args.long_files,
                                  storage_options=args.storage_options,
                                  cache_dir=False if args.cache_dir == "off" else args.cache_dir)
    else:
        ds = _open(args)
    path = ds.report(args.output, content=args.content, types=args.types)
    print(f"wrote {path}")
    if not args.packed:
        _finish(ds, args, t0)
    return 0
