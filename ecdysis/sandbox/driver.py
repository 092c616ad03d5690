"""The host side of one episode: send ``start``, serve requests, collect events, map every ending to a reason.

``run_protocol`` never hangs (every wait is bounded by the wall clock) and never lets a sandbox failure escape. A
handler's unexpected exception ends the episode as ``harness_error``: handlers signal the trusted side's own faults
explicitly (``EndEpisode(INFRASTRUCTURE_ERROR)``), so anything else was raised by what the harness sent, and a harness
must never turn its own failure into an infrastructure ending (retried, then excluded from every metric).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ecdysis.protocols import Sandbox
from ecdysis.records import TerminationReason
from ecdysis.sandbox.clock import EpisodeClock
from ecdysis.sandbox.errors import ProtocolViolation, SandboxExited

OPS = frozenset({"llm.complete", "user.respond", "tool.call", "tool.peek"})
EVENT_KINDS = frozenset({"log", "blocked", "annotation"})
EPISODE_FINISH = {
    "agent_stop": TerminationReason.AGENT_STOP,
    "max_steps": TerminationReason.MAX_STEPS,
    "too_many_errors": TerminationReason.TOO_MANY_ERRORS,
    "harness_error": TerminationReason.HARNESS_ERROR,
    "out_of_memory": TerminationReason.OUT_OF_MEMORY,
}
SELFTEST_FINISH = {"selftest_ok": TerminationReason.AGENT_STOP, "selftest_failed": TerminationReason.HARNESS_ERROR}
NOTE_LIMIT = 16_000
MAX_EVENTS = 2_000
"""Events one episode may send; more ends it as ``protocol_error`` (each is stored and may reach a diagnosis)."""


class HandlerError(Exception):
    """Raised by a handler to refuse a request: the harness gets ``ok: false`` with this kind and message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class EndEpisode(Exception):
    """Raised by a handler when the episode is over on the trusted side (user stopped, step budget, LLM failure)."""

    def __init__(self, reason: TerminationReason, note: str = "") -> None:
        super().__init__(f"{reason.value}: {note}" if note else reason.value)
        self.reason = reason
        self.note = note


@dataclass
class ProtocolOutcome:
    """How one sandboxed episode (or self-test) ended and what it reported on the way."""

    finish_reason: TerminationReason
    note: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Events in arrival order: ``{"kind": ..., "params": {...}}``."""
    requests: int = 0
    """Requests served (answered, ok or not)."""
    stderr_tail: str = ""
    start_latency_s: float | None = None
    """Seconds from the sandbox's launch to its ``ready`` (None when unknown)."""
    selftest_passed: bool | None = None
    """In self-test mode: whether ``selftest()`` passed; None in episode mode or when it never finished."""
    duration_s: float = 0.0
    """Seconds from ``start`` to the end."""


class _Ended(Exception):
    def __init__(self, reason: TerminationReason, note: str) -> None:
        super().__init__(note)
        self.reason = reason
        self.note = note


def _violation(text: str) -> _Ended:
    return _Ended(TerminationReason.PROTOCOL_ERROR, text)


def run_protocol(sandbox: Sandbox, start: dict[str, Any], handlers: Mapping[str, Callable[[dict[str, Any]], Any]],
                 *, wall_clock_s: float, max_requests: int, max_events: int = MAX_EVENTS,
                 clock: EpisodeClock | None = None) -> ProtocolOutcome:
    """Run one episode in ``sandbox`` (already past ``ready``) and close it.

    ``start`` is the start message (``mode``, ``session``; ``type`` is added). Each request is answered by
    ``handlers[op](params)``; a HandlerError becomes an ``ok: false`` response, EndEpisode ends the episode with
    its reason, any other exception ends it as ``harness_error`` naming the exception.

    ``clock`` times the episode (its handlers leave their model waits out of it); None: ``wall_clock_s`` of plain
    wall time, started now.
    """
    started = time.monotonic()
    clock = clock or EpisodeClock(wall_clock_s)
    mode = start.get("mode", "episode")
    outcome = ProtocolOutcome(finish_reason=TerminationReason.SANDBOX_ERROR,
                              start_latency_s=getattr(sandbox, "start_latency_s", None))
    # A write can block (a runtime that stops reading its input); stopping the sandbox when the clock runs out
    # unblocks it.
    guard = _guard(clock, sandbox)
    try:
        sandbox.send({**start, "type": "start"})
        while True:
            remaining = clock.remaining_s()
            if remaining <= 0:
                raise _Ended(TerminationReason.TIMEOUT, clock.overrun_note())
            message = sandbox.receive(remaining)
            if message is None:
                continue
            kind = message.get("type")
            if kind == "request":
                outcome.requests += 1
                if outcome.requests > max_requests:
                    raise _Ended(TerminationReason.MAX_STEPS, f"more than {max_requests} requests")
                sandbox.send(_serve(message, handlers))
            elif kind == "event":
                if len(outcome.events) >= max_events:
                    raise _violation(f"more than {max_events} events")
                outcome.events.append(_event(message))
            elif kind == "finish":
                reason, note = _finish(message, mode)
                outcome.finish_reason, outcome.note = reason, note
                if mode == "selftest":
                    outcome.selftest_passed = reason is TerminationReason.AGENT_STOP
                break
            else:
                raise _violation(f"unexpected message type {str(kind)[:50]!r}")
    except _Ended as ended:
        outcome.finish_reason, outcome.note = ended.reason, ended.note
    except EndEpisode as ended:
        outcome.finish_reason, outcome.note = ended.reason, ended.note
    except ProtocolViolation as exc:
        outcome.finish_reason, outcome.note = TerminationReason.PROTOCOL_ERROR, str(exc)
    except SandboxExited as exc:
        if clock.expired():
            outcome.finish_reason = TerminationReason.TIMEOUT
            outcome.note = f"{clock.overrun_note()} ({exc})"
        else:
            outcome.note = str(exc)  # the deadline's own note above is kept: the guard's kill is its doing
            if exc.oom:
                outcome.finish_reason = TerminationReason.OUT_OF_MEMORY
            elif exc.timed_out:
                outcome.finish_reason = TerminationReason.TIMEOUT
            elif exc.by_harness:
                outcome.finish_reason = TerminationReason.HARNESS_ERROR
            else:
                outcome.finish_reason = TerminationReason.SANDBOX_ERROR
    finally:
        guard.set()
        sandbox.close()
        tail = getattr(sandbox, "stderr_tail", None)
        outcome.stderr_tail = tail() if callable(tail) else ""
        outcome.duration_s = time.monotonic() - started
    return outcome


def _guard(clock: EpisodeClock, sandbox: Sandbox) -> threading.Event:
    """Closes ``sandbox`` once ``clock`` runs out, unless the returned event is set first. It wakes when the clock
    could run out next, and waits again when a model wait has pushed that back."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(max(0.0, clock.remaining_s())):
            if clock.expired():
                sandbox.close()
                return

    threading.Thread(target=watch, name="episode-clock", daemon=True).start()
    return done


def _serve(message: dict[str, Any], handlers: Mapping[str, Callable[[dict[str, Any]], Any]]) -> dict[str, Any]:
    request_id, op, params = message.get("id"), message.get("op"), message.get("params", {})
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        raise _violation(f"request id {request_id!r} is not an integer")
    if op not in OPS:
        raise _violation(f"unknown op {str(op)[:50]!r}")
    if not isinstance(params, dict):
        raise _violation(f"params of {op} is not an object")
    handler = handlers.get(op)
    if handler is None:
        return {"type": "response", "id": request_id, "ok": False,
                "error": {"kind": "unsupported", "message": f"{op} is not available in this episode"}}
    try:
        result = handler(params)
    except HandlerError as exc:
        return {"type": "response", "id": request_id, "ok": False,
                "error": {"kind": exc.kind, "message": exc.message}}
    except EndEpisode:
        raise
    except Exception as exc:
        raise _Ended(TerminationReason.HARNESS_ERROR,
                     f"the trusted side could not serve {op} with what the harness sent: "
                     f"{type(exc).__name__}: {str(exc)[:2000]}") from exc
    return {"type": "response", "id": request_id, "ok": True, "result": result}


def _event(message: dict[str, Any]) -> dict[str, Any]:
    kind, params = message.get("kind"), message.get("params", {})
    if kind not in EVENT_KINDS:
        raise _violation(f"unknown event kind {str(kind)[:50]!r}")
    if not isinstance(params, dict):
        raise _violation(f"params of event {kind} is not an object")
    return {"kind": kind, "params": params}


def _finish(message: dict[str, Any], mode: str) -> tuple[TerminationReason, str]:
    result = message.get("result")
    if not isinstance(result, dict):
        raise _violation("finish without a result object")
    reason, note = result.get("reason"), result.get("note", "")
    table = SELFTEST_FINISH if mode == "selftest" else EPISODE_FINISH
    if reason not in table and not (mode == "selftest" and reason in EPISODE_FINISH):
        raise _violation(f"finish reason {str(reason)[:50]!r} is not valid in {mode} mode")
    mapped = table.get(reason) or EPISODE_FINISH[reason]
    text = note if isinstance(note, str) else str(note)
    return mapped, text[-NOTE_LIMIT:]
