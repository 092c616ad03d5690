"""One τ²-bench episode in a sandbox: the pure, single-rollout layer (batching and retries live above it).

The harness runs inside the sandbox; everything it asks for is served here, on the trusted side:
``llm.complete`` by the gateway (role ``task``), ``user.respond`` by the user simulator, ``tool.call`` and
``tool.peek`` by the episode's private :class:`EpisodeEnv`. The grade replays the executed write calls.

Endings (``Trajectory.termination_reason``):

- the user sent a stop token → ``user_stop`` (the conversation is over; any later request ends the episode);
- the harness finished → its reason (``agent_stop``, ``max_steps``, ``too_many_errors``, ``harness_error``);
- more than ``max_steps`` ``llm.complete`` requests → ``max_steps``; ``max_errors`` failed tool calls →
  ``too_many_errors`` (τ²'s default is 10); past ``wall_clock_s`` → ``timeout``;
- the task model's gateway call failed → ``llm_error`` (``budget_exceeded`` when the run's budget is spent);
- the user simulator failed → ``infrastructure_error`` (see :mod:`ecdysis.tau.user`);
- the sandbox could not start or died → ``sandbox_error`` / ``out_of_memory``; a protocol breach → ``protocol_error``;
- an unexpected fault on the trusted side → ``infrastructure_error`` with the exception in ``error``.

A rollout always returns a :class:`Trajectory`. Tokens, cost, calls and cache hits add up the task model's and
the user simulator's calls.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.protocols import LLMClient, SandboxBackend
from ecdysis.records import Role, Task, TerminationReason, TokenUsage, ToolCall, Trajectory, stable_hash
from ecdysis.tau import transcript
from ecdysis.tau.domain import EpisodeEnv, TauDomain
from ecdysis.tau.grading import grade
from ecdysis.tau.user import UserSimulator, UserSimulatorError

log = logging.getLogger(__name__)

MAX_USER_TEXT = 32_000
"""Longest message the agent may send the user in one ``user.respond`` (characters)."""
MAX_ARGUMENT_CHARS = 64_000
"""Largest ``tool.call`` arguments (characters of JSON): no domain tool needs more."""


class EpisodeRequest(BaseModel):
    """Everything that defines one rollout."""

    model_config = ConfigDict(extra="forbid")

    task: Task
    harness_dir: Path
    """The harness bundle folder (``harness.py`` inside)."""
    harness_hash: str
    model: str
    """The task model (any gateway model string, e.g. ``scripted/ecdysis.tau.scripted:gold_agent``)."""
    user_model: str
    """The user simulator's model."""
    trial: int = 0
    seed: int = 0
    run_id: str = ""
    round: int = 0
    phase: str = "eval"
    attempt: int = 0
    max_steps: int = Field(default=50, ge=1)
    """Most ``llm.complete`` requests (task-model turns) in the episode."""
    max_errors: int = Field(default=10, ge=1)
    """Failed tool calls before the episode ends with ``too_many_errors`` (τ²'s default)."""
    wall_clock_s: float = Field(default=600.0, gt=0)

    def trajectory_id(self) -> str:
        """Deterministic id of this rollout attempt."""
        key = [self.run_id, self.round, self.phase, self.task.domain, self.task.task_id, self.harness_hash,
               self.model, self.user_model, self.trial, self.seed, self.attempt]
        return stable_hash(key)[:24]


class _Accounting:
    def __init__(self) -> None:
        self.tokens = TokenUsage()
        self.calls = 0
        self.cache_hits = 0
        self.cost: float | None = None

    def add(self, tokens: TokenUsage, cache_hit: bool, cost: float | None, calls: int = 1) -> None:
        self.tokens = self.tokens + tokens
        self.calls += calls
        self.cache_hits += int(cache_hit)
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost


class _Episode:
    """Handlers and state of one running episode."""

    def __init__(self, request: EpisodeRequest, llm: LLMClient, domain: TauDomain, trajectory_id: str) -> None:
        self.request = request
        self.llm = llm
        self.domain = domain
        self.task = domain.task(request.task.task_id)
        self.env: EpisodeEnv = domain.new_env()
        self.context: dict[str, Any] = {
            "run_id": request.run_id, "round": request.round, "phase": request.phase,
            "domain": domain.name, "task_id": request.task.task_id, "trial": request.trial, "seed": request.seed,
            "trajectory_id": trajectory_id, "harness_hash": request.harness_hash,
        }
        self.user = UserSimulator(llm, request.user_model, self.task, context=dict(self.context))
        self.messages: list[dict[str, Any]] = []
        self.tool_calls: list[ToolCall] = []
        self.accounting = _Accounting()
        self.steps = 0
        self.errors = 0
        self.deadline: float | None = None
        """When the episode's wall-clock budget runs out (``time.monotonic()``): model calls are cut off there."""

    def handlers(self) -> dict[str, Any]:
        return {"llm.complete": self.complete, "user.respond": self.respond, "tool.call": self.call,
                "tool.peek": self.peek}

    def _check_open(self) -> None:
        from ecdysis.sandbox.driver import EndEpisode

        if self.user.stopped:
            raise EndEpisode(TerminationReason.USER_STOP, "the user had already ended the conversation")

    def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        from ecdysis.llm.errors import BudgetExceeded, DeadlineExceeded
        from ecdysis.sandbox.driver import EndEpisode, HandlerError

        self._check_open()
        messages, tools = params.get("messages"), params.get("tools")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise HandlerError("bad_request", "llm.complete needs 'messages': a list of message objects")
        if tools is not None and not isinstance(tools, list):
            raise HandlerError("bad_request", "llm.complete 'tools' must be a list of tool schemas or null")
        self.steps += 1
        if self.steps > self.request.max_steps:
            raise EndEpisode(TerminationReason.MAX_STEPS, f"more than {self.request.max_steps} model turns")
        try:
            completion = self.llm.complete(self.request.model, messages, role=Role.TASK, tools=tools,
                                           context=self.context, deadline=self.deadline)
        except BudgetExceeded as exc:
            if exc.completion is not None:  # the call that crossed the budget was made and paid for
                self.accounting.add(exc.completion.tokens, exc.completion.cache_hit, exc.completion.cost_usd)
            raise EndEpisode(TerminationReason.BUDGET_EXCEEDED, str(exc)) from exc
        except DeadlineExceeded as exc:
            raise EndEpisode(TerminationReason.TIMEOUT, f"wall-clock budget ran out during a task-model call: {exc}") \
                from exc
        except Exception as exc:
            raise EndEpisode(TerminationReason.LLM_ERROR, f"{type(exc).__name__}: {exc}") from exc
        self.accounting.add(completion.tokens, completion.cache_hit, completion.cost_usd)
        return completion.as_message()

    def respond(self, params: dict[str, Any]) -> dict[str, Any]:
        from ecdysis.llm.errors import BudgetExceeded, DeadlineExceeded
        from ecdysis.llm.retry import is_input_rejection
        from ecdysis.sandbox.driver import EndEpisode, HandlerError

        self._check_open()
        text = params.get("text")
        if not isinstance(text, str):
            raise HandlerError("bad_request", "user.respond needs 'text': a string")
        if len(text) > MAX_USER_TEXT:
            raise HandlerError("bad_request", f"user.respond 'text' is longer than {MAX_USER_TEXT} characters")
        self.messages.append(transcript.agent_text(text))
        try:
            reply = self.user.respond(text, deadline=self.deadline)
        except UserSimulatorError as exc:
            if isinstance(exc.__cause__, BudgetExceeded):  # the run's budget, not a fault of the simulator
                raise EndEpisode(TerminationReason.BUDGET_EXCEEDED, str(exc.__cause__)) from exc
            if isinstance(exc.__cause__, DeadlineExceeded):
                raise EndEpisode(TerminationReason.TIMEOUT,
                                 f"wall-clock budget ran out during a user-simulator call: {exc.__cause__}") from exc
            if is_input_rejection(exc.__cause__):  # the user model refused what the agent said: the harness's doing
                raise EndEpisode(TerminationReason.HARNESS_ERROR,
                                 f"the user simulator's model rejected the agent's message: {exc}") from exc
            raise EndEpisode(TerminationReason.INFRASTRUCTURE_ERROR, str(exc)) from exc
        self.messages.append(transcript.user_text(reply.text, reply.stop))
        return {"text": reply.text, "stop": reply.stop}

    def call(self, params: dict[str, Any]) -> dict[str, Any]:
        from ecdysis.sandbox.driver import EndEpisode, HandlerError

        self._check_open()
        name, arguments = params.get("name"), params.get("arguments")
        call_id = str(params.get("call_id") or f"call-{len(self.tool_calls)}")
        if not isinstance(name, str):
            raise HandlerError("bad_request", "tool.call needs 'name': a string")
        if len(json.dumps(arguments)) > MAX_ARGUMENT_CHARS:
            raise HandlerError("bad_request", f"tool.call 'arguments' exceed {MAX_ARGUMENT_CHARS} characters of JSON")
        content, error = self.env.call(name, arguments if arguments is not None else {})
        args = arguments if isinstance(arguments, dict) else {}
        self.messages.extend(transcript.tool_exchange(call_id, name, args, content, error))
        self.tool_calls.append(ToolCall(call_id=call_id, name=name, arguments=args, executed=True, result=content,
                                        error=error, step=self.steps))
        if error:
            self.errors += 1
            if self.errors >= self.request.max_errors:
                raise EndEpisode(TerminationReason.TOO_MANY_ERRORS, f"{self.errors} failed tool calls")
        return {"content": content, "error": error}

    def peek(self, params: dict[str, Any]) -> dict[str, Any]:
        from ecdysis.sandbox.driver import HandlerError

        self._check_open()
        name = params.get("name")
        if not isinstance(name, str):
            raise HandlerError("bad_request", "tool.peek needs 'name': a string")
        content, error = self.env.peek(name, params.get("arguments") or {})
        return {"content": content, "error": error}

    def apply_events(self, events: list[dict[str, Any]]) -> None:
        """Blocked calls become unexecuted tool calls; annotations attach to their executed call."""
        by_id = {call.call_id: call for call in self.tool_calls}
        for event in events:
            params = event.get("params") or {}
            if event.get("kind") == "blocked":
                arguments = params.get("arguments")
                blocked = ToolCall(call_id=str(params.get("call_id", "")), name=str(params.get("name", "")),
                                   arguments=arguments if isinstance(arguments, dict) else {}, executed=False,
                                   blocked_reason=str(params.get("reason", ""))[:4000], step=self.steps)
                self.tool_calls.append(blocked)
                by_id.setdefault(blocked.call_id, blocked)
            elif event.get("kind") == "annotation":
                target = by_id.get(str(params.get("call_id", "")))
                if target is not None:
                    text = str(params.get("text", ""))[:4000]
                    target.annotation = text if target.annotation is None else target.annotation + "\n" + text


def run_episode(request: EpisodeRequest, *, backend: SandboxBackend, llm: LLMClient,
                domain: TauDomain) -> Trajectory:
    """Run one rollout and grade it on the trusted side. Always returns a trajectory (see the module doc)."""
    from ecdysis.sandbox.driver import run_protocol

    started = time.monotonic()
    trajectory_id = request.trajectory_id()
    episode: _Episode | None = None
    reason = TerminationReason.INFRASTRUCTURE_ERROR
    error: str | None = None
    try:
        episode = _Episode(request, llm, domain, trajectory_id)
        start = {"mode": "episode", "session": {
            "episode_id": trajectory_id, "policy": domain.policy, "tools": domain.tool_schemas,
            "max_steps": request.max_steps,
            "config": {"domain": domain.name, "write_tools": sorted(domain.write_tools)},
        }}
        try:
            sandbox = backend.acquire(request.harness_dir, request.harness_hash)
        except Exception as exc:  # no sandbox: an infrastructure fault of this attempt, retried above
            reason, error = TerminationReason.SANDBOX_ERROR, f"sandbox could not start: {type(exc).__name__}: {exc}"
        else:
            max_requests = request.max_steps * 20 + 100
            episode.deadline = time.monotonic() + request.wall_clock_s
            outcome = run_protocol(sandbox, start, episode.handlers(), wall_clock_s=request.wall_clock_s,
                                   max_requests=max_requests)
            episode.apply_events(outcome.events)
            reason = TerminationReason.USER_STOP if episode.user.stopped else outcome.finish_reason
            if not reason.is_normal_stop or outcome.finish_reason is not TerminationReason.AGENT_STOP:
                error = outcome.note or None
            if reason is TerminationReason.SANDBOX_ERROR and outcome.stderr_tail:
                error = f"{error or ''}\n{outcome.stderr_tail}".strip()
    except Exception as exc:  # a fault on the trusted side: record it, never lose the rollout
        log.exception("episode %s failed on the trusted side", trajectory_id)
        reason, error = TerminationReason.INFRASTRUCTURE_ERROR, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    trajectory = _trajectory(request, trajectory_id, episode, reason, error, domain, time.monotonic() - started)
    return trajectory.model_copy(update={"sandbox": getattr(backend, "isolation", None)})


def _trajectory(request: EpisodeRequest, trajectory_id: str, episode: _Episode | None, reason: TerminationReason,
                error: str | None, domain: TauDomain, wall_time_s: float) -> Trajectory:
    messages = episode.messages if episode else []
    reward, breakdown = 0.0, {}
    if reason.is_normal_stop:
        try:
            result = grade(domain, request.task.task_id, reason, transcript.executed_calls(messages),
                           transcript.agent_texts(messages))
            reward, breakdown = result.reward, result.breakdown
        except Exception as exc:  # the replay runs the harness's own calls: what they raise is on the harness
            log.warning("grading %s failed on the harness's actions", trajectory_id, exc_info=True)
            reason, error = TerminationReason.HARNESS_ERROR, f"grading failed: {type(exc).__name__}: {exc}"
    accounting = _Accounting()
    if episode is not None:
        accounting = episode.accounting
        user = episode.user
        accounting.add(user.tokens, False, user.cost_usd, calls=user.calls)
        accounting.cache_hits += user.cache_hits
    common: dict[str, Any] = dict(
        trajectory_id=trajectory_id, run_id=request.run_id, round=request.round, phase=request.phase,
        task=request.task, model=request.model, trial=request.trial, seed=request.seed,
        harness_hash=request.harness_hash, tokens=accounting.tokens, llm_calls=accounting.calls,
        cache_hits=accounting.cache_hits, cost_usd=accounting.cost, wall_time_s=wall_time_s, attempt=request.attempt)
    try:
        return Trajectory(**common, messages=messages, tool_calls=episode.tool_calls if episode else [],
                          termination_reason=reason, error=error, reward=reward, reward_breakdown=breakdown)
    except Exception as exc:  # what the harness sent cannot be recorded: keep the episode, as its failure
        log.warning("trajectory %s cannot be recorded as it is", trajectory_id, exc_info=True)
        return Trajectory(**common, termination_reason=TerminationReason.HARNESS_ERROR,
                          error=f"the episode's record could not be built from what the harness sent: "
                                f"{type(exc).__name__}: {str(exc)[:2000]}")
