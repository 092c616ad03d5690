"""Fixtures of the Ray-layer and CLI integration tests: a local Ray, a multi-node Ray cluster, stores.

Everything is real: Ray (local or ``ray.cluster_utils.Cluster``), the process sandbox, the local artifact store and
the gateway with in-package scripted models (see ``integration_support``). A process holds one Ray session at a
time: tests share a local one, and the multi-node module replaces it with its cluster for its duration.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from integration_support import cluster_with_product_settings


def _shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="session")
def _ray_session() -> Iterator[None]:
    yield
    _shutdown_ray()


@pytest.fixture
def local_ray(_ray_session: None) -> dict[str, Any]:
    """Ray for this process: a local one with 2 CPUs, started on first use and shared by later tests (modules that
    need another cluster shut it down); returns the cluster's resources."""
    import ray

    from ecdysis.ray_env import ensure_ray

    if not ray.is_initialized():
        ensure_ray(num_cpus=2)
    return dict(ray.cluster_resources())


@pytest.fixture(scope="session")
def cluster_address() -> Iterator[str]:
    """A one-node Ray cluster (2 CPUs) that the CLI runs of every module join, standing for the whole session as a
    user's does; this process does not connect to it."""
    cluster = cluster_with_product_settings(num_cpus=2)
    try:
        yield str(cluster.address)
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A head (no rollout resource) and 2 worker nodes offering ``rollout: 2`` each; the driver is connected.

    Yields the ``Cluster``; its worker nodes are ``cluster.worker_nodes``.
    """
    from ecdysis.ray_env import ensure_ray

    _shutdown_ray()
    # Read by the slow scripted model on every node (ECDYSIS_* variables travel in the runtime environment).
    os.environ["ECDYSIS_TEST_MODEL_DELAY_S"] = "0.15"
    cluster = cluster_with_product_settings(num_cpus=1)
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, resources={"rollout": 2})
        cluster.wait_for_nodes()
        ensure_ray(cluster.address)
        yield cluster
    finally:
        _shutdown_ray()
        cluster.shutdown()
        os.environ.pop("ECDYSIS_TEST_MODEL_DELAY_S", None)

