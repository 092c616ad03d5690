"""Fixtures of the study tests: a local Ray shared by the module (the rollout workers), as in tests/integration."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def local_ray() -> Iterator[dict[str, Any]]:
    """A local Ray with 2 CPUs for this module."""
    import ray

    from ecdysis.ray_env import ensure_ray

    if not ray.is_initialized():
        ensure_ray(num_cpus=2)
    yield dict(ray.cluster_resources())
