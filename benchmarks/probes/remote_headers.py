"""How often libmagic from byte ranges differs from libmagic on the whole file (the figures of docs/remote.md).

Sample: up to 8 regular files of each file extension found under a few system directories (the same
seed gives the same sample on the same machine). Each file is described by ``magic.from_file`` on the
file itself and by :func:`consumer.sources.object_magic.describe_prefixes` through ``file://`` URLs (the same
range planning, sparse-file reconstruction and libmagic settings as for S3 or HTTP; only the transport
differs), for several ``head_bytes`` / ``tail_bytes``. Prints the number of differing raw descriptions per
setting, by the first field of the true description, and each differing file.

Run: ``python -m benchmarks probe remote_headers [--per-ext 8] [--roots /usr/bin /usr/lib ...]``
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import time

from consumer.sources.magic import import_magic
from consumer.sources.object_magic import describe_prefixes

NAME = "remote_headers"
DESCRIPTION = "libmagic from byte ranges against libmagic on the whole file"

ROOTS = ["/usr/bin", "/usr/lib/x86_64-linux-gnu", "/usr/share", "/usr/lib/python3.11", "/etc"]


def sample_files(roots: list[str], per_ext: int, seed: int) -> list[str]:
    """Up to ``per_ext`` readable regular files (no symlinks) per extension, chosen with ``seed``."""
    files = []
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for name in names:
                p = os.path.join(dirpath, name)
                if os.path.isfile(p) and not os.path.islink(p) and os.access(p, os.R_OK):
                    files.append(p)
    files.sort()
    random.Random(seed).shuffle(files)
    by_ext: dict[str, list[str]] = collections.defaultdict(list)
    for p in files:
        by_ext[os.path.splitext(p)[1]].append(p)
    return sorted(p for ps in by_ext.values() for p in ps[:per_ext])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--per-ext", type=int, default=8)
    parser.add_argument("--roots", nargs="*", default=ROOTS)
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> dict:
    """Describe the sample both ways; per setting, how many differ and which."""
    magic = import_magic()
    cookie = magic.Magic()
    truth = {}
    for p in sample_files(args.roots, args.per_ext, args.seed):
        try:
            truth[p] = cookie.from_file(p)
        except Exception:  # noqa: BLE001  (unreadable for libmagic: not part of the sample)
            continue
    paths = sorted(truth)
    urls = ["file://" + p for p in paths]
    sizes = [os.path.getsize(p) for p in paths]
    out: dict = {"files": len(paths), "extensions": len({os.path.splitext(p)[1] for p in paths}),
                 "above_128_kib": sum(s > 128 << 10 for s in sizes), "settings": []}
    for head, tail in ((4 << 10, 4 << 10), (64 << 10, 64 << 10), (1 << 20, 64 << 10)):
        t = time.perf_counter()
        got = describe_prefixes(urls, sizes, kinds=("description",), head_bytes=head, tail_bytes=tail)
        secs = time.perf_counter() - t
        diff: collections.Counter = collections.Counter()
        differing = []
        for p, (d, _) in zip(paths, got):
            if d != truth[p]:
                diff[truth[p].split(",")[0][:40]] += 1
                differing.append({"path": p, "bytes": os.path.getsize(p), "file": truth[p][:140], "ranges": d[:140]})
        out["settings"].append({"head_kib": head >> 10, "tail_kib": tail >> 10, "differ": sum(diff.values()),
                                "seconds": secs, "by_kind": dict(diff.most_common()), "differing": differing})
    return out
