"""A reused Docker container is wiped and checked when its episode ends: nothing an episode leaves (folders deeper
than PATH_MAX, files in every writable place, SysV IPC, a daemon that ignores SIGTERM and SIGHUP) outlives the
episode's release, and a container that cannot be shown clean is not reused."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sandbox_support import BUNDLES, docker_client, limits_config, skip_without_docker

import ecdysis.sandbox.docker_backend as docker_module
from ecdysis.records import TerminationReason
from ecdysis.sandbox import bundle_hash, make_backend, run_protocol

LEFTOVERS = BUNDLES / "leftovers"
WRITABLE = ["/dev/mqueue", "/dev/shm", "/tmp"]
PATH_MAX = 4096
NOTHING = {"found": {folder: [] for folder in WRITABLE}, "others": [], "ipc": {"shm": [], "msg": [], "sem": []}}
"""What the ``look`` episode reports in a container as new."""


@pytest.fixture
def docker_backend() -> Iterator[Any]:
    skip_without_docker()
    made = make_backend(limits_config("docker", reuse_episodes=100))  # reuse is opt-in
    yield made
    made.shutdown()


def episode(backend: Any, do: str) -> tuple[dict[str, Any], Any]:
    """One episode of the leftovers bundle (closed, so released, when this returns): its report and its sandbox."""
    sandbox = backend.acquire(LEFTOVERS, bundle_hash(LEFTOVERS))
    start = {"mode": "episode", "session": {"episode_id": uuid.uuid4().hex, "config": {"do": do}}}
    outcome = run_protocol(sandbox, start, {}, wall_clock_s=30, max_requests=5)
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, (outcome.note, outcome.stderr_tail)
    return json.loads(outcome.events[-1]["params"]["text"]), sandbox


def seen_from_outside(container_id: str) -> dict[str, Any]:
    """The container's processes not run as root (``docker top``, on the host) and, by an exec as root, the entries
    of its writable places and its SysV IPC objects."""
    client = docker_client()
    try:
        top = client.api.top(container_id, ps_args="-eo uid,pid,args")
        look = client.api.exec_create(container_id, ["sh", "-c", "ls -A /tmp /dev/shm /dev/mqueue; tail -qn +2 "
                                                     "/proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem"],
                                      user="0:0")
        listing = client.api.exec_start(look["Id"]).decode()
    finally:
        client.close()
    return {"processes": [row for row in top["Processes"] if row[0] != "0"],
            "listing": [line for line in listing.splitlines() if line and not line.endswith(":")]}


def test_nothing_of_an_episode_outlives_its_release(docker_backend: Any) -> None:
    left, first = episode(docker_backend, "leave")
    assert left["writable"] == WRITABLE, left["writable"]  # every writable place, each planted in
    assert all(left["planted"][folder] for folder in WRITABLE), left["planted"]
    assert all(depth > PATH_MAX for depth in left["depth"].values()), left["depth"]
    assert left["ipc"]["shm"] >= 0 and left["ipc"]["msg"] >= 0 and left["daemon"] > 0, left
    assert first.returned  # a clean end: the container waits for the next episode of this bundle
    # Right after the release, before any acquire: no process of the harness, no file, no IPC object.
    assert seen_from_outside(first.container.id) == {"processes": [], "listing": []}

    seen, second = episode(docker_backend, "look")
    assert second.container.id == first.container.id and second.exec_id != first.exec_id  # the very same container
    assert seen == NOTHING


def test_a_wipe_that_fails_quietly_is_caught_and_the_container_removed(docker_backend: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A wipe that says it worked and did nothing: the check as root must find the daemon and the files.
    monkeypatch.setattr(docker_module, "WIPE_COMMAND", ["python3", "-I", "-S", "-c", "print('wiped')"])
    _, first = episode(docker_backend, "leave")
    assert not first.returned and docker_backend.idle_containers(first.bundle_hash) == 0
    client = docker_client()
    try:
        assert client.api.containers(all=True, filters={"id": first.container.id}) == []  # removed, daemon and all
    finally:
        client.close()
    seen, second = episode(docker_backend, "look")
    assert second.container.id != first.container.id
    assert seen == NOTHING
    assert second.returned  # reuse stays on: the wipe itself is available


def test_reuse_is_off_where_the_wipe_cannot_run(docker_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # As in an image without find or chmod: the wipe's last line says it cannot run.
    monkeypatch.setattr(docker_module, "WIPE_COMMAND", ["python3", "-I", "-S", "-c", "print('cannot wipe')"])
    _, first = episode(docker_backend, "leave")
    assert not first.returned
    seen, second = episode(docker_backend, "look")
    assert second.exec_id is None and not second.returned  # one container per episode from now on
    assert second.container.id != first.container.id
    assert seen["found"] == NOTHING["found"] and seen["ipc"] == NOTHING["ipc"]
