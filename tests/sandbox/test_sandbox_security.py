"""Hostile harnesses, run on both backends: each attempt ends as a ProtocolOutcome with the right reason, and
nothing of the sandbox survives it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import Episode, assert_gone

from ecdysis.records import TerminationReason

CANARY = "sk-test-ecdysis-canary-5f2b"


def reports(outcome: Any) -> list[dict[str, Any]]:
    """The JSON reports the attack harness logged."""
    return [json.loads(event["params"]["text"]) for event in outcome.events
            if event["kind"] == "log" and event["params"]["text"].startswith("{")]


def require(backend: Any, attribute: str, reason: str) -> None:
    if not getattr(backend, attribute, True):
        pytest.skip(f"needs root: a process backend not run as root cannot enforce this ({reason})")


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on every host interface; records each connection it accepts."""
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.2)
    accepted: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                accepted.append(conn.recv(100))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


def host_addresses() -> list[str]:
    addresses = {"127.0.0.1", "172.17.0.1"}
    with contextlib.suppress(OSError):
        addresses.add(socket.gethostbyname(socket.gethostname()))
    return sorted(addresses)


def test_network_is_unreachable(episode: Episode, limited_backend: Any, listener: tuple[int, list[bytes]]) -> None:
    require(limited_backend, "isolates_network", "the kernel refuses a new network namespace")
    port, accepted = listener
    # The listener really is reachable from outside a sandbox, so the check below can fail.
    with socket.create_connection(("127.0.0.1", port), timeout=2) as probe:
        probe.sendall(b"probe")
    targets = [[address, port] for address in host_addresses()]
    outcome, sandbox = episode("attacks", config={"attack": "network", "targets": targets})
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    (report,) = reports(outcome)
    assert all(result != "connected" for result in report["outcomes"].values()), report
    assert accepted == [b"probe"]
    assert_gone(sandbox)


def test_cannot_write_outside_tmp(episode: Episode, limited_backend: Any, tmp_path: Path) -> None:
    require(limited_backend, "drops_privileges",
            "the host does not run as root, so the sandbox keeps the host user's rights")
    host_file = tmp_path / "escape.txt"
    targets = ["/escape.txt", "/etc/escape.txt", "/opt/ecdysis/escape.py", "/usr/lib/escape.txt", str(host_file)]
    outcome, sandbox = episode("attacks", config={"attack": "write_outside", "targets": targets})
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    (report,) = reports(outcome)
    assert report["tmp_ok"] is True
    assert set(report["outcomes"].values()) <= {"PermissionError", "OSError", "FileNotFoundError"}, report
    assert not host_file.exists()
    assert not Path("/escape.txt").exists() and not Path("/etc/escape.txt").exists()
    assert_gone(sandbox)


def test_provider_keys_are_invisible(episode: Episode, limited_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    require(limited_backend, "drops_privileges",
            "as the host's own user, the sandbox could read /proc/<host pid>/environ")
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    assert os.environ["OPENAI_API_KEY"] == CANARY
    outcome, sandbox = episode("attacks", config={"attack": "secrets", "canary": CANARY})
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    (report,) = reports(outcome)
    assert report["found"] == [], report
    assert report["readable_environ"] >= 1  # the scan ran (the sandbox can read its own environment)
    assert not any(name.endswith("_API_KEY") for name in report["env"])
    assert_gone(sandbox)


def test_fork_limit_is_enforced(episode: Episode, limited_backend: Any) -> None:
    require(limited_backend, "drops_privileges", "RLIMIT_NPROC does not bind root, and the host does not run as root")
    outcome, sandbox = episode("attacks", config={"attack": "fork_limit"})
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    (report,) = reports(outcome)
    limit = getattr(limited_backend.config, "pids_limit", None) or limited_backend.config.nproc
    assert 0 < report["children"] < limit, report
    assert "Resource temporarily unavailable" in report["error"] or "BlockingIOError" in report["error"]
    assert_gone(sandbox)


def test_fork_bomb_times_out_and_is_cleaned_up(episode: Episode, limited_backend: Any) -> None:
    require(limited_backend, "drops_privileges",
            "without its own uid the bomb's processes cannot all be found and killed")
    outcome, sandbox = episode("attacks", config={"attack": "fork_bomb"}, wall_clock_s=3)
    assert outcome.finish_reason is TerminationReason.TIMEOUT, outcome.note
    assert_gone(sandbox)


def test_memory_bomb_is_out_of_memory(episode: Episode) -> None:
    outcome, sandbox = episode("attacks", config={"attack": "memory_bomb"}, wall_clock_s=60)
    assert outcome.finish_reason is TerminationReason.OUT_OF_MEMORY, (outcome.note, outcome.stderr_tail)
    assert_gone(sandbox)


def test_infinite_loop_times_out(episode: Episode) -> None:
    outcome, sandbox = episode("attacks", config={"attack": "infinite_loop"}, wall_clock_s=2)
    assert outcome.finish_reason is TerminationReason.TIMEOUT
    assert "wall-clock" in outcome.note
    assert [event["params"]["text"] for event in outcome.events] == ["looping"]
    assert_gone(sandbox)


@pytest.mark.parametrize("attack", ["exit_runtime", "kill_runtime", "close_output"])
def test_a_harness_that_ends_its_own_runtime_is_a_harness_error(episode: Episode, limited_backend: Any,
                                                                 attack: str) -> None:
    # Infrastructure endings are retried and excluded from metrics: a harness must not reach them by crashing.
    outcome, sandbox = episode("attacks", config={"attack": attack}, wall_clock_s=10)
    assert not outcome.finish_reason.is_infrastructure, outcome.note
    if attack != "close_output":  # with stderr still open, Docker's attach stream shows no end: a timeout then
        assert outcome.finish_reason is TerminationReason.HARNESS_ERROR, (outcome.note, outcome.stderr_tail)
    if attack == "kill_runtime":  # only the init of a PID namespace (bubblewrap's --as-pid-1) outlives its SIGKILL
        survived = any(report.get("survived_sigkill") for report in reports(outcome))
        assert survived == bool(getattr(limited_backend, "allowlist", False)), outcome.events
    assert_gone(sandbox)


@pytest.mark.parametrize("attack", ["print_flood", "log_flood"])
def test_output_flood_is_a_protocol_error(episode: Episode, attack: str) -> None:
    outcome, sandbox = episode("attacks", config={"attack": attack}, wall_clock_s=60)
    assert outcome.finish_reason is TerminationReason.PROTOCOL_ERROR, outcome.note
    # Prints hit the output cap; log events hit the event cap first.
    assert ("cap" if attack == "print_flood" else "more than 2000 events") in outcome.note
    assert_gone(sandbox)


@pytest.mark.parametrize(("raw", "expected"), [
    ("this is not json\n", "not JSON"),
    ("[1, 2, 3]\n", "not a JSON object"),
    ('{"v": 2, "type": "event", "kind": "log", "params": {"text": "x"}}\n', "version"),
    ('{"v": 1, "type": "hello"}\n', "unexpected message type"),
    ('{"v": 1, "type": "request", "id": 1, "op": "shell.exec", "params": {"cmd": "id"}}\n', "unknown op"),
    ('{"v": 1, "type": "request", "id": "1", "op": "llm.complete", "params": {}}\n', "not an integer"),
    ('{"v": 1, "type": "event", "kind": "exec", "params": {}}\n', "unknown event kind"),
    ('{"v": 1, "type": "finish", "result": {"reason": "selftest_ok", "note": ""}}\n', "not valid in episode"),
    ('{"v": 1, "type": "finish", "result": {"reason": "user_stop", "note": ""}}\n', "not valid in episode"),
    ("\n", "not JSON"),
])
def test_malformed_protocol_lines(episode: Episode, raw: str, expected: str) -> None:
    outcome, sandbox = episode("attacks", config={"attack": "raw", "raw": raw}, wall_clock_s=30)
    assert outcome.finish_reason is TerminationReason.PROTOCOL_ERROR
    assert expected in outcome.note
    assert_gone(sandbox)


def test_oversized_line_is_a_protocol_error(episode: Episode) -> None:
    outcome, sandbox = episode("attacks", config={"attack": "oversized"}, wall_clock_s=30)
    assert outcome.finish_reason is TerminationReason.PROTOCOL_ERROR
    assert "longer than" in outcome.note or "exceeds" in outcome.note
    assert_gone(sandbox)


def test_request_budget_ends_with_max_steps(episode: Episode) -> None:
    served: list[dict[str, Any]] = []

    def complete(params: dict[str, Any]) -> dict[str, Any]:
        served.append(params)
        return {"role": "assistant", "content": "again", "tool_calls": []}

    outcome, sandbox = episode("attacks", config={"attack": "endless_requests"},
                               handlers={"llm.complete": complete}, max_requests=5)
    assert outcome.finish_reason is TerminationReason.MAX_STEPS
    assert len(served) == 5 and outcome.requests == 6
    assert_gone(sandbox)


def test_tmp_is_size_limited(episode: Episode, limited_backend: Any) -> None:
    require(limited_backend, "private_tmp", "without root the sandbox's temp folder is on the host disk, unbounded")
    outcome, sandbox = episode("attacks", config={"attack": "fill_tmp"}, wall_clock_s=60)
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    (report,) = reports(outcome)
    assert 0 < report["written"] <= 64 * (1 << 20), report
    assert "errno=28" in report["error"], report  # ENOSPC: the tmpfs is full
    assert_gone(sandbox)


def test_hidden_host_folders(kind: str, episode: Episode, tmp_path: Path) -> None:
    """The weak process sandbox sees the host's filesystem except the folders it covers (the allow-list sandbox and
    containers see no host folder at all: test_process_isolation and the write and secret tests)."""
    if kind != "process":
        pytest.skip("a container sees no host folder at all (covered by the write and secret tests)")
    import shutil
    import tempfile

    from sandbox_support import limits_config

    from ecdysis.sandbox import make_backend

    folder = Path(tempfile.mkdtemp(prefix="ecdysis-canary-", dir="/var/tmp"))
    try:
        folder.chmod(0o755)
        secret = folder / "project.env"
        secret.write_text(f"OPENAI_API_KEY={CANARY}\n")
        secret.chmod(0o644)
        config = {"attack": "read_files", "targets": [str(secret)]}
        exposed = make_backend(limits_config("process", isolation="weak", hide_paths=[]))
        hidden = make_backend(limits_config("process", isolation="weak", hide_paths=[str(folder)]))
        try:
            require(hidden, "private_tmp", "hiding folders needs a private mount namespace (root)")
            plain, _ = episode("attacks", config=config, on=exposed)
            covered, sandbox = episode("attacks", config=config, on=hidden)
        finally:
            exposed.shutdown()
            hidden.shutdown()
        # World-readable files are visible to a process sandbox unless hidden: the control shows the check works.
        assert CANARY in reports(plain)[0]["outcomes"][str(secret)]
        assert reports(covered)[0]["outcomes"][str(secret)] == "FileNotFoundError"
        assert_gone(sandbox)
    finally:
        shutil.rmtree(folder)


def test_runtime_that_stops_reading_cannot_block_the_host(episode: Episode) -> None:
    def huge(params: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": "y" * (8 << 20)}  # far more than any pipe or socket buffer

    outcome, sandbox = episode("attacks", config={"attack": "request_then_ignore"},
                               handlers={"llm.complete": huge}, wall_clock_s=3)
    assert outcome.finish_reason is TerminationReason.TIMEOUT, outcome.note
    assert_gone(sandbox)
