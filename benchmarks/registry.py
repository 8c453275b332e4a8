"""The probe registry: ``python -m benchmarks probe NAME [ARGS]`` and ``python -m benchmarks probe --list``.

A *probe* is one measurement a person runs on its own: a module ``benchmarks/probes/<name>.py`` (names starting
with ``_`` are helpers, not probes) defining

- ``NAME: str`` (the module's name) and ``DESCRIPTION: str`` (one line);
- ``add_arguments(parser: argparse.ArgumentParser) -> None``: its options;
- ``run(args: argparse.Namespace) -> dict``: the measurement, a JSON-able dict (timings through
  :mod:`benchmarks.measure`; progress goes to stderr).

Adding a file is all it takes: :func:`discover` finds every module of the package. :func:`run_probe` wraps a
probe's result in the one schema every probe writes (:data:`SCHEMA_KEYS`, checked by :func:`validate`)::

    {"probe": NAME, "version": 1, "args": {...}, "machine": {...}, "started": "2026-11-26T15:40:00Z",
     "duration_s": 12.3, "results": {...}}

The document is printed on stdout, and written to ``--out PATH`` when given.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import sys
import time
import types
from collections.abc import Sequence

__all__ = ["SCHEMA_VERSION", "SCHEMA_KEYS", "discover", "load", "machine", "run_probe", "validate", "main"]

SCHEMA_VERSION = 1
SCHEMA_KEYS = {"probe": str, "version": int, "args": dict, "machine": dict, "started": str, "duration_s": float,
               "results": dict}
_CONTRACT = {"NAME": str, "DESCRIPTION": str}
_FUNCTIONS = ("add_arguments", "run")


def discover() -> list[str]:
    """The names of every probe module in ``benchmarks/probes/`` (sorted; ``_``-prefixed helpers excluded)."""
    from . import probes

    return sorted(m.name for m in pkgutil.iter_modules(probes.__path__) if not m.name.startswith("_"))


def load(name: str) -> types.ModuleType:
    """Import probe ``name`` and check it meets the contract (ValueError naming what is missing)."""
    if name not in discover():
        raise ValueError(f"probe expects one of {discover()}, got {name!r}")
    module = importlib.import_module(f"benchmarks.probes.{name}")
    problems = [f"{attr} is not a {kind.__name__}" for attr, kind in _CONTRACT.items()
                if not isinstance(getattr(module, attr, None), kind)]
    problems += [f"{fn}() is missing" for fn in _FUNCTIONS if not callable(getattr(module, fn, None))]
    if not problems and module.NAME != name:
        problems.append(f"NAME is {module.NAME!r}, not the module's name {name!r}")
    if problems:
        raise ValueError(f"probe {name!r} breaks the probe contract: " + "; ".join(problems))
    return module


def machine() -> dict:
    """The machine a probe ran on: interpreter, library versions, CPU, cores, memory and load."""
    import numpy as np

    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        from consumer import __version__ as consumer_version
    except ImportError:  # a probe helper run in a peer's venv
        consumer_version = "not importable"
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return {"python": platform.python_version(), "numpy": np.__version__, "consumer": consumer_version,
            "cpu": cpu, "cores": os.cpu_count() or 1, "mem_gib": round(mem, 1), "platform": platform.platform(),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def parser_for(module: types.ModuleType) -> argparse.ArgumentParser:
    """The argument parser of one probe: its own options plus ``--out``."""
    p = argparse.ArgumentParser(prog=f"python -m benchmarks probe {module.NAME}", description=module.DESCRIPTION)
    module.add_arguments(p)
    p.add_argument("--out", default=None, metavar="PATH", help="also write the JSON document to PATH")
    return p


def run_probe(name: str, argv: Sequence[str] = ()) -> dict:
    """Run probe ``name`` with command-line ``argv``; the schema's document (see the module docstring)."""
    module = load(name)
    args = parser_for(module).parse_args(list(argv))
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.perf_counter()
    results = module.run(args)
    if not isinstance(results, dict):
        raise TypeError(f"probe {name!r}: run() returned {type(results).__name__}, not a dict")
    doc = {"probe": name, "version": SCHEMA_VERSION, "args": {k: v for k, v in vars(args).items() if k != "out"},
           "machine": machine(), "started": started, "duration_s": time.perf_counter() - t0, "results": results}
    doc = json.loads(json.dumps(doc, default=_jsonable))
    validate(doc)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
    return doc


def _jsonable(x: object) -> object:
    if hasattr(x, "tolist"):  # numpy scalars and arrays
        return x.tolist()
    if isinstance(x, (set, tuple)):
        return list(x)
    return str(x)


def validate(doc: object) -> None:
    """Check a probe's document against the schema: ValueError naming the first key that is wrong."""
    if not isinstance(doc, dict):
        raise ValueError(f"a probe document is a dict, got {type(doc).__name__}")
    extra = sorted(set(doc) - set(SCHEMA_KEYS))
    if extra:
        raise ValueError(f"probe document has unknown keys {extra}")
    for key, kind in SCHEMA_KEYS.items():
        value = doc.get(key)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"probe document key {key!r} must be {kind.__name__}, got {value!r:.80}")
    if doc["version"] != SCHEMA_VERSION:
        raise ValueError(f"probe document version must be {SCHEMA_VERSION}, got {doc['version']!r}")
    if doc["probe"] not in discover():
        raise ValueError(f"probe document names an unknown probe {doc['probe']!r}")


def main(argv: Sequence[str]) -> int:
    """``probe --list`` or ``probe NAME [ARGS]`` (the document on stdout)."""
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m benchmarks probe --list | NAME [ARGS] (NAME --help for its options)")
        return 0 if argv else 2
    if argv[0] == "--list":
        for name in discover():
            print(f"{name:22s} {load(name).DESCRIPTION}")
        return 0
    try:
        doc = run_probe(argv[0], argv[1:])
    except ValueError as exc:
        if argv[0] in discover():
            raise
        print(exc, file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=1))
    return 0
