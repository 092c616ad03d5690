"""Every episode gets a fresh Docker container by default, so no value a harness sets in one episode reaches the next;
containers reused on request (``reuse_episodes`` above 1) serve several episodes of one harness, and an episode still
finds no file or process of the one before (though the container's counters carry over, as the last test shows)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sandbox_support import (
    BUNDLES,
    MIB,
    assert_gone,
    docker_client,
    limited_docker_backend,
)

from ecdysis.records import TerminationReason
from ecdysis.sandbox import ProtocolOutcome, bundle_hash, run_protocol

ATTACKS = BUNDLES / "attacks"
HOLDER = {"/sbin/docker-init -- sleep infinity", "sleep infinity"}
pytestmark = pytest.mark.docker


@pytest.fixture
def reusing() -> Iterator[Any]:
    with limited_docker_backend(reuse_episodes=100) as backend:
        yield backend


def run(backend: Any, config: dict[str, Any], *, wall_clock_s: float = 20.0) -> tuple[ProtocolOutcome, Any]:
    sandbox = backend.acquire(ATTACKS, bundle_hash(ATTACKS))
    start = {"mode": "episode", "session": {"episode_id": uuid.uuid4().hex, "config": config}}
    return run_protocol(sandbox, start, {}, wall_clock_s=wall_clock_s, max_requests=5), sandbox


def report(outcome: ProtocolOutcome) -> dict[str, Any]:
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, (outcome.note, outcome.stderr_tail)
    return dict(json.loads(outcome.events[-1]["params"]["text"]))


def harness_processes(container_id: str) -> list[list[str]]:
    """``docker top`` rows (UID first) of the container's processes not run as root."""
    client = docker_client()
    try:
        top = client.api.top(container_id, ps_args="-eo uid,pid,args")
    finally:
        client.close()
    return [row for row in top["Processes"] if row[0] != "0"]


@pytest.mark.parametrize("host_kill", [True, False], ids=["host_and_wipe_kill", "wipe_kill_alone"])
def test_a_reused_container_keeps_nothing_of_the_previous_episode(reusing: Any, host_kill: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if not host_kill:  # as on a host where the backend cannot reach the container's cgroup: the wipe's kill alone
        import ecdysis.sandbox.docker_backend as docker_backend

        monkeypatch.setattr(docker_backend, "_CGROUP_PROCS_FILES", ())
    first, sandbox1 = run(reusing, {"attack": "leave_behind"})
    left = report(first)
    assert all(ident >= 0 for ident in left["ipc"].values()), left  # the shm segment, queue and semaphores exist
    assert sandbox1.returned
    if os.geteuid() == 0:  # only root on the daemon's host can kill from outside
        assert (sandbox1.holder.procs_file is not None) == host_kill
    container = sandbox1.container.id
    # The detached process did not outlive its episode's release: the container waits for the next one without it.
    assert harness_processes(container) == []

    second, sandbox2 = run(reusing, {"attack": "inventory"})
    seen = report(second)
    assert sandbox2.container.id == container and sandbox2.exec_id != sandbox1.exec_id  # the very same container
    assert seen["files"]["/tmp"] == [] and seen["files"]["/dev/shm"] == [], seen["files"]
    assert seen["files"].get("/dev/mqueue", []) == []
    others = {pid: process for pid, process in seen["processes"].items() if int(pid) != seen["pid"]}
    assert {process["command"] for process in others.values()} <= HOLDER, others
    assert all(process["uid"] == 0 for process in others.values()), others
    assert seen["ipc"] == {"shm": [], "msg": [], "sem": []}, seen["ipc"]
    # The harness's uid holds no capability and can signal neither the init nor the root holder.
    assert {pid: seen["signals"][pid] for pid in others} == dict.fromkeys(others, "PermissionError"), seen["signals"]
    privileges = seen["privileges"]
    assert privileges["Uid"].split()[0] == "65532" and privileges["NoNewPrivs"] == "1", privileges
    assert int(privileges["CapEff"], 16) == int(privileges["CapPrm"], 16) == int(privileges["CapBnd"], 16) == 0
    assert_gone(sandbox2)


@pytest.mark.parametrize(("config", "wall_clock_s", "reason"), [
    ({"attack": "infinite_loop"}, 1.0, TerminationReason.TIMEOUT),
    ({"attack": "kill_runtime"}, 20.0, TerminationReason.HARNESS_ERROR),
    ({"attack": "exit_runtime"}, 20.0, TerminationReason.HARNESS_ERROR),
    ({"attack": "raw", "raw": "garbage\n"}, 20.0, TerminationReason.PROTOCOL_ERROR),
    ({"attack": "double_fork"}, 20.0, TerminationReason.AGENT_STOP),  # a child still holds the output stream
], ids=["timeout", "killed", "nonzero_exit", "protocol_violation", "stream_held_open"])
def test_a_container_is_reused_only_after_a_clean_end(reusing: Any, config: dict[str, Any], wall_clock_s: float,
                                                      reason: TerminationReason) -> None:
    outcome, sandbox = run(reusing, config, wall_clock_s=wall_clock_s)
    assert outcome.finish_reason is reason, (outcome.note, outcome.stderr_tail)
    assert not sandbox.returned
    assert_gone(sandbox)  # the container is removed
    assert reusing.idle_containers(sandbox.bundle_hash) == 0
    _, after = run(reusing, {"attack": "tmp_state"})
    assert after.container.id != sandbox.container.id


def test_reuse_episodes_one_is_one_container_per_episode() -> None:
    with limited_docker_backend(reuse_episodes=1) as backend:
        outcomes = [run(backend, {"attack": "tmp_state"}) for _ in range(2)]
        for outcome, sandbox in outcomes:
            assert report(outcome)["existed"] is False
            assert sandbox.exec_id is None and not sandbox.returned  # the runtime is the container's own process
            assert_gone(sandbox)
        assert outcomes[0][1].container.id != outcomes[1][1].container.id


def test_a_container_retires_after_reuse_episodes() -> None:
    with limited_docker_backend(reuse_episodes=2) as backend:
        sandboxes = [run(backend, {"attack": "tmp_state"})[1] for _ in range(3)]
        first, second, third = (sandbox.container.id for sandbox in sandboxes)
        assert first == second != third
        assert sandboxes[0].returned and not sandboxes[1].returned and sandboxes[2].returned
        assert_gone(sandboxes[1])  # its second episode was its last: removed


def test_out_of_memory_in_a_reused_container(reusing: Any) -> None:
    _, before = run(reusing, {"attack": "tmp_state"})
    assert before.returned
    outcome, sandbox = run(reusing, {"attack": "memory_bomb"}, wall_clock_s=60)
    assert sandbox.container.id == before.container.id  # the runtime was an exec: the container flag is not enough
    assert outcome.finish_reason is TerminationReason.OUT_OF_MEMORY, (outcome.note, outcome.stderr_tail)
    assert not sandbox.returned
    assert_gone(sandbox)


MARK = 300
"""How far the marking episode moves each counter (the finding's harness wrote 777)."""


@pytest.mark.parametrize("reuse_episodes", [None, 100], ids=["default_fresh_containers", "reuse_opted_in"])
def test_counters_a_harness_moves_do_not_reach_its_next_episode(reuse_episodes: int | None) -> None:
    """Issue 50, finding 4: a harness moved the pid counter, /tmp's inode numbers, the SysV IPC ids and the memory
    peak of its container by a chosen value and read it back in its next episode. By default the next episode reads
    exactly what it reads after an episode that moved nothing; with reuse opted in, the values still cross."""
    overrides = {} if reuse_episodes is None else {"reuse_episodes": reuse_episodes}
    with limited_docker_backend(**overrides) as backend:
        control = report(run(backend, {"attack": "counters"})[0])
        report(run(backend, {"attack": "mark", "value": MARK, "memory_mb": 128})[0])
        seen = report(run(backend, {"attack": "counters"})[0])
    assert control["memory_peak"] is not None, control  # the cgroup's peak is readable in the container
    if reuse_episodes is None:
        assert (seen["inode"], seen["ipc"]) == (control["inode"], control["ipc"]), (control, seen)
        # A new container's own start takes the first few pids (7 to 9 here, as its threads race), whatever ran before.
        assert abs(seen["pid"] - control["pid"]) <= 4, (control, seen)
        assert abs(seen["memory_peak"] - control["memory_peak"]) < 16 * MIB, (control, seen)
    else:
        assert seen["pid"] >= control["pid"] + MARK and seen["inode"] >= control["inode"] + MARK, (control, seen)
        assert seen["ipc"] > control["ipc"] and seen["memory_peak"] >= 128 * MIB, (control, seen)
