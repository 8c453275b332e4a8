"""The loaders users would pick instead of ``consumer``, each driven in its own process.

Every peer has an adapter module here (``gperc``, ``hf``, ``megatron``, ``litdata``, ``mosaic``) and runs
under ``python -m benchmarks.peers.server NAME`` in an interpreter chosen, in this order, by
``--peer-python NAME=PATH``, the environment variable ``BENCH_PYTHON_<NAME>``, a virtual environment
``benchmarks/.venvs/<NAME>`` (made by ``benchmarks/setup_peers.sh``), or the current interpreter.
Nothing is installed at run time: a peer whose library does not import is reported as absent, with the
reason (the import error).

Daft and Lance (:data:`FRESH_PEERS`) are measured in a fresh process per measurement instead of a server:
``python -m benchmarks.peers.firstanswer`` (catalog and byte predicate) and ``python -m benchmarks.peers.coldread``
(random fetch), in the interpreter chosen the same way (``benchmarks/.venvs/daft``, ``benchmarks/.venvs/lance``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["PEERS", "FRESH_PEERS", "fresh_peer_version", "PeerSpec", "PeerProcess", "PeerUnavailable",
           "resolve_python", "start_peer", "peer_version"]

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)


@dataclass(frozen=True)
class PeerSpec:
    """One peer: its adapter module, display name and how to install it."""

    name: str
    title: str
    install: str


PEERS: dict[str, PeerSpec] = {
    "gperc": PeerSpec("gperc", "gperc 0.7", "pip install --no-deps gperc==0.7 (needs numpy, torch, tqdm)"),
    "hf": PeerSpec("hf", "HF datasets", "pip install datasets (in the [bench] extra)"),
    "megatron": PeerSpec("megatron", "Megatron-core", "pip install megatron-core (in the [bench] extra)"),
    "litdata": PeerSpec("litdata", "litdata", "pip install --no-deps litdata + its deps except torchvision "
                                              "(benchmarks/setup_peers.sh)"),
    "mosaic": PeerSpec("mosaic", "mosaic streaming", "own venv: benchmarks/setup_peers.sh mosaic"),
}


FRESH_PEERS: dict[str, PeerSpec] = {
    "daft": PeerSpec("daft", "Daft", "own venv benchmarks/.venvs/daft: bash benchmarks/setup_peers.sh"),
    "lance": PeerSpec("lance", "Lance (pylance)", "own venv benchmarks/.venvs/lance: bash benchmarks/setup_peers.sh"),
}


class PeerUnavailable(RuntimeError):
    """The peer cannot run here (not installed, fails to import, or its process died); the message says why."""


def resolve_python(name: str, overrides: dict[str, str]) -> str:
    """The interpreter that runs peer ``name`` (see the module docstring for the order)."""
    if name in overrides:
        return overrides[name]
    env = os.environ.get(f"BENCH_PYTHON_{name.upper()}")
    if env:
        return env
    venv = os.path.join(BENCH, ".venvs", name, "bin", "python")
    if os.path.exists(venv):
        return venv
    return sys.executable


class PeerProcess:
    """A running peer server: ``call(op, **fields)`` sends one request and returns its ``ok`` payload."""

    def __init__(self, name: str, python: str, log_path: str):
        self.name, self.python, self.log_path = name, python, log_path
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PYTHONWARNINGS="ignore", TOKENIZERS_PARALLELISM="false", HF_DATASETS_DISABLE_PROGRESS_BARS="1")
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen([python, "-m", "benchmarks.peers.server", name], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True)

    def _tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return " | ".join(lines[-3:])[-400:]

    def send(self, op: str, **fields) -> None:
        """Send one request without waiting for its answer (see :meth:`receive`)."""
        if self.proc.poll() is not None:
            raise PeerUnavailable(f"{self.name}: process exited ({self.proc.returncode}): {self._tail()}")
        try:
            self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise PeerUnavailable(f"{self.name}: {exc}: {self._tail()}") from exc

    def call(self, op: str, **fields) -> dict:
        """Send one request and wait for its answer."""
        self.send(op, **fields)
        return self.receive(op)

    def receive(self, op: str = "request") -> dict:
        """The answer to the oldest request sent; :class:`PeerUnavailable` if the process died, RuntimeError
        (with the peer's message) if the request failed."""
        try:
            line = self.proc.stdout.readline()
        except OSError as exc:
            raise PeerUnavailable(f"{self.name}: {exc}: {self._tail()}") from exc
        if not line:
            self.proc.wait(timeout=30)
            raise PeerUnavailable(f"{self.name}: process exited ({self.proc.returncode}): {self._tail()}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"{self.name} {op}: {answer['error']}")
        return answer["ok"]

    def close(self) -> None:
        """Ask the server to quit; kill it if it does not within 20 s."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=20)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def start_peer(name: str, python: str, log_path: str) -> PeerProcess:
    """Start peer ``name`` and send it the ``version`` request (its library import); read the answer with
    :func:`peer_version`. Several peers started in a row import their libraries in parallel."""
    if not os.path.exists(python):
        raise PeerUnavailable(f"interpreter {python} does not exist")
    peer = PeerProcess(name, python, log_path)
    peer.send("version")
    return peer


def peer_version(peer: PeerProcess) -> dict:
    """The answer to the ``version`` request sent by :func:`start_peer`; :class:`PeerUnavailable` (with the
    import error) if the peer cannot run; the process is then closed."""
    try:
        version = peer.receive("version")
    except RuntimeError as exc:
        peer.close()
        raise PeerUnavailable(str(exc).split(": ", 1)[-1]) from exc
    except PeerUnavailable:
        peer.close()
        raise
    return version


def fresh_peer_version(name: str, python: str) -> dict:
    """``{"available": True, "version": ...}`` when ``python`` imports the library of fresh peer ``name``, else
    ``{"available": False, "reason": ...}`` (the import error, and how to install it)."""
    module, dist = {"daft": ("daft", "daft"), "lance": ("lance", "pylance")}[name]
    if not os.path.exists(python):
        return {"available": False, "python": python, "reason": f"interpreter {python} does not exist"}
    code = f"import {module}, importlib.metadata as m; print(m.version({dist!r}))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()
        return {"available": False, "python": python,
                "reason": f"{tail[-1] if tail else 'import failed'} (install: {FRESH_PEERS[name].install})"}
    return {"available": True, "python": python, "version": out.stdout.strip()}
