"""Catalog build to the first answer, and the byte predicate, against Daft and DuckDB on the same files.

Corpus: ``--files`` small real files (64 B .. 640 B) in 4 class folders, a quarter of them PNG-headed (the
query_engine probe's generator), generated once under ``--data`` and reused. Per system and repetition, a
**fresh process** (:mod:`benchmarks.peers.firstanswer`), systems interleaved:

- *first answer*: from nothing (library imported; import time reported apart) to the answer of
  ``SELECT class, count(*), sum(size) FROM files GROUP BY class``: ``Consumer(dir, metadata=None,
  cache_dir=False)`` + ``ds.sql``; Daft ``from_glob_path`` + ``groupby``; DuckDB ``read_blob`` (sizes only);
- *byte predicate*: how many files start with ``\\x89PNG``: ``head(path, 4)`` in ``ds.sql``; Daft
  ``url.download()`` + slice; DuckDB ``read_blob`` + ``content[1:4]`` (best of ``--head-reps`` in the process).

Every system's answers must equal consumer's. Daft runs in its own venv (``benchmarks/.venvs/daft``, see
``benchmarks/setup_peers.sh``) when it is there.

    python -m benchmarks probe catalog_peers --files 10000,100000
"""

from __future__ import annotations

import argparse
import os
import sys

from ..children import peer_json
from ..measure import median
from ..peers import ROOT, resolve_python

NAME = "catalog_peers"
DESCRIPTION = "catalog build to the first GROUP BY answer and the head(path, 4) predicate: consumer, Daft, DuckDB"
SYSTEMS = ("consumer", "daft", "duckdb")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--files", default="10000", help="comma list of corpus sizes (default 10000)")
    parser.add_argument("--reps", type=int, default=3, help="fresh processes per system and size (interleaved)")
    parser.add_argument("--head-reps", type=int, default=3, help="byte-predicate runs inside each process")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma list of " + ",".join(SYSTEMS))
    parser.add_argument("--data", default=os.path.join(ROOT, "benchmarks", ".data"), help="generated corpora")
    parser.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH",
                        help="interpreter of daft (default: benchmarks/.venvs/daft or this one)")


def make_folder(data: str, n: int) -> str:
    """The corpus of ``n`` files under ``data`` (generated once; reused)."""
    from .query_engine import _write_files

    root = os.path.join(data, f"catalog-peers-{n}")
    if not os.path.exists(os.path.join(root, ".complete")):
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        _write_files(os.path.join(root, "files"), n)
        open(os.path.join(root, ".complete"), "w").close()
    return os.path.join(root, "files")


def _child(python: str, system: str, root: str, head_reps: int) -> dict:
    return peer_json(python, "benchmarks.peers.firstanswer", [system, root, str(head_reps)])


def summarize(runs: dict[str, list[dict]]) -> dict:
    """Per system: median first answer, best byte predicate, import time, answers equal to consumer's, and
    each figure as a multiple of consumer's (``x_consumer`` > 1: consumer is faster)."""
    out: dict[str, dict] = {}
    ref = runs.get("consumer", [{}])[0]
    for system, rs in runs.items():
        out[system] = {"first_answer_s": median(r["first_answer_s"] for r in rs),
                       "head_s": median(r["head_s"] for r in rs), "import_s": median(r["import_s"] for r in rs),
                       "processes": len(rs),
                       "answers_equal": None if not ref else (rs[0]["groups"] == ref["groups"]
                                                             and rs[0]["png"] == ref["png"])}
    ours = out.get("consumer")
    for row in out.values():
        row["first_answer_x_consumer"] = row["first_answer_s"] / ours["first_answer_s"] if ours else None
        row["head_x_consumer"] = row["head_s"] / ours["head_s"] if ours else None
    return out


def run(args: argparse.Namespace) -> dict:
    """Every size, every system, ``--reps`` fresh processes each (interleaved)."""
    systems = [s for s in args.systems.split(",") if s]
    bad = [s for s in systems if s not in SYSTEMS]
    if bad:
        raise SystemExit(f"--systems expects a comma list of {SYSTEMS}, got {args.systems!r}")
    given = dict(v.partition("=")[::2] for v in args.peer_python)
    pythons = {s: resolve_python(s, given) if s == "daft" else sys.executable for s in systems}
    sizes: dict[str, dict] = {}
    for n in (int(x) for x in args.files.split(",") if x):
        root = make_folder(args.data, n)
        runs: dict[str, list[dict]] = {s: [] for s in systems}
        absent: dict[str, str] = {}
        for rep in range(args.reps):
            for s in systems:
                if s in absent:
                    continue
                r = _child(pythons[s], s, root, args.head_reps)
                if "error" in r:
                    absent[s] = r["error"]
                    continue
                runs[s].append(r)
                print(f"catalog_peers {n} rep {rep} {s}: first answer {r['first_answer_s']:.2f} s, "
                      f"head {r['head_s']:.2f} s", file=sys.stderr, flush=True)
        sizes[str(n)] = {"systems": summarize({s: v for s, v in runs.items() if v}), "absent": absent,
                         "png": runs["consumer"][0]["png"] if runs.get("consumer") else None}
    return {"sizes": sizes, "reps": args.reps, "pythons": pythons}


def render_section(res: dict | None) -> list[str]:
    """The report's markdown lines for these results (none when the section did not run)."""
    if not res:
        return []
    out = ["## Catalog to the first answer, and the byte predicate, against Daft and DuckDB", "",
           "Small real files in 4 class folders, a quarter PNG-headed; every figure from fresh processes (library "
           f"import excluded), median of {res['reps']} interleaved processes. *first answer*: `SELECT class, "
           "count(*), sum(size) FROM files GROUP BY class` from nothing (`Consumer(dir, metadata=None, "
           "cache_dir=False)` + `ds.sql`; Daft `from_glob_path` + `groupby`; DuckDB `read_blob`, sizes only). "
           "*head*: files whose first 4 bytes are `\\x89PNG` (`head(path, 4)`; Daft `url.download()` + slice; "
           "DuckDB `content[1:4]`), best run inside the process. × consumer > 1: consumer is faster.", "",
           "| files | system | first answer (s) | × consumer | head (s) | × consumer | import (s) | answers = ours |",
           "|---|---|---|---|---|---|---|---|"]
    for n, size in res["sizes"].items():
        for system, r in size["systems"].items():
            out.append(f"| {int(n):,} | {system} | {r['first_answer_s']:.2f} | {r['first_answer_x_consumer']:.2f} | "
                       f"{r['head_s']:.3f} | {r['head_x_consumer']:.2f} | {r['import_s']:.2f} | "
                       f"{r['answers_equal']} |")
        out += [f"| {int(n):,} | {system} | not measured: {why[:100]} | | | | | |"
                for system, why in size["absent"].items()]
    return out + [""]


def verdicts(res: dict | None) -> list[dict]:
    """The targets of this section: cold catalog ≤ 1.0× Daft's time (#27 item 2)."""
    if not res:
        return []
    out = []
    for n, size in res["sizes"].items():
        daft = size["systems"].get("daft")
        if not daft or "consumer" not in size["systems"]:
            out.append({"target": f"first catalog answer ≤ 1.0× Daft's time ({int(n):,} files)", "figure": "—",
                        "met": None, "why": size["absent"].get("daft", "Daft not measured")})
            continue
        ratio = 1 / daft["first_answer_x_consumer"]
        out.append({"target": f"first catalog answer ≤ 1.0× Daft's time ({int(n):,} files)",
                    "figure": f"{ratio:.2f}× Daft's time", "met": ratio <= 1.0,
                    "why": "" if ratio <= 1.0 else
                    "per-file Python work in the cold build (listing, checks, catalog rows)"})
    return out
