"""Removing a container when the daemon answers slower than the client waits: the removal goes on in the daemon,
and the caller sees it done instead of a read time-out (CI once failed an episode's close that way, a btrfs quota
group taking over a minute to drop on a loaded machine)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import requests.exceptions
from sandbox_support import SESSION_ID, TEST_LABEL, docker_client, skip_without_docker

from ecdysis.sandbox import DockerSandboxConfig
from ecdysis.sandbox.removal import remove_container

pytestmark = pytest.mark.docker


@pytest.fixture
def clients() -> Iterator[tuple[Any, Any]]:
    """A client that waits as usual, and one over the same engine whose read time-out is 1 ms."""
    skip_without_docker()
    import docker

    patient = docker_client()
    impatient = docker.from_env(version=patient.api.api_version, timeout=0.001)
    yield patient, impatient
    for summary in patient.api.containers(all=True, filters={"label": f"{TEST_LABEL}={SESSION_ID}"}):
        patient.api.remove_container(summary["Id"], force=True)
    impatient.close()
    patient.close()


def running_container(client: Any) -> str:
    image = DockerSandboxConfig().base_image
    created = client.api.create_container(image, command=["sleep", "600"], labels={TEST_LABEL: SESSION_ID},
                                          host_config=client.api.create_host_config(network_mode="none"))
    client.api.start(created["Id"])
    return str(created["Id"])


def gone(client: Any, container_id: str) -> bool:
    return not client.api.containers(all=True, filters={"id": container_id})


def test_a_removal_the_client_stops_waiting_for_is_seen_through(clients: tuple[Any, Any]) -> None:
    patient, impatient = clients
    first = running_container(patient)
    with pytest.raises(requests.exceptions.RequestException):  # what the plain call does: the caller would fail
        impatient.api.remove_container(first, force=True, v=True)
    second = running_container(patient)
    slow_daemon = SimpleNamespace(api=SimpleNamespace(remove_container=impatient.api.remove_container,
                                                      inspect_container=patient.api.inspect_container))
    assert remove_container(slow_daemon, second, wait_s=60) is True
    assert gone(patient, second)


def test_a_missing_container_counts_as_removed(clients: tuple[Any, Any]) -> None:
    patient, _ = clients
    container = running_container(patient)
    patient.api.remove_container(container, force=True)
    assert remove_container(patient, container) is True


def test_a_removal_that_never_ends_is_left_to_the_orphan_sweep(clients: tuple[Any, Any]) -> None:
    """The daemon never gets there (every request times out): False after the wait, and the container is still
    there with its labels, for the sweep of a later process."""
    patient, _ = clients
    container = running_container(patient)

    def times_out(*_: Any, **__: Any) -> None:
        raise requests.exceptions.ReadTimeout("the daemon did not answer")

    never_removes = SimpleNamespace(api=SimpleNamespace(remove_container=times_out,
                                                        inspect_container=patient.api.inspect_container))
    assert remove_container(never_removes, container, wait_s=0.5) is False
    assert not gone(patient, container)
    assert patient.api.inspect_container(container)["Config"]["Labels"][TEST_LABEL] == SESSION_ID
