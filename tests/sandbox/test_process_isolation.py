"""The allow-list process sandbox (bubblewrap, cgroups, leased uids): what it hides, what it limits as a whole, and
that it refuses to start, rather than run weaker, where its isolation cannot be had."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import BUNDLES, assert_gone, limits_config

from ecdysis.records import TerminationReason
from ecdysis.sandbox import ProcessSandboxConfig, SandboxUnavailable, bundle_hash, make_backend, run_protocol
from ecdysis.sandbox.uids import lease_uid

pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the allow-list process sandbox runs as root")]
ATTACKS = BUNDLES / "attacks"


def run(backend: Any, config: dict[str, Any], wall_clock_s: float = 60) -> tuple[Any, Any]:
    sandbox = backend.acquire(ATTACKS, bundle_hash(ATTACKS))
    start = {"mode": "episode", "session": {"episode_id": uuid.uuid4().hex, "config": config}}
    return run_protocol(sandbox, start, {}, wall_clock_s=wall_clock_s, max_requests=20), sandbox


def report(outcome: Any) -> dict[str, Any]:
    (found,) = [json.loads(e["params"]["text"]) for e in outcome.events if e["params"].get("text", "").startswith("{")]
    return found


@pytest.fixture(scope="module")
def allowlist() -> Iterator[Any]:
    backend = make_backend(limits_config("process"))
    yield backend
    backend.shutdown()


def test_memory_is_limited_for_the_whole_sandbox() -> None:
    """Four children of 200 MiB each: each fits the per-process limit, together they pass the sandbox's 400 MiB
    cgroup, and the kernel kills some of them. The weak sandbox, limited per process only, lets all four live."""
    killed = {}
    for isolation in ("allowlist", "weak"):
        backend = make_backend(limits_config("process", isolation=isolation, memory_bytes=400 << 20,
                                             address_space_bytes=512 << 20))
        try:
            outcome, sandbox = run(backend, {"attack": "memory_children", "bytes": 200 << 20, "children": 4})
        finally:
            backend.shutdown()
        assert outcome.finish_reason is TerminationReason.AGENT_STOP, (outcome.note, outcome.stderr_tail)
        killed[isolation] = report(outcome)["killed"]
        assert_gone(sandbox)
    assert killed["allowlist"] >= 1 and killed["weak"] == 0, killed


def test_every_sandbox_on_the_node_gets_its_own_uid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two uids in the range; another process (as another rollout worker would) holds one of them."""
    monkeypatch.setenv("ECDYSIS_UID_LOCK_DIR", str(tmp_path / "locks"))
    import ecdysis.sandbox.uids as uids

    monkeypatch.setattr(uids, "LOCK_DIR", tmp_path / "locks")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from ecdysis.sandbox.uids import lease_uid; "
         "lease = lease_uid((650000, 650002)); print(lease.uid, flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline())
        backend = make_backend(limits_config("process", uid_range=(650000, 650002)))
        try:
            sandbox = backend.acquire(ATTACKS, bundle_hash(ATTACKS))
            assert sandbox.uid == ({650000, 650001} - {held}).pop()
            with pytest.raises(SandboxUnavailable, match="every sandbox uid"):
                backend.acquire(ATTACKS, bundle_hash(ATTACKS))
            sandbox.close()
            again = backend.acquire(ATTACKS, bundle_hash(ATTACKS))  # given back on close
            assert again.uid == sandbox.uid
            again.close()
        finally:
            backend.shutdown()
    finally:
        holder.kill()
        holder.wait()
    lease = lease_uid((650000, 650002))  # the holder died: the kernel dropped its lock
    assert lease.uid in (650000, 650001)
    lease.release()


@pytest.mark.parametrize("bwrap", ["missing", "refusing"])
def test_refuses_to_start_without_its_isolation(bwrap: str) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ecdysis-fake-bwrap-", dir="/var/tmp"))
    folder.chmod(0o755)  # the sandbox uid runs it
    program = folder / "bwrap"
    if bwrap == "refusing":
        program.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
        program.chmod(0o755)
    try:
        with pytest.raises(SandboxUnavailable) as raised:
            make_backend(ProcessSandboxConfig(warm_pool=0, bwrap=str(program)))
    finally:
        import shutil

        shutil.rmtree(folder)
    message = str(raised.value)
    assert "isolation: weak" in message and "Docker" in message
    assert ("not installed" if bwrap == "missing" else "No permissions to create new namespace") in message


def test_the_weak_mode_runs_only_when_asked_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    backend = make_backend(limits_config("process", isolation="weak"))
    try:
        assert backend.isolation == "process-weak"
        outcome, sandbox = run(backend, {"attack": "read_files", "targets": ["/etc/hostname"]})
    finally:
        backend.shutdown()
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    assert "isolation 'weak'" in caplog.text
    assert_gone(sandbox)


def test_the_gold_search_finds_the_tasks_where_they_are_visible() -> None:
    """The control of test_trust_boundary's gold search: the weak sandbox with nothing hidden reads τ²'s airline
    tasks (the file the allow-list sandbox cannot reach), so an unreachable path there means out of sight. The file is
    read from a world-readable copy, since a clone under /root keeps the venv behind /root's 0700."""
    import shutil

    folder = Path(tempfile.mkdtemp(prefix="ecdysis-gold-", dir="/var/tmp"))
    try:
        folder.chmod(0o755)
        tasks_json = str(shutil.copy(tau2_tasks_file(), folder / "tasks.json"))
        os.chmod(tasks_json, 0o644)
        backend = make_backend(limits_config("process", isolation="weak", hide_paths=[]))
        try:
            outcome, _ = run(backend, {"attack": "find_gold", "walk": False, "paths": [tasks_json]})
        finally:
            backend.shutdown()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    assert report(outcome)["reachable"] == {tasks_json: True}


def tau2_tasks_file() -> str:
    """Where τ² keeps airline's tasks (with the gold actions) on this host."""
    import importlib

    utils = importlib.import_module("tau2.domains.airline.utils")
    path = Path(utils.AIRLINE_TASK_SET_PATH)
    assert path.is_file(), path
    return str(path)


def test_a_sandbox_started_by_a_thread_that_ends_lives_on(allowlist: Any) -> None:
    """bubblewrap's die-with-parent watches the thread that started it: sandboxes are started from one long-lived
    thread, so a warm-pool refill thread or an episode thread that ends does not kill the sandboxes it asked for."""
    import threading

    started: list[Any] = []
    thread = threading.Thread(target=lambda: started.append(allowlist.acquire(ATTACKS, bundle_hash(ATTACKS))))
    thread.start()
    thread.join()
    import time

    time.sleep(0.5)  # a pdeathsig would have landed by now
    (sandbox,) = started
    start = {"mode": "episode", "session": {"episode_id": uuid.uuid4().hex, "config": {"attack": "tmp_state"}}}
    outcome = run_protocol(sandbox, start, {}, wall_clock_s=30, max_requests=5)
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, (outcome.note, outcome.stderr_tail)
