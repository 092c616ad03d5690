"""The in-memory backend runs the runtime's own session code, so a bundle behaves there exactly as in a real sandbox:
the same session attributes, the same refusal error, the same reply objects, finish reasons and notes."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from ecdysis.records import TerminationReason
from ecdysis.sandbox import HandlerError, ProtocolOutcome, bundle_hash, run_protocol
from ecdysis.testing.sandbox import SessionError

HARNESS = '''
import rules


def run(session):
    session.log(f"{session.policy} {session.max_steps} tools={len(session.tools)} config={sorted(session.config)}")
    try:
        session.peek_tool("cancel", {"id": 1})
    except Exception as exc:
        session.log(f"refused: {type(exc).__qualname__} kind={exc.kind} message={exc.message} args={exc.args}")
    session.log(repr(session.respond_to_user("hi")))
    session.log(repr(session.call_tool("c1", "get", {"x": 1})))
    steps = 0
    while steps < session.max_steps:
        reply = session.complete([{"role": "user", "content": rules.PROMPT}])
        steps += 1
    session.annotate("c1", reply["content"])
    session.block("c2", "drop", {"all": True}, "destructive")
    if session.config.get("raise"):
        raise KeyError(session.config["raise"])
    return session.config.get("finish", "max_steps")


def selftest():
    raise AssertionError(rules.PROMPT)
'''


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("parity") / "bundle"
    folder.mkdir()
    (folder / "harness.py").write_text(HARNESS)
    (folder / "rules.py").write_text('PROMPT = "be brief"\n')
    return folder


def _peek(params: dict[str, Any]) -> Any:
    raise HandlerError("write_tool", f"{params['name']} writes; peek is read-only")


HANDLERS = {"llm.complete": lambda params: {"role": "assistant", "content": "ok"},
            "user.respond": lambda params: {"text": "bye", "stop": True},
            "tool.call": lambda params: {"content": "shipped", "error": False},
            "tool.peek": _peek}


def _run(backend: Any, bundle: Path, mode: str, config: dict[str, Any]) -> ProtocolOutcome:
    start = {"mode": mode, "session": {"episode_id": uuid.uuid4().hex, "policy": "Be helpful.",
                                       "tools": [{"type": "function", "function": {"name": "get"}}],
                                       "max_steps": 3, "config": config}}
    return run_protocol(backend.acquire(bundle, bundle_hash(bundle)), start, HANDLERS, wall_clock_s=30,
                        max_requests=20)


def _seen(outcome: ProtocolOutcome) -> tuple[Any, ...]:
    last_line = outcome.note.strip().splitlines()[-1:] if outcome.note else []
    return outcome.finish_reason, outcome.requests, outcome.events, last_line, outcome.selftest_passed


@pytest.mark.parametrize(("mode", "config", "reason"), [
    ("episode", {}, TerminationReason.MAX_STEPS),
    ("episode", {"finish": "gave_up"}, TerminationReason.HARNESS_ERROR),
    ("episode", {"raise": "missing"}, TerminationReason.HARNESS_ERROR),
    ("selftest", {}, None),
])
def test_a_bundle_behaves_the_same_in_memory_and_in_a_real_sandbox(limited_backend: Any, memory_backend: Any,
                                                                  bundle: Path, mode: str, config: dict[str, Any],
                                                                  reason: TerminationReason | None) -> None:
    real, fast = _run(limited_backend, bundle, mode, config), _run(memory_backend, bundle, mode, config)
    assert _seen(fast) == _seen(real)
    if reason is not None:
        assert real.finish_reason is reason, real.note
        assert {"kind": "log", "params": {"text": "refused: SessionError kind=write_tool message=cancel writes; peek "
                "is read-only args=('write_tool: cancel writes; peek is read-only',)"}} in real.events
        assert {"kind": "log", "params": {"text": "UserReply(text='bye', stop=True)"}} in real.events
    else:
        assert real.selftest_passed is False and real.note.strip().endswith("AssertionError: be brief")


def test_the_harness_meets_the_runtimes_own_error_class() -> None:
    from ecdysis.sandbox.runtime import ecdysis_runtime

    assert SessionError is ecdysis_runtime.SessionError
