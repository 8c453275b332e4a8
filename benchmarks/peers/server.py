"""The peer process: ``python -m benchmarks.peers.server NAME`` serves one peer's adapter over pipes.

It runs in the peer's own interpreter (possibly another virtual environment), imports only numpy, this
package's numpy-only modules and the peer library. Requests are JSON lines on stdin, answers JSON lines
on the process's original stdout; everything the peer library prints goes to stderr instead (fd 1 is
redirected at start), so chatty libraries cannot corrupt the protocol.

Requests: ``{"op": "version"}``, ``{"op": "setup", "key": k, "args": {...}}`` (one adapter per workload key;
every later request names its key), ``{"op": "convert"}`` (timed here), ``{"op": "open"}``,
``{"op": "fetch", "variant": v, "batches": [[ids], ...], "check": k}`` (timed here, see
:func:`benchmarks.measure.time_batches`), ``{"op": "loader", "variant": v, "batch_size": b, "workers": w,
"n_batches": n, "seed": s}`` and ``{"op": "quit"}``. Answers: ``{"ok": ...}`` or ``{"error": "..."}``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback

import numpy as np

from ..measure import peak_rss_mb, time_batches, time_loader


def _handle(module, adapters: dict, req: dict) -> dict:
    """Run one request against the adapter of its key (``version`` and ``setup`` need none)."""
    op = req["op"]
    if op == "version":
        return module.version()
    if op == "setup":
        adapters[req["key"]] = module.Adapter(**req["args"])
        return {"variants": list(adapters[req["key"]].variants)}
    adapter = adapters[req["key"]]
    if op in ("convert", "open"):
        t0 = time.perf_counter()
        info = (adapter.convert() if op == "convert" else adapter.open()) or {}
        return {"seconds": time.perf_counter() - t0, **info}
    if op == "fetch":
        batches = [np.asarray(b, dtype=np.int64) for b in req["batches"]]
        variant = req["variant"]
        return time_batches(lambda ids: adapter.fetch(ids, variant), batches, check=req.get("check", 0),
                            warmup=req.get("warmup", 1))
    if op == "loader":
        return time_loader(lambda: adapter.loader(req["variant"], req["batch_size"], req["workers"], req["seed"]),
                           req["n_batches"])
    raise ValueError(f"unknown op {op!r}")


def _serve(name: str, out) -> None:
    module = importlib.import_module(f"benchmarks.peers.{name}")
    adapters: dict = {}
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "quit":
            break
        try:
            result = _handle(module, adapters, req)
            result["peak_rss_mb"] = peak_rss_mb()
            answer = {"ok": result}
        except Exception as exc:  # reported to the driver, which records the peer as failed with this reason
            traceback.print_exc(file=sys.stderr)
            answer = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        out.write(json.dumps(answer) + "\n")
        out.flush()


def main() -> None:
    """Entry point: serve the adapter module ``benchmarks.peers.<argv[1]>``."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _serve(sys.argv[1], out)


if __name__ == "__main__":
    main()
