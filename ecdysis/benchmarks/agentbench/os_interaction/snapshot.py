"""Snapshots of a task container, taken before the agent acts, in which the grader runs the task's example.

Upstream runs the example (the reference solution whose output is the expected answer) in the agent's container
after the agent has answered, so what the agent left there (deleted input data, a process that rewrites a tool
between two execs) decides the expected answer. Here the container is committed to an image once the task's setup
is done (``take``), and the example later runs in a fresh container of that image (``run``): it sees the task as the
agent first saw it, and nothing of the agent's exists there. The image carries the service's labels, so one a dead
process left is found and removed (``remove_leftover_images``).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import requests

from ecdysis.sandbox.ownership import OWNER_LABEL, owner_alive

log = logging.getLogger(__name__)

SNAPSHOT_LABEL = "ecdysis.agentbench.snapshot"
"""Set on every snapshot image (and on no other: the task image carries the service's other labels too)."""


def take(client: Any, container_id: str, labels: dict[str, str]) -> str:
    """Commit the container (paused meanwhile) to an untagged image; returns its id."""
    return str(client.api.commit(container_id, conf={"Labels": {**labels, SNAPSHOT_LABEL: "1"}}, pause=True)["Id"])


def run(client: Any, image: str, command: list[str], *, timeout: float, options: dict[str, Any]) -> tuple[int | None,
                                                                                                          str]:
    """Run ``command`` as the main process of a fresh container of ``image`` (created with ``options``, the
    service's isolation and limits) and return (exit status, or None past ``timeout``; its stdout). Raises docker
    errors (the daemon failed)."""
    container = client.containers.create(image, command=command, detach=True, **options)
    try:
        container.start()
        try:
            status: int | None = int(container.wait(timeout=timeout)["StatusCode"])
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
            if "timed out" not in str(exc):  # the daemon, not the example
                raise
            status = None
        output = container.logs(stdout=True, stderr=False) if status is not None else b""
        return status, output.decode("utf-8", "replace")
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True, v=True)


def drop(client: Any, image: str) -> None:
    """Remove a snapshot image (a missing one is fine)."""
    import docker.errors

    try:
        client.api.remove_image(image, force=True, noprune=False)
    except docker.errors.NotFound:
        pass
    except docker.errors.DockerException as exc:
        log.warning("could not remove snapshot image %s: %s", image[:19], exc)


def remove_leftover_images(client: Any, *, everything: bool = False) -> int:
    """Remove snapshot images whose creating process on this host is gone (all of them with ``everything``)."""
    removed = 0
    for summary in client.api.images(filters={"label": f"{SNAPSHOT_LABEL}=1"}):
        if not everything and owner_alive((summary.get("Labels") or {}).get(OWNER_LABEL, "")):
            continue
        drop(client, summary["Id"])
        removed += 1
    return removed
