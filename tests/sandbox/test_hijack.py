"""Hijacked Docker streams keep the output that came in with the response headers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sandbox_support import BUNDLES, docker_client, limited_docker_backend, limits_config, skip_without_docker

from ecdysis.records import TerminationReason
from ecdysis.sandbox import bundle_hash, run_protocol
from ecdysis.sandbox.docker_backend import HOLDER_COMMAND
from ecdysis.sandbox.hijack import HijackedSocket

pytestmark = pytest.mark.docker


@pytest.fixture
def client() -> Iterator[Any]:
    skip_without_docker()
    client = docker_client()
    yield client
    client.close()


def test_output_read_with_the_headers_is_served_first(client: Any, late_http_headers: None) -> None:
    config = limits_config("docker")
    container = client.containers.run(config.base_image, entrypoint=HOLDER_COMMAND, detach=True, network_mode="none",
                                      labels=config.labels)
    try:
        exec_id = client.api.exec_create(container.id, ["echo", "hi"])["Id"]
        stream = HijackedSocket(client.api.exec_start(exec_id, socket=True))
        received = b""
        while chunk := stream.recv(4):
            received += chunk
        assert received == b"\x01\x00\x00\x00\x00\x00\x00\x03hi\n"
    finally:
        container.remove(force=True)


def test_a_sandbox_whose_headers_are_read_late_runs_its_episode(late_http_headers: None) -> None:
    """The runtime's ``ready`` line comes in with the headers; read from the bare socket, it was lost."""
    folder = BUNDLES / "attacks"
    with limited_docker_backend() as backend:
        for _ in range(2):  # in a new container, then in the same one reused
            sandbox = backend.acquire(folder, bundle_hash(folder))
            session = {"episode_id": uuid.uuid4().hex, "config": {"attack": "events", "count": 1}}
            outcome = run_protocol(sandbox, {"mode": "episode", "session": session}, {}, wall_clock_s=20,
                                   max_requests=5)
            assert outcome.finish_reason is TerminationReason.AGENT_STOP, (outcome.note, outcome.stderr_tail)
