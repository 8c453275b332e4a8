"""``python -m benchmarks run --quick|--full``, ``python -m benchmarks report RESULTS.json`` and
``python -m benchmarks probe NAME [ARGS]`` / ``probe --list`` (one registered probe: :mod:`benchmarks.registry`).

``run`` measures everything (see :mod:`benchmarks.suite`), writes the results as JSON next to the report,
the PNG plots, and the report (default ``docs/benchmarks.md``). ``report`` re-renders a report and its
plots from a saved results file without measuring anything.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

from .peers import FRESH_PEERS, PEERS, ROOT
from .suite_probe_runs import FULL_ONLY, SPECS

__all__ = ["main"]

SECTIONS = ("workloads", "limits", "fetchpaths", "loader", "filesize", "grid", "scale", "catalog", "coldstore", "lance",
            "content", "cold", "remote", "gpu", "dask", "query", *SPECS)


def _peer_python(values: list[str]) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or (name not in PEERS and name not in FRESH_PEERS) or not path:
            raise SystemExit(f"--peer-python expects NAME=PATH with NAME in {sorted([*PEERS, *FRESH_PEERS])}, "
                             f"got {v!r}")
        out[name] = path
    return out


def _peers(value: str) -> list[str] | None:
    if value == "all":
        return None
    if value == "none":
        return []
    names = [n for n in value.split(",") if n]
    bad = [n for n in names if n not in PEERS and n not in FRESH_PEERS]
    if bad:
        raise SystemExit(f"--peers expects all, none or a comma list of {sorted([*PEERS, *FRESH_PEERS])}, "
                         f"got {value!r}")
    return names


def _write_report(res: dict, out: str, img: str, command: str) -> None:
    from .markdown import keep_hand_added
    from .plots import make_plots
    from .report import render

    res = json.loads(json.dumps(res))  # string keys everywhere, as when read back from disk
    rel = os.path.relpath(img, os.path.dirname(os.path.abspath(out)))
    plots, note = make_plots(res, img, rel)
    text = render(res, command, plots, note)
    if os.path.exists(out):  # sections added by hand to the report being replaced stay
        with open(out, encoding="utf-8") as f:
            text = keep_hand_added(f.read(), text)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run it."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "probe":  # the probe registry parses its own arguments
        from .registry import main as probe_main

        return probe_main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("probe", help="one registered probe: probe --list | probe NAME [ARGS] (benchmarks/registry.py)")
    r = sub.add_parser("run", help="measure and write the report")
    mode = r.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true", help="small corpora, a couple of minutes")
    mode.add_argument("--full", action="store_true", help="the sizes of docs/benchmarks.md")
    r.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"), help="report path")
    r.add_argument("--img", default=None, help="folder of the PNG plots (default: <report folder>/img)")
    r.add_argument("--data", default=os.path.join(ROOT, "benchmarks", ".data"), help="generated corpora (reused)")
    r.add_argument("--work", default=os.path.join(ROOT, "benchmarks", ".work"), help="scratch folder")
    r.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH",
                   help="interpreter of one peer (repeatable); see benchmarks/peers/__init__.py")
    r.add_argument("--peers", default="all", help="all, none, or a comma list of " + ",".join([*PEERS, *FRESH_PEERS]))
    r.add_argument("--sections", default=None, help="comma list of " + ",".join(SECTIONS) + " (default: all; "
                   "--quick leaves out " + ",".join(FULL_ONLY) + ")")
    r.add_argument("--retry-pause", type=float, default=5.0,
                   help="seconds before a failed section is tried again (once)")
    rep = sub.add_parser("report", help="re-render the report from a saved results JSON")
    rep.add_argument("results")
    rep.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    rep.add_argument("--img", default=None)
    rep.add_argument("--add-probe", action="append", default=[], metavar="SECTION=PROBE.json",
                     help="put a probe's document (its --out) in the results as probe-run section SECTION, run alone "
                          "(repeatable); the results file is rewritten with it")
    args = p.parse_args(argv)
    img = args.img or os.path.join(os.path.dirname(os.path.abspath(args.out)), "img")
    if args.cmd == "report":
        with open(args.results, encoding="utf-8") as f:
            res = json.load(f)
        if args.add_probe:
            from .suite_probe_runs import add_probe_document

            for value in args.add_probe:
                add_probe_document(res, value)
            with open(args.results, "w", encoding="utf-8") as f:
                f.write(json.dumps(res, indent=1))
        _write_report(res, args.out, img, res.get("command", ""))
        return 0

    from .sections import run_sections
    from .suite import FULL, QUICK, Run

    default = [s for s in SECTIONS if args.full or s not in FULL_ONLY]
    sections = default if args.sections is None else [s for s in args.sections.split(",") if s]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        raise SystemExit(f"--sections expects a comma list of {SECTIONS}, got {args.sections!r}")
    shown = ["python -m benchmarks run", "--quick" if args.quick else "--full"]
    if args.peers != "all":
        shown.append(f"--peers {args.peers}")
    if args.sections is not None and sections != default:
        shown.append(f"--sections {args.sections}")
    command = " ".join(shown)
    t0 = time.perf_counter()
    run = Run(QUICK if args.quick else FULL, args.work, args.data, _peer_python(args.peer_python),
              _peers(args.peers), log=lambda *a: print(*a, file=sys.stderr, flush=True))
    try:
        run.environment()
        run.start_peers()
        order = [s for s in SECTIONS if s in sections]
        if "workloads" not in order:  # limits and loader read the stores the workloads write
            order = [s for s in order if s not in ("limits", "loader")]
        # a failing section is retried or skipped with its reason; the rest of the run goes on
        run_sections(run, order, retry_pause_s=args.retry_pause,
                     log=lambda *a: print(*a, file=sys.stderr, flush=True),
                     done=lambda name: print(f"[{time.perf_counter() - t0:.0f} s] {name} done", file=sys.stderr,
                                             flush=True))
    finally:
        run.close()
    run.results["duration_s"] = time.perf_counter() - t0
    run.results.setdefault("env", {})["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    run.results["command"] = command
    run.results["argv"] = shlex.join(sys.argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    text = json.dumps(run.results, indent=1, default=float).replace(ROOT + os.sep, "")  # paths relative to the repo
    with open(os.path.splitext(args.out)[0] + ".json", "w", encoding="utf-8") as f:
        f.write(text)
    _write_report(run.results, args.out, img, command)
    print(f"wrote {args.out} in {run.results['duration_s']:.0f} s", file=sys.stderr)
    return 0
