"""How a command opens its dataset: the ``Consumer`` of the common options (``--shard``, ``--scheduler``, cache,
progress bars; a packed store's prefix, ours or another tool's, opens the store), and libmagic for every file when a
command needs all of them."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..sources.open import check_root
from ..storage import Storage
from .records import record_options


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


def _store_prefix(path: str) -> bool:
    """Whether ``path`` names a packed store (ours, by its sidecar, or one another tool wrote) rather than files."""
    if os.path.isdir(path) or not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        return False
    from ..packed.layout import SIDECAR_SUFFIX  # noqa: PLC0415  (the store modules load only for a store)
    from ..packed.peer import is_peer_store  # noqa: PLC0415

    return os.path.isfile(path + SIDECAR_SUFFIX) or is_peer_store(Path(path))


def _open(args: argparse.Namespace, engine: Any = None):
    from ..consumer import Consumer  # noqa: PLC0415

    if args.documents == "files" and _store_prefix(args.dir):  # info / sql on a packed store
        return Consumer.from_packed(args.dir, style=args.style, seqlen=args.seqlen, long_files=args.long_files,
                                    cache_dir=False if args.cache_dir == "off" else args.cache_dir)
    fps: Any = check_root(args.dir, "DIR") if args.documents == "files" else args.dir  # a file, a glob: records
    cache_dir = False if args.cache_dir == "off" else args.cache_dir
    class_to_id = None
    if getattr(args, "shard", None):  # this machine's deterministic 1/N of the files, ids of the whole corpus
        fps, class_to_id = _shard_of(fps, args.shard[0], args.shard[1],
                                     Storage.of(args.storage_options, cache_dir), _on_bad_file(args))
    return Consumer(fps, style=args.style, n_bytes=args.n_bytes, seqlen=args.seqlen, class_to_id=class_to_id,
                    long_files=args.long_files, cache_dir=cache_dir, verbose=_show_progress(args),
                    storage_options=args.storage_options, engine=engine, on_bad_file=_on_bad_file(args),
                    **record_options(args))


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


def _describe_all(ds, args: argparse.Namespace, engine: Any = None, content: bool = False,
                  want: tuple[str, ...] = ("description", "mime")) -> int:
    """Compute the libmagic columns ``want`` (description, MIME type) of every file lacking one (what the first SQL
    query needs), with a progress bar like the build's; returns the number of libmagic calls made. A packed store's
    files are not described (their headers were recorded at pack time). With ``engine`` (``--scheduler``)
    libmagic runs on the cluster (both columns), and the content columns too when ``content``."""
    return ds.documents.source.choose(files=lambda source: _described(ds, args, source, engine, content, want),
                                      store=lambda _: 0)


def _described(ds, args: argparse.Namespace, source: Any, engine: Any, content: bool,
               want: tuple[str, ...]) -> int:
    """:func:`_describe_all` for files and objects (catalog rows of their own)."""
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


def _lazy_calls(ds) -> int:
    """libmagic calls the statement made (the engine runs libmagic only for statements that need it, with its own
    progress bar); 0 when it never opened the catalog."""
    catalog = ds._session.open_catalog  # not ds.catalog: that would open (and check) a catalog it never needed
    return 0 if catalog is None else catalog.magic_calls

