"""One sandboxed episode on the trusted side, shared by every benchmark: the pure, single-rollout layer (batching and
retries live above it).

The harness runs inside the sandbox; everything it asks for is served here: ``llm.complete`` by the gateway (role
``task``), ``user.respond``, ``tool.call`` and ``tool.peek`` by the benchmark's :class:`EpisodeEnvironment`. The grade
is the environment's, computed on the trusted side from what the host recorded.

Endings (``Trajectory.termination_reason``):

- the user ended the conversation → ``user_stop``; the benchmark's side ended it (an answer committed) →
  ``agent_stop``; the harness finished → its reason (``agent_stop``, ``max_steps``, ``too_many_errors``,
  ``harness_error``);
- more than ``max_steps`` ``llm.complete`` requests → ``max_steps``; ``max_errors`` failed tool calls →
  ``too_many_errors``; past ``wall_clock_s`` of the harness's own time (the host's waits on the task model and the
  simulated user are left out) or past the hard cap ``max_wall_clock_s`` of wall time → ``timeout``;
- the task model's gateway call failed → ``llm_error`` (``budget_exceeded`` when the run's budget is spent);
- the sandbox could not start → ``sandbox_error``; the environment could not be set up, or failed on its own
  (its simulated user's provider is down) → ``infrastructure_error`` (both retried above);
- a protocol breach → ``protocol_error``; anything the harness sent that the trusted side chokes on, and a grade that
  fails on the harness's actions → ``harness_error``.

A rollout always returns a :class:`Trajectory`.

Transcript messages (``Trajectory.messages``) are plain dicts in the order the host saw them:
``{"role": "assistant", "content": text}`` (the agent to the user), ``{"role": "user", "content": text, "stop": b}``
(the user's reply, preceded where the user acts with tools of its own, :class:`~ecdysis.protocols.UserActing`, by a
``{"role": "user", "content": ..., "tool_calls": [...]}`` and its ``tool`` results with ``"requestor": "user"``),
and for each executed tool call ``{"role": "assistant", "content": None, "tool_calls": [{"id",
"name", "arguments"}]}`` then ``{"role": "tool", "tool_call_id", "name", "content", "error"}``. Blocked calls,
annotations and peeks are in ``Trajectory.tool_calls``.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from ecdysis.errors import InfrastructureFault
from ecdysis.llm.errors import BudgetExceeded, DeadlineExceeded, model_error_in
from ecdysis.protocols import EpisodeEnvironment, EpisodeRequest, LLMClient, SandboxBackend, UserActing
from ecdysis.records import ModelError, Role, TerminationReason, TokenUsage, ToolCall, Trajectory
from ecdysis.sandbox.clock import EpisodeClock
from ecdysis.sandbox.driver import EndEpisode, HandlerError, run_protocol

log = logging.getLogger(__name__)

MAX_USER_TEXT = 32_000
"""Longest message the agent may send the user in one ``user.respond`` (characters)."""
MAX_ARGUMENT_CHARS = 64_000
"""Largest ``tool.call`` arguments (characters of JSON): no benchmark tool needs more."""


def agent_text(text: str) -> dict[str, Any]:
    """A transcript entry for text the agent sent to the user."""
    return {"role": "assistant", "content": text}


def user_text(text: str, stop: bool) -> dict[str, Any]:
    """A transcript entry for the user's reply."""
    return {"role": "user", "content": text, "stop": stop}


def tool_exchange(call_id: str, name: str, arguments: Any, content: str, error: bool) -> list[dict[str, Any]]:
    """The two transcript entries of one executed tool call (``arguments`` exactly as the harness sent them)."""
    return [
        {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]},
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": content, "error": error},
    ]


def agent_texts(messages: list[dict[str, Any]]) -> list[str]:
    """Every text the agent sent to the user."""
    return [m["content"] for m in messages if m.get("role") == "assistant" and m.get("content")]


def transcript_calls(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every executed tool call of a transcript (``{"id", "name", "arguments"}``), in order."""
    for message in messages:
        if message.get("role") == "assistant":
            yield from message.get("tool_calls") or []


class _Usage:
    def __init__(self) -> None:
        self.tokens = TokenUsage()
        self.calls = 0
        self.cache_hits = 0
        self.cost: float | None = None

    def add(self, tokens: TokenUsage, cache_hits: int, cost: float | None, calls: int = 1) -> None:
        self.tokens = self.tokens + tokens
        self.calls += calls
        self.cache_hits += cache_hits
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost


class _Episode:
    """Handlers and state of one running episode."""

    def __init__(self, request: EpisodeRequest, llm: LLMClient, env: EpisodeEnvironment,
                 context: dict[str, Any]) -> None:
        self.request = request
        self.llm = llm
        self.env = env
        self.context = context
        self.messages: list[dict[str, Any]] = []
        self.tool_calls: list[ToolCall] = []
        self.usage = _Usage()
        self.steps = 0
        self.errors = 0
        self.user_stopped = False
        self.model_error: ModelError | None = None
        """The failed model call (task model or simulated user) that ended the episode, as the provider said."""
        self.clock = EpisodeClock(request.wall_clock_s, request.hard_cap_s())
        """The episode's clock (restarted when the protocol starts); model calls are cut off at its hard cap."""

    def handlers(self) -> dict[str, Any]:
        return {"llm.complete": self.complete, "user.respond": self.respond, "tool.call": self.call,
                "tool.peek": self.peek}

    def _check_open(self) -> None:
        if self.user_stopped:
            raise EndEpisode(TerminationReason.USER_STOP, "the user had already ended the conversation")
        if self.env.finished:
            raise EndEpisode(TerminationReason.AGENT_STOP, "the episode was already over")

    def complete(self, params: dict[str, Any]) -> dict[str, Any]:
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
            with self.clock.waiting_on_model():
                completion = self.llm.complete(self.request.model, messages, role=Role.TASK, tools=tools,
                                               context=self.context, deadline=self.clock.hard_deadline)
        except BudgetExceeded as exc:
            if exc.completion is not None:  # the call that crossed the budget was made and paid for
                done = exc.completion
                self.usage.add(done.tokens, int(done.cache_hit), done.cost_usd)
            raise EndEpisode(TerminationReason.BUDGET_EXCEEDED, str(exc)) from exc
        except DeadlineExceeded as exc:
            raise EndEpisode(TerminationReason.TIMEOUT, f"{self.clock.hard_cap_note()} during a task-model call: "
                                                        f"{exc}") from exc
        except Exception as exc:
            self.model_error = model_error_in(exc)
            raise EndEpisode(TerminationReason.LLM_ERROR, f"{type(exc).__name__}: {exc}") from exc
        self.usage.add(completion.tokens, int(completion.cache_hit), completion.cost_usd)
        return completion.as_message()

    def respond(self, params: dict[str, Any]) -> dict[str, Any]:
        self._check_open()
        text = params.get("text")
        if not isinstance(text, str):
            raise HandlerError("bad_request", "user.respond needs 'text': a string")
        if len(text) > MAX_USER_TEXT:
            raise HandlerError("bad_request", f"user.respond 'text' is longer than {MAX_USER_TEXT} characters")
        self.messages.append(agent_text(text))
        try:
            with self.clock.waiting_on_model():  # the simulated user's model, served on the trusted side
                reply, stop = self.env.respond(text, deadline=self.clock.hard_deadline)
        except Exception as exc:
            self.model_error = model_error_in(exc)
            raise
        finally:  # the user's own tool calls (dual control) changed the state even when its turn then failed
            if isinstance(self.env, UserActing):
                self.messages.extend(self.env.take_user_steps())
        self.messages.append(user_text(reply, stop))
        self.user_stopped = stop
        return {"text": reply, "stop": stop}

    def call(self, params: dict[str, Any]) -> dict[str, Any]:
        self._check_open()
        name, arguments = params.get("name"), params.get("arguments")
        call_id = str(params.get("call_id") or f"call-{len(self.tool_calls)}")
        if not isinstance(name, str):
            raise HandlerError("bad_request", "tool.call needs 'name': a string")
        if len(json.dumps(arguments)) > MAX_ARGUMENT_CHARS:
            raise HandlerError("bad_request", f"tool.call 'arguments' exceed {MAX_ARGUMENT_CHARS} characters of JSON")
        sent = params.get("arguments", {})
        arguments = arguments if arguments is not None else {}  # no arguments at all: a call without any
        content, error = self.env.call(name, arguments)
        self.messages.extend(tool_exchange(call_id, name, arguments, content, error))
        self.tool_calls.append(ToolCall(call_id=call_id, name=name, **ToolCall.split_arguments(sent),
                                        executed=True, result=content, error=error, step=self.steps))
        if error:
            self.errors += 1
            if self.errors >= self.request.max_errors:
                raise EndEpisode(TerminationReason.TOO_MANY_ERRORS, f"{self.errors} failed tool calls")
        if self.env.finished:
            raise EndEpisode(TerminationReason.AGENT_STOP, f"{name} ended the episode")
        return {"content": content, "error": error}

    def peek(self, params: dict[str, Any]) -> dict[str, Any]:
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
                blocked = ToolCall(call_id=str(params.get("call_id", "")), name=str(params.get("name", "")),
                                   **ToolCall.split_arguments(params.get("arguments", {})), executed=False,
                                   blocked_reason=str(params.get("reason", ""))[:4000], step=self.steps)
                self.tool_calls.append(blocked)
                by_id.setdefault(blocked.call_id, blocked)
            elif event.get("kind") == "annotation":
                target = by_id.get(str(params.get("call_id", "")))
                if target is not None:
                    text = str(params.get("text", ""))[:4000]
                    target.annotation = text if target.annotation is None else target.annotation + "\n" + text


def call_context(request: EpisodeRequest) -> dict[str, Any]:
    """The ids every model call of ``request``'s episode is accounted under (and its trial seeded by)."""
    return {
        "run_id": request.run_id, "round": request.round, "phase": request.phase,
        "benchmark": request.task.benchmark, "domain": request.task.domain, "task_id": request.task.task_id,
        "trial": request.trial, "seed": request.seed, "trajectory_id": request.trajectory_id(),
        "harness_hash": request.harness_hash,
    }


def run_episode(request: EpisodeRequest, *, backend: SandboxBackend, llm: LLMClient,
                environment: Callable[[dict[str, Any]], EpisodeEnvironment]) -> Trajectory:
    """Run one rollout in a sandbox against the environment ``environment(context)`` builds (``context``: the ids
    every model call of the episode is accounted under), and grade it there. Always returns a trajectory (see the
    module doc)."""
    started = time.monotonic()
    trajectory_id = request.trajectory_id()
    context = call_context(request)
    episode: _Episode | None = None
    reason = TerminationReason.INFRASTRUCTURE_ERROR
    error: str | None = None
    reward, breakdown = 0.0, dict[str, float]()
    setup_error: ModelError | None = None
    try:
        env = environment(dict(context))
    except Exception as exc:  # the benchmark's side could not be prepared: infrastructure, retried above
        log.warning("episode %s: its environment could not be set up", trajectory_id, exc_info=True)
        env, error = None, f"the environment could not be set up: {type(exc).__name__}: {exc}"
        setup_error = model_error_in(exc)
    if env is not None:
        try:
            episode = _Episode(request, llm, env, context)
            start = {"mode": "episode", "session": {
                "episode_id": trajectory_id, "policy": env.policy, "tools": env.tools,
                "max_steps": request.max_steps, "config": env.config}}
            try:
                sandbox = backend.acquire(request.harness_dir, request.harness_hash)
            except Exception as exc:  # no sandbox: an infrastructure fault of this attempt, retried above
                reason = TerminationReason.SANDBOX_ERROR
                error = f"sandbox could not start: {type(exc).__name__}: {exc}"
            else:
                episode.clock = EpisodeClock(request.wall_clock_s, request.hard_cap_s())
                outcome = run_protocol(sandbox, start, episode.handlers(), wall_clock_s=request.wall_clock_s,
                                       clock=episode.clock,
                                       max_requests=request.max_steps * 20 + 100)
                episode.apply_events(outcome.events)
                reason = TerminationReason.USER_STOP if episode.user_stopped else outcome.finish_reason
                if not reason.is_normal_stop or outcome.finish_reason is not TerminationReason.AGENT_STOP:
                    error = outcome.note or None
                if reason is TerminationReason.SANDBOX_ERROR and outcome.stderr_tail:
                    error = f"{error or ''}\n{outcome.stderr_tail}".strip()
            if reason.is_normal_stop:
                try:
                    reward, breakdown = env.grade(reason, episode.messages)
                except InfrastructureFault as exc:  # the grader lost the environment, not the harness's doing
                    log.warning("grading %s lost its environment", trajectory_id, exc_info=True)
                    reason = TerminationReason.INFRASTRUCTURE_ERROR
                    error = f"grading failed: {type(exc).__name__}: {exc}"
                except Exception as exc:  # the grade runs on the harness's own actions: what they raise is theirs
                    log.warning("grading %s failed on the harness's actions", trajectory_id, exc_info=True)
                    reason, error = TerminationReason.HARNESS_ERROR, f"grading failed: {type(exc).__name__}: {exc}"
        except Exception as exc:  # a fault on the trusted side: record it, never lose the rollout
            log.exception("episode %s failed on the trusted side", trajectory_id)
            reason = TerminationReason.INFRASTRUCTURE_ERROR
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        finally:
            try:
                env.close()
            except Exception:
                log.warning("episode %s: closing its environment failed", trajectory_id, exc_info=True)
    usage = episode.usage if episode is not None else _Usage()
    if env is not None:
        tokens, calls, cache_hits, cost = env.usage()
        usage.add(tokens, cache_hits, cost, calls=calls)
    trajectory = _trajectory(request, trajectory_id, episode, usage, reason, error, reward, breakdown,
                             time.monotonic() - started)
    failed_call = episode.model_error if episode is not None else setup_error
    return trajectory.model_copy(update={"sandbox": backend.isolation, "model_error": failed_call})


def _trajectory(request: EpisodeRequest, trajectory_id: str, episode: _Episode | None, usage: _Usage,
                reason: TerminationReason, error: str | None, reward: float, breakdown: dict[str, float],
                wall_time_s: float) -> Trajectory:
    common: dict[str, Any] = dict(
        trajectory_id=trajectory_id, run_id=request.run_id, round=request.round, phase=request.phase,
        task=request.task, model=request.model, trial=request.trial, seed=request.seed,
        harness_hash=request.harness_hash, tokens=usage.tokens, llm_calls=usage.calls, cache_hits=usage.cache_hits,
        cost_usd=usage.cost, wall_time_s=wall_time_s, attempt=request.attempt)
    try:
        return Trajectory(**common, messages=episode.messages if episode else [],
                          tool_calls=episode.tool_calls if episode else [], termination_reason=reason, error=error,
                          reward=reward, reward_breakdown=breakdown)
    except Exception as exc:  # what the harness sent cannot be recorded: keep the episode, as its failure
        log.warning("trajectory %s cannot be recorded as it is", trajectory_id, exc_info=True)
        return Trajectory(**common, termination_reason=TerminationReason.HARNESS_ERROR,
                          error=f"the episode's record could not be built from what the harness sent: "
                                f"{type(exc).__name__}: {str(exc)[:2000]}")
