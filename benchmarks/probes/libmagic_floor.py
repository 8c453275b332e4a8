"""The cold build with headers against libmagic alone: libmagic's time per file is the build's floor.

On the ``small`` corpus (``--files`` files), in this one run:

- ``build``: ``Consumer(root, metadata="file", cache_dir=<empty>)`` in a fresh process (interpreter start and
  imports included, as a user meets it);
- ``libmagic``: :func:`consumer.sources.magic.describe_files` over the same paths in a fresh process (the thread
  pool the build uses, descriptions only), same start-up included;
- ``libmagic_us_per_file``: one thread, ``Magic().from_file`` per path, CPU µs per file.

``build / libmagic`` near 1 means the build costs what libmagic costs.

Run: ``python benchmarks/probes/libmagic_floor.py [--files 10000]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

NAME = "libmagic_floor"
DESCRIPTION = "cold build with libmagic headers against libmagic alone over the same files"

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_BUILD = """
import sys
from consumer import Consumer
Consumer(sys.argv[1], metadata="file", cache_dir=sys.argv[2])
"""

_MAGIC = """
import os, sys
from consumer.sources.magic import describe_files
paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(sys.argv[1]) for f in fs if not f.startswith("."))
for _ in describe_files(paths, kinds=("description",)):
    pass
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--files``, ``--data-root``, ``--probe``."""
    parser.add_argument("--files", type=int, default=10_000, help="files in the corpus (default: %(default)s)")
    parser.add_argument("--probe", type=int, default=2000, help="files timed one by one (default: %(default)s)")
    parser.add_argument("--data-root", default=None, help="where the corpus is made (default: a temporary folder)")


def _wall(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, env=env, capture_output=True)
    return time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict:
    """Seconds of the build and of libmagic alone, their ratio, and libmagic's CPU µs per file."""
    sys.path.insert(0, _REPO)
    from benchmarks.corpora import make_corpus  # noqa: PLC0415
    from consumer.sources.magic import import_magic  # noqa: PLC0415

    root = args.data_root or os.path.join(tempfile.gettempdir(), "consumer-bench-libmagic")
    corpus = make_corpus(root, "small", args.files, seed=1)
    env = {**os.environ, "PYTHONPATH": _REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cache = tempfile.mkdtemp(prefix="libmagic-floor-cache-")
    try:
        build = _wall([sys.executable, "-c", _BUILD, corpus.root, cache], env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    magic_s = _wall([sys.executable, "-c", _MAGIC, corpus.root], env)
    cookie = import_magic().Magic()
    paths = [p for ps in corpus.fps.values() for p in ps][:args.probe]
    t0 = time.process_time()
    for p in paths:
        cookie.from_file(p)
    per_file = (time.process_time() - t0) / max(len(paths), 1)
    return {"files": corpus.n_files, "build_s": round(build, 3), "libmagic_s": round(magic_s, 3),
            "build_vs_libmagic": round(build / magic_s, 3), "libmagic_us_per_file": round(per_file * 1e6, 1)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(parser)
    print(json.dumps(run(parser.parse_args()), indent=1))
