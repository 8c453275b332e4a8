"""The packed-store commands: ``pack``, ``merge``, ``verify`` and ``inspect``."""

from __future__ import annotations

import argparse
import json
import os
import time

from ..dataset.display import human_bytes as _human
from ..errors import FormatError
from ..sources.open import check_root
from .opening import _engine, _open, _show_progress
from .output import _finish, _table

__all__ = ["pack", "merge", "verify", "inspect"]


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

