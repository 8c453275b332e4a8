"""Local emulators of Google Cloud Storage and Azure Blob Storage on 127.0.0.1, for the ``gs://`` and ``az://``
tests: ``gcp-storage-emulator`` (a Python package, a test dependency) and Azurite (an npm package, optional:
``bash scripts/install_azurite.sh``). Each runs in a subprocess on a free port and is stopped after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from .remote_servers import _wait_port, free_port, stop_process

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository

__all__ = ["gcs_emulator", "azurite", "AZURITE", "AZURITE_MISSING", "AZURITE_ACCOUNT", "AZURITE_KEY"]

# the well-known development account of the Azure storage emulators (public, documented by Microsoft)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE = shutil.which("azurite-blob")
AZURITE_MISSING = "Azurite is not installed (npm package 'azurite'; run: bash scripts/install_azurite.sh)"


@contextmanager
def _process(argv: list[str], port: int, **kwargs) -> Iterator[None]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    try:
        _wait_port(port, proc, deadline_s=60.0)
        yield
    finally:
        stop_process(proc)


@contextmanager
def gcs_emulator() -> Iterator[dict]:
    """``gcp-storage-emulator`` (in memory) on a free port; yields the gcsfs ``storage_options`` that reach it."""
    port = free_port()
    with _process([sys.executable, "-m", "tests.helpers.remote_emulators", "gcs", str(port)], port, cwd=_ROOT):
        yield {"endpoint_url": f"http://127.0.0.1:{port}", "token": "anon", "project": "test"}


@contextmanager
def azurite() -> Iterator[dict]:
    """Azurite's blob service (in memory, no telemetry) on a free port; yields the adlfs ``storage_options``
    (the development account's connection string). Needs ``azurite-blob`` on PATH (see ``AZURITE``)."""
    if AZURITE is None:
        raise RuntimeError(AZURITE_MISSING)
    port = free_port()
    with tempfile.TemporaryDirectory() as cwd, \
            _process([AZURITE, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--silent", "--inMemoryPersistence",
                      "--disableTelemetry", "--skipApiVersionCheck"], port, cwd=cwd):
        yield {"connection_string": (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
                                     f"AccountKey={AZURITE_KEY};"
                                     f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};")}


def _serve_gcs(port: int) -> None:
    """The emulator in this process, its one-thread server with a listen backlog of 512: the stock backlog of
    5 drops the SYNs of a client opening 64 connections at once, and each dropped one waits 1-3 s to retry."""
    from http import server

    from gcp_storage_emulator import server as emulator

    class Server(server.HTTPServer):
        request_queue_size = 512

    emulator.server.HTTPServer = Server  # type: ignore[misc]
    emulator.create_server("127.0.0.1", port, in_memory=True).run()


if __name__ == "__main__":  # python -m tests.helpers.remote_emulators gcs PORT: serve until terminated
    import logging

    logging.disable(logging.CRITICAL)
    _serve_gcs(int(sys.argv[2]))
