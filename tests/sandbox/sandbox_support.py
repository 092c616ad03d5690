"""Helpers of the sandbox suite (imported by its conftest and tests): test limits, bundles, leftover checks."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ecdysis.sandbox import (
    DockerSandboxConfig,
    ProcessSandboxConfig,
    ProtocolOutcome,
    docker_available,
    make_backend,
)
from ecdysis.sandbox.procfs import processes_of

BUNDLES = Path(__file__).parent / "bundles"
TEST_LABEL = "ecdysis.test"
# Shared with child processes a test starts, so their containers carry this session's label too.
SESSION_ID = os.environ.setdefault("ECDYSIS_TEST_SESSION", uuid.uuid4().hex[:12])
MIB = 1 << 20


def docker_skip_reason() -> str | None:
    """Why the docker backend cannot be tested here, or None."""
    if not docker_available():
        return "needs a Docker engine: make sandbox-ready (sandbox/ensure-docker.sh starts one)"
    import docker

    client = docker.from_env()
    try:
        client.images.get(DockerSandboxConfig().base_image)
    except docker.errors.ImageNotFound:
        return f"needs the sandbox base image {DockerSandboxConfig().base_image}: make sandbox-ready"
    finally:
        client.close()
    return None


def skip_without_docker() -> None:
    """Skip the calling test, saying why, where the docker backend cannot be tested here."""
    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)


@contextlib.contextmanager
def limited_docker_backend(**overrides: Any) -> Iterator[Any]:
    """The docker backend with the tight test limits (:func:`limits_config`, and ``overrides``), shut down when the
    block ends; the calling test skips where Docker cannot be tested."""
    skip_without_docker()
    backend = make_backend(limits_config("docker", **overrides))
    try:
        yield backend
    finally:
        backend.shutdown()


def limits_config(kind: str, **overrides: Any) -> DockerSandboxConfig | ProcessSandboxConfig:
    """Tight limits so hostile harnesses hit them fast."""
    if kind == "docker":
        values: dict[str, Any] = {"warm_pool": 0, "mem_limit": "256m", "pids_limit": 64, "max_output_bytes": 4 * MIB,
                                  "labels": {TEST_LABEL: SESSION_ID}, "wall_clock_s": 120}
        return DockerSandboxConfig(**{**values, **overrides})
    values = {"warm_pool": 0, "address_space_bytes": 512 * MIB, "nproc": 32, "max_output_bytes": 4 * MIB,
              "wall_clock_s": 120}
    return ProcessSandboxConfig(**{**values, **overrides})


def docker_client() -> Any:
    import docker

    return docker.from_env()


def session_containers() -> list[Any]:
    """Containers (running or not) started by this test session."""
    client = docker_client()
    try:
        return list(client.api.containers(all=True, filters={"label": f"{TEST_LABEL}={SESSION_ID}"}))
    finally:
        client.close()


def assert_gone(sandbox: Any) -> None:
    """Nothing of the sandbox survives: no container (or, reused, no running runtime), or no process of its uid."""
    assert sandbox.closed
    if hasattr(sandbox, "container"):
        client = docker_client()
        try:
            if sandbox.returned:
                # Its container went back for another episode after a clean end: the runtime has stopped, and the
                # next episode's wipe (tests/sandbox/test_container_reuse.py) clears whatever it left there.
                assert not client.api.exec_inspect(sandbox.exec_id)["Running"]
                return
            left = client.api.containers(all=True, filters={"id": sandbox.container.id})
        finally:
            client.close()
        assert left == [], f"container of sandbox {sandbox.sandbox_id} still exists"
    else:
        assert sandbox.process.poll() is not None
        if sandbox.uid is not None:
            assert processes_of(sandbox.uid) == [], f"processes of uid {sandbox.uid} survived"
        assert sandbox.workdir is None or not sandbox.workdir.exists()



Episode = Callable[..., tuple[ProtocolOutcome, Any]]
