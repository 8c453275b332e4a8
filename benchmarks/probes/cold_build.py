"""Cold build with libmagic headers against gperc 0.7, and where the time of both goes.

Workload: the ``small`` corpus of :func:`benchmarks.corpora.make_corpus` (``--files`` files of 256 B .. 4 KB,
seed 1: the corpus of the report's *Build and reopen* table), ``metadata="file"``.

Measured in this one run, ``--repeat`` rounds, each round running in turn (interleaved, so the load of a
shared machine falls on both alike), best round kept:

- ``consumer``: ``Consumer(root, metadata="file", cache_dir=<empty>, style="concat", seqlen=2048)`` in a fresh
  process (import excluded), as the report's scale section runs it;
- ``gperc``: gperc 0.7's ``Consumer(fps, ...)`` in its peer process (it runs ``file`` once per class over
  all the class's paths), when gperc is installed;
- where the time goes, on the first ``--probe`` files, one thread: libmagic by path (``Magic().from_file``,
  what the build calls), libmagic on the bytes (``from_buffer`` of the whole file), and the same by path
  with the check flags that are off in the build's output for these types (``MAGIC_NO_CHECK_TAR``,
  ``_CDF``, ``_ELF``, ``_APPTYPE``, ``_COMPRESS``, ``_TOKENS``), with how many descriptions differ from by-path;
  the ``file -b`` command over the same files (gperc's tool).

Run: ``python -m benchmarks probe cold_build [--files 10000] [--repeat 3] [--probe 2000]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ..children import child_build
from ..corpora import make_corpus
from ..peers import PeerUnavailable, peer_version, resolve_python, start_peer

NAME = "cold_build"
DESCRIPTION = "cold build with libmagic headers against gperc 0.7, and libmagic's per-file costs"

_FLAGS = ("MAGIC_NO_CHECK_TAR", "MAGIC_NO_CHECK_CDF", "MAGIC_NO_CHECK_ELF", "MAGIC_NO_CHECK_APPTYPE",
          "MAGIC_NO_CHECK_COMPRESS", "MAGIC_NO_CHECK_TOKENS")


def gperc_build(corpus, work: str, peer_python: dict[str, str]) -> dict:
    """gperc's build of the corpus in a fresh peer process: ``{"wall_s": ...}`` or ``{"error": ...}``."""
    try:
        os.makedirs(work, exist_ok=True)
        peer = start_peer("gperc", resolve_python("gperc", peer_python), os.path.join(work, "peer-gperc-cold.log"))
        peer_version(peer)
        peer.call("setup", key="cold", args={"fps": corpus.fps, "style": "diff", "n_bytes": 2, "seqlen": 8192})
        r = peer.call("convert", key="cold")
        peer.close()
        return {"wall_s": r["seconds"]}
    except (RuntimeError, PeerUnavailable) as exc:
        return {"error": str(exc)}


def probe(paths: list[str]) -> dict:
    """Per-file seconds (one thread) of libmagic by path, on the bytes, with fewer checks, and ``file -b``."""
    from consumer.sources.magic import import_magic

    magic = import_magic()
    by_path = magic.Magic()
    fewer = magic.Magic()
    for name in _FLAGS:
        fewer.flags |= getattr(magic, name)
    magic.magic_setflags(fewer.cookie, fewer.flags)
    datas = []
    for p in paths:
        with open(p, "rb") as f:
            datas.append(f.read())
    out: dict = {"files": len(paths)}
    ref = None
    for label, fn, args in (("by_path", by_path.from_file, paths), ("from_buffer", by_path.from_buffer, datas),
                            ("fewer_checks", fewer.from_file, paths)):
        t0 = time.process_time()
        res = [fn(a) for a in args]
        out[label] = {"us_per_file": (time.process_time() - t0) / len(paths) * 1e6}
        if ref is None:
            ref = res
        out[label]["differ"] = sum(a != b for a, b in zip(ref, res))
    t0 = time.perf_counter()
    subprocess.run(["file", "-b", *paths], check=True, capture_output=True)
    out["file_cli"] = {"us_per_file": (time.perf_counter() - t0) / len(paths) * 1e6}
    return out


def measure(files: int, repeat: int, n_probe: int, data: str, work: str, log=print, gperc: bool = True,
            peer_python: dict[str, str] | None = None) -> dict:
    """Every figure of the module docstring, as a dict (gperc left out unless ``gperc``)."""
    corpus = make_corpus(data, "small", files, 1)
    rounds = []
    for r in range(repeat):
        cache = os.path.join(work, f"cold-cache-{r}")
        shutil.rmtree(cache, ignore_errors=True)
        ours = child_build(corpus.root, cache, "file")
        shutil.rmtree(cache, ignore_errors=True)
        theirs = gperc_build(corpus, work, peer_python or {}) if gperc else {"error": "not requested (--peers)"}
        rounds.append({"consumer": ours, "gperc": theirs})
        log(f"  round {r}: consumer {ours.get('wall_s')} s, gperc {theirs.get('wall_s', theirs.get('error'))}")
    ours_s = min((x["consumer"]["wall_s"] for x in rounds if "wall_s" in x["consumer"]), default=None)
    theirs_s = min((x["gperc"]["wall_s"] for x in rounds if "wall_s" in x["gperc"]), default=None)
    out = {"files": files, "cores": os.cpu_count(), "rounds": rounds, "consumer_s": ours_s, "gperc_s": theirs_s,
           "ratio": theirs_s / ours_s if ours_s and theirs_s else None,
           "gperc_error": next((x["gperc"]["error"] for x in rounds if "error" in x["gperc"]), None)}
    all_paths = sorted(p for ps in corpus.fps.values() for p in ps)
    step = max(1, len(all_paths) // max(n_probe, 1))
    out["probe"] = probe(all_paths[::step][:n_probe])
    return out


def _differ(n: int) -> str:
    return f"{n} raw description{'' if n == 1 else 's'} differ{'s' if n == 1 else ''} from by-path"


def render_section(res: dict | None) -> list[str]:
    """The report's markdown lines for the ``cold`` results (none when the section did not run)."""
    if not res:
        return []
    p = res["probe"]
    g = f"{res['gperc_s']:.2f}" if res["gperc_s"] else f"not measured ({res['gperc_error']})"
    ratio = f"**{res['ratio']:.2f}×**" if res["ratio"] else "—"
    out = ["## Cold build with headers against gperc", "",
           f"`Consumer(small corpus of {res['files']:,} files, metadata=\"file\")` with an empty cache in a fresh "
           f"process, against gperc 0.7's build of the same files, {res['cores']} cores, best of "
           f"{len(res['rounds'])} interleaved rounds. Target: ≥ 3× gperc, headers identical to libmagic by path "
           "(checked by `tests/catalog/test_headers_identity.py`).", "",
           "| consumer (s) | gperc 0.7 (s) | gperc ÷ consumer |", "|---|---|---|",
           f"| {res['consumer_s']:.2f} | {g} | {ratio} |", "",
           f"Where the time goes, one thread, {p['files']:,} of the files, CPU per file: libmagic by path "
           f"{p['by_path']['us_per_file']:.0f} µs; on the file's bytes (`from_buffer`) "
           f"{p['from_buffer']['us_per_file']:.0f} µs ({_differ(p['from_buffer']['differ'])}); with "
           f"the unused checks off {p['fewer_checks']['us_per_file']:.0f} µs ({_differ(p['fewer_checks']['differ'])}); "
           f"`file -b` over the same files (gperc's tool, wall) {p['file_cli']['us_per_file']:.0f} µs. libmagic's "
           "own matching is nearly all of it (a profile puts ~60% in libmagic and ~15% in the C library's regex "
           "engine), so reading the bytes ourselves or dropping checks gains a few percent at most; both builds do "
           "the same libmagic work per file, ours on every core (gperc's `file` runs on one), which bounds the "
           "ratio near the number of cores, and on a machine whose cores are busy with other jobs the two builds "
           "cost about the same (the same CPU per file)."]
    return out + [""]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--probe", type=int, default=2000, help="files of the one-thread libmagic probe")
    parser.add_argument("--data", default=None, help="corpora folder (default: a temporary one)")
    parser.add_argument("--no-gperc", action="store_true", help="leave gperc out")


def run(args: argparse.Namespace) -> dict:
    """Measure every figure of the module docstring in a temporary work folder."""
    tmp = tempfile.mkdtemp(prefix="bench-cold-build-")
    try:
        return measure(args.files, args.repeat, args.probe, args.data or os.path.join(tmp, "data"), tmp,
                       log=lambda *a: print(*a, file=sys.stderr, flush=True), gperc=not args.no_gperc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
