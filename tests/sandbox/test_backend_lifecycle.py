"""The lifecycle every sandbox backend offers the rollout layer (``ecdysis.protocols.SandboxBackend``): ``isolation``,
``publish`` on the driver (a class-level step, no backend started there), ``prepare`` on a node, ``cleanup_orphans``
(its real effect on a crashed owner's containers: test_sandbox_lifecycle)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sandbox_support import BUNDLES

from ecdysis.protocols import SandboxBackend
from ecdysis.sandbox import (
    AutoSandboxConfig,
    DockerSandboxConfig,
    ProcessSandboxConfig,
    SandboxUnavailable,
    bundle_hash,
)
from ecdysis.sandbox.docker_backend import DockerBackend
from ecdysis.sandbox.lifecycle import backend_class
from ecdysis.sandbox.process import ProcessBackend
from ecdysis.testing.sandbox import InMemoryBackend

NORMAL = BUNDLES / "normal"
NO_DAEMON = "unix:///nonexistent/docker.sock"


def test_every_backend_is_the_protocol_and_names_its_isolation(limited_backend: Any, kind: str) -> None:
    assert isinstance(limited_backend, SandboxBackend)
    assert limited_backend.isolation == {"docker": "docker", "process": "process-allowlist"}[kind]
    limited_backend.prepare(bundle_hash(NORMAL), None)  # nothing published: the bundle folder serves
    assert limited_backend.cleanup_orphans() == 0


def test_the_in_memory_backend_has_the_same_lifecycle() -> None:
    backend = InMemoryBackend()
    try:
        assert isinstance(backend, SandboxBackend) and backend.isolation == "in-memory"
        assert InMemoryBackend.publish(None, NORMAL, bundle_hash(NORMAL)) is None
        backend.prepare(bundle_hash(NORMAL), None)
        assert backend.cleanup_orphans() == 0
    finally:
        backend.shutdown()


def test_only_docker_with_a_registry_publishes() -> None:
    digest = bundle_hash(NORMAL)
    assert ProcessBackend.publish(ProcessSandboxConfig(), NORMAL, digest) is None
    # Without a registry nothing is published, and no daemon is even asked.
    assert DockerBackend.publish(DockerSandboxConfig(docker_host=NO_DAEMON), NORMAL, digest) is None
    with pytest.raises(SandboxUnavailable, match=r"publishes harness images to 127\.0\.0\.1:9 but no Docker daemon"):
        DockerBackend.publish(DockerSandboxConfig(docker_host=NO_DAEMON, registry="127.0.0.1:9"), NORMAL, digest)


def test_the_driver_resolves_auto_by_asking_its_own_daemon(caplog: pytest.LogCaptureFixture) -> None:
    docker = DockerSandboxConfig(docker_host=NO_DAEMON, registry="127.0.0.1:9")
    assert backend_class(docker) == (DockerBackend, docker)
    process = ProcessSandboxConfig(isolation="weak")
    assert backend_class(process) == (ProcessBackend, process)
    with caplog.at_level(logging.WARNING):
        assert backend_class(AutoSandboxConfig(docker=docker, process=process)) == (ProcessBackend, process)
    assert "harness images are not published" in caplog.text


def test_docker_prepare_pins_the_published_image(limited_backend: Any, kind: str) -> None:
    if kind != "docker":
        pytest.skip("only the Docker backend runs published images")
    digest = bundle_hash(NORMAL)
    limited_backend.prepare(digest, "registry.invalid/ecdysis-harness:latest")
    try:
        with pytest.raises(SandboxUnavailable, match="does not name a digest"):  # pulled, never built here
            limited_backend.acquire(NORMAL, digest)
    finally:
        limited_backend._pinned.pop(digest, None)  # the session's shared backend builds this bundle again
