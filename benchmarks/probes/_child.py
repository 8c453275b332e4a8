"""What the probes' fresh child processes share: reading their own memory figures, and handing back one JSON line.

A probe that measures an open, an import or a peak in a fresh interpreter runs ``python -c SCRIPT ARGS``; the script
starts with :data:`STATUS` when it reads its memory (``status("VmRSS")``, ``status("VmHWM")``: bytes, from
``/proc/self/status``) and prints one JSON object as its last line, which :func:`child_json` returns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["STATUS", "child_json"]

STATUS = """
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
"""
"""A ``status(key)`` function for a child script: a ``/proc/self/status`` figure (``VmRSS``, ``VmHWM``) in bytes."""


def child_json(script: str, args: Sequence[str], *, python: str | None = None, root: str | None = None,
               check: bool = True) -> dict:
    """The last stdout line of ``python -c script *args`` as JSON. ``root``: a checkout to import ``consumer`` from
    (put first on ``PYTHONPATH``, and the working directory). A failed child raises ``CalledProcessError`` when
    ``check``, else gives ``{"error": its last stderr line}``."""
    env = None if root is None else dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([python or sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          cwd=root, check=check)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1][:300]}
    out: dict = json.loads(lines[-1])
    return out
