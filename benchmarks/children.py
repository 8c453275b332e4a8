"""Fresh Python processes that print one JSON line: a cold or warm ``Consumer`` build (:func:`child_build`) and
any ``python ARGS`` (:func:`child_json`; a script reads its own memory with :data:`STATUS`), and a peer's module in
its own interpreter (:func:`peer_json`). Used by the suite's scale section and by the probes that measure in fresh
processes (``cold_build``, ``catalog_peers``, ``jsonl_peers``, ``cold_store``, ``open_scale``, ``mixture_costs``,
``blend_index``, ...)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["STATUS", "child_build", "child_json", "peer_json"]

STATUS = """
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
"""
"""A ``status(key)`` function to start a child script with: a ``/proc/self/status`` figure (``VmRSS``, ``VmHWM``)
in bytes."""

_CHILD = r"""
import json, resource, sys, time
from benchmarks.measure import peak_rss_mb
from consumer import Consumer
root, cache, metadata = sys.argv[1], sys.argv[2], (None if sys.argv[3] == "none" else sys.argv[3])
base = peak_rss_mb()
t0 = time.perf_counter(); r0 = resource.getrusage(resource.RUSAGE_SELF)
ds = Consumer(root, metadata=metadata, cache_dir=cache, style="concat", seqlen=2048)
wall = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
info = getattr(ds, "build_info", {}) or {}
print(json.dumps({"wall_s": wall, "cpu_s": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
                  "peak_rss_mb": peak_rss_mb(), "import_rss_mb": base, "files": len(ds.files),
                  "samples": len(ds), "cache": info.get("cache")}))
"""


def child_build(root: str, cache: str, metadata) -> dict:
    """A ``Consumer(root, metadata=..., cache_dir=cache)`` build in a fresh process: wall, CPU, peak RSS, files."""
    return child_json(["-c", _CHILD, root, cache, metadata or "none"])


def child_json(args: Sequence[str], *, python: str | None = None, front: str | None = None,
               check: bool = False) -> dict:
    """The JSON last line a fresh ``python ARGS`` prints (``python``: another interpreter; this checkout on the
    path; ``front``: a folder put before it and run in, e.g. another version's checkout), or ``{"error": the last
    line of its stderr}`` (``check``: ``CalledProcessError`` instead)."""
    from .peers import ROOT

    path = os.pathsep.join(p for p in (front, ROOT, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path)
    out = subprocess.run([python or sys.executable, *args], capture_output=True, text=True, env=env, check=check,
                         cwd=front or ROOT)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        return {"error": out.stderr.strip().splitlines()[-1][:300] if out.stderr.strip() else f"exit {out.returncode}"}
    result: dict = json.loads(lines[-1])
    return result


def peer_json(python: str, module: str, args: list[str], front: str | None = None) -> dict:
    """The last JSON line ``python -m module ARGS`` prints (this checkout first on the path, warnings off: a peer's
    interpreter, e.g. Daft's venv), or ``{"error": ...}`` with the last error line of its stderr (a peer may leave
    with ``os._exit(0)`` before printing, so the exit status alone does not tell). ``front``: a folder put before
    the checkout (and run in), e.g. one holding another version's ``consumer`` package."""
    from .peers import ROOT

    path = os.pathsep.join(p for p in (front, ROOT, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, PYTHONWARNINGS="ignore")
    out = subprocess.run([python, "-m", module, *args], capture_output=True, text=True, env=env, cwd=front or ROOT,
                         check=False)
    lines = [ln for ln in out.stdout.strip().splitlines() if ln.startswith("{")]
    if lines:
        return json.loads(lines[-1])
    tail = [ln for ln in out.stderr.strip().splitlines() if ln.startswith(("Fatal", "Traceback")) or "Error" in ln]
    return {"error": (tail[-1] if tail else f"exit status {out.returncode}")[:300]}
