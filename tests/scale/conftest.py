"""One real Dask cluster for the scale-out tests: 3 worker processes, one thread each, everything on 127.0.0.1
(scheduler, workers and nannies listen there only, and so does the scheduler's HTTP server, on a free port: given
no address it tries port 8787 first). Started once per session, on first use."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def dask_client():
    """A ``distributed.Client`` on a ``LocalCluster`` bound to 127.0.0.1 (skips when dask is not installed)."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(host="127.0.0.1", protocol="tcp", n_workers=3, threads_per_worker=1,
                                       processes=True, dashboard_address="127.0.0.1:0", worker_dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.fixture
def full_cluster(dask_client):
    """The session's client with its 3 workers up (a test that killed one waits for the nanny's restart)."""
    dask_client.wait_for_workers(3, timeout=60)
    return dask_client
