"""Ordinary episodes and self-tests on both backends: requests served in order, events collected, every harness
failure turned into its termination reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sandbox_support import BUNDLES, Episode, assert_gone

from ecdysis.records import TerminationReason
from ecdysis.sandbox import EndEpisode, HandlerError, bundle_hash, run_protocol


class Host:
    """Handlers that answer like the trusted side would, recording what they were asked."""

    def __init__(self, user_ends: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.user_ends = user_ends

    def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("llm.complete", params))
        return {"role": "assistant", "content": "let me look",
                "tool_calls": [{"id": "c1", "type": "function",
                                "function": {"name": "get_order", "arguments": "{\"x\": 1}"}}]}

    def call(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("tool.call", params))
        return {"content": "order 7 shipped", "error": False}

    def peek(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("tool.peek", params))
        raise HandlerError("write_tool", f"{params['name']} writes; peek is read-only")

    def respond(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("user.respond", params))
        if self.user_ends:
            raise EndEpisode(TerminationReason.USER_STOP, "the user left")
        return {"text": "thanks, bye", "stop": True}

    def handlers(self) -> dict[str, Any]:
        return {"llm.complete": self.complete, "tool.call": self.call, "tool.peek": self.peek,
                "user.respond": self.respond}


def test_normal_episode(episode: Episode) -> None:
    host = Host()
    outcome, sandbox = episode("normal", handlers=host.handlers())
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    assert [op for op, _ in host.calls] == ["llm.complete", "tool.call", "tool.peek", "user.respond"]
    assert host.calls[0][1]["messages"] == [{"role": "system", "content": "Be helpful."}]
    assert host.calls[1][1] == {"call_id": "c1", "name": "get_order", "arguments": {"x": 1}}
    assert outcome.requests == 4
    assert outcome.events == [
        {"kind": "log", "params": {"text": "model said let me look"}},
        {"kind": "annotation", "params": {"call_id": "c1", "text": "ORDER 7 SHIPPED!"}},
        {"kind": "log", "params": {"text": "peek refused: SessionError write_tool"}},
        {"kind": "blocked", "params": {"call_id": "c2", "name": "delete_everything", "arguments": {"all": True},
                                       "reason": "destructive"}},
        {"kind": "log", "params": {"text": "user said 'thanks, bye' stop=True"}},
    ]
    assert "noise on stdout must not break the protocol" in outcome.stderr_tail
    assert outcome.start_latency_s is not None and outcome.start_latency_s > 0
    assert_gone(sandbox)


def test_missing_handler_is_refused_not_fatal(episode: Episode) -> None:
    host = Host()
    handlers = host.handlers()
    del handlers["tool.peek"]
    outcome, _ = episode("normal", handlers=handlers)
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    assert {"kind": "log", "params": {"text": "peek refused: SessionError unsupported"}} in outcome.events


def test_end_episode_from_a_handler(episode: Episode) -> None:
    outcome, sandbox = episode("normal", handlers=Host(user_ends=True).handlers())
    assert outcome.finish_reason is TerminationReason.USER_STOP
    assert outcome.note == "the user left"
    assert_gone(sandbox)


def test_unexpected_handler_fault_is_the_harness_failure_and_cleans_up(limited_backend: Any) -> None:
    """Handlers signal the trusted side's faults explicitly; any other exception was raised by what the harness
    sent, so it can never become an infrastructure ending (retried, then excluded from every metric)."""
    def broken(params: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("cannot encode what the harness sent")

    folder = BUNDLES / "normal"
    sandbox = limited_backend.acquire(folder, bundle_hash(folder))
    outcome = run_protocol(sandbox, {"mode": "episode", "session": {}}, {"llm.complete": broken}, wall_clock_s=20,
                           max_requests=5)
    assert outcome.finish_reason is TerminationReason.HARNESS_ERROR
    assert "could not serve llm.complete" in outcome.note and "cannot encode" in outcome.note
    assert_gone(sandbox)


def test_harness_exception_is_harness_error(episode: Episode) -> None:
    outcome, sandbox = episode("normal", config={"raise": True})
    assert outcome.finish_reason is TerminationReason.HARNESS_ERROR
    assert "RuntimeError: boom from the harness" in outcome.note and "Traceback" in outcome.note
    assert_gone(sandbox)


def test_import_error_is_harness_error(episode: Episode) -> None:
    outcome, _ = episode("broken_import")
    assert outcome.finish_reason is TerminationReason.HARNESS_ERROR
    assert "ModuleNotFoundError" in outcome.note and "module_that_does_not_exist" in outcome.note


@pytest.mark.parametrize(("returned", "reason"), [
    ("max_steps", TerminationReason.MAX_STEPS),
    ("too_many_errors", TerminationReason.TOO_MANY_ERRORS),
    ("user_stop", TerminationReason.HARNESS_ERROR),  # only the host may say the user stopped
])
def test_run_return_value(episode: Episode, returned: str, reason: TerminationReason) -> None:
    outcome, _ = episode("normal", config={"return": returned})
    assert outcome.finish_reason is reason, outcome.note


def test_selftest_passes(episode: Episode) -> None:
    outcome, sandbox = episode("normal", mode="selftest")
    assert outcome.selftest_passed is True
    assert outcome.finish_reason is TerminationReason.AGENT_STOP
    assert_gone(sandbox)


def test_selftest_fails(episode: Episode) -> None:
    outcome, _ = episode("selftest_fails", mode="selftest")
    assert outcome.selftest_passed is False
    assert outcome.finish_reason is TerminationReason.HARNESS_ERROR
    assert "the contract self-test found a broken rule" in outcome.note


def test_selftest_of_a_bundle_that_does_not_import(episode: Episode) -> None:
    outcome, _ = episode("broken_import", mode="selftest")
    assert outcome.selftest_passed is False
    assert "ModuleNotFoundError" in outcome.note


@pytest.mark.sandbox
def test_process_sandbox_starts_when_the_host_works_under_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # CI clones may live under /tmp: the host's working folder is hidden by the sandbox's private /tmp, not by a
    # mount on a path that does not exist there.
    from sandbox_support import limits_config

    from ecdysis.sandbox import make_backend

    monkeypatch.chdir(tmp_path)
    backend = make_backend(limits_config("process"))
    try:
        sandbox = backend.acquire(BUNDLES / "normal", bundle_hash(BUNDLES / "normal"))
        outcome = run_protocol(sandbox, {"mode": "selftest", "session": {}}, {}, wall_clock_s=60, max_requests=10)
        assert outcome.selftest_passed is True, (outcome.note, outcome.stderr_tail)
    finally:
        backend.shutdown()


@pytest.mark.parametrize("imports_it", [False, True], ids=["shipped", "imported"])
def test_a_harness_module_named_traceback_does_not_replace_the_error_note(episode: Episode, tmp_path: Path,
                                                                          imports_it: bool) -> None:
    # The runtime imports traceback only when it formats an error, by then with the bundle first on sys.path.
    (tmp_path / "traceback.py").write_text("def format_exc():\n    return 'forged note'\n")
    (tmp_path / "harness.py").write_text(("import traceback\n" if imports_it else "")
                                         + "def run(session):\n    raise RuntimeError('boom beside a traceback.py')\n")
    outcome, sandbox = episode(tmp_path)
    assert outcome.finish_reason is TerminationReason.HARNESS_ERROR
    assert "Traceback (most recent call last)" in outcome.note and "forged" not in outcome.note, outcome.note
    assert "RuntimeError: boom beside a traceback.py" in outcome.note
    assert_gone(sandbox)
