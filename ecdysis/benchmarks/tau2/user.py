"""The simulated user (trusted side): τ²'s user guidelines and the task's hidden scenario, through the gateway.

The user never leaves the host: the sandbox only sends what the agent says (``user.respond``) and receives the
reply text and whether the user has ended the conversation.

Failures: any exception from the gateway raises :class:`UserSimulatorError`. The episode turns it into
``infrastructure_error`` (not ``llm_error``): the user simulator is part of the benchmark, not of the agent, so its
failures say nothing about the harness, must be retried, and must never become evidence for a modification.

An empty or whitespace reply is not such a failure: the model answered, and what it answered follows from what the
agent said (a harness can provoke one). It raises :class:`EmptyUserReply`, which the episode ends as ``user_stop`` and
grades like any other ending; as infrastructure it would be retried and then excluded, hiding the harness's failure.

Dual control (telecom): the user has tools of its own (its phone). Given ``tools`` and ``act``, the user model is
offered them, as τ²'s user simulator is; each tool call it makes is executed here by ``act`` (on the episode's copy of
the device and DB), its result goes back to the user model, and the model is asked again until it answers in text.
Those calls and results are kept as transcript entries (:meth:`UserSimulator.take_steps`); the sandbox sees only the
final text. A user model that keeps calling tools past :data:`MAX_USER_TOOL_ROUNDS` in one turn raises
:class:`UserToolLoop` (τ² would run into its step limit).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ecdysis.protocols import LLMClient
from ecdysis.records import Role, TokenUsage

STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
"""τ²'s user stop signals: any of them in a reply ends the conversation (``user_stop``)."""

_PROMPT = "{guidelines}\n\n<scenario>\n{scenario}\n</scenario>"


class UserSimulatorError(Exception):
    """The simulated user could not produce a reply."""


class EmptyUserReply(UserSimulatorError):
    """The user model answered with nothing but whitespace: the conversation is over, and it is graded."""


class UserToolLoop(UserSimulatorError):
    """The user model made more than :data:`MAX_USER_TOOL_ROUNDS` rounds of tool calls without replying."""


MAX_USER_TOOL_ROUNDS = 20
"""Most rounds of tool calls the user may make in one turn before it must say something."""


@dataclass(frozen=True)
class UserReply:
    """What the user said, and whether the conversation is over."""

    text: str
    stop: bool


def is_stop(text: str) -> bool:
    """Whether ``text`` carries one of τ²'s stop tokens."""
    return any(token in text for token in STOP_TOKENS)


def system_prompt(task: Any, use_tools: bool = False) -> str:
    """τ²'s user-simulator system prompt for ``task``: the global guidelines (those for a user with tools where it
    has them), then the scenario."""
    from tau2.user.user_simulator import get_global_user_sim_guidelines

    return _PROMPT.format(guidelines=get_global_user_sim_guidelines(use_tools=use_tools),
                          scenario=str(task.user_scenario))


def _arguments(raw: Any) -> Any:
    """A tool call's arguments as the model sent them: JSON text decoded where it decodes, else the text itself."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return raw


@dataclass
class UserSimulator:
    """A stateful LLM user for one episode. ``respond(agent_text)`` returns the user's next reply."""

    llm: LLMClient
    model: str
    task: Any
    context: dict[str, Any] = field(default_factory=dict)
    tokens: TokenUsage = field(default_factory=TokenUsage)
    calls: int = 0
    cache_hits: int = 0
    cost_usd: float | None = None
    stopped: bool = False
    tools: list[dict[str, Any]] | None = None
    """The user's own tool schemas (dual control), or None."""
    act: Callable[[str, Any], tuple[str, bool]] | None = None
    """Executes one of the user's tool calls on the trusted side: ``(content, error)``."""
    _history: list[dict[str, Any]] = field(default_factory=list)
    _steps: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._system = {"role": "system", "content": system_prompt(self.task, use_tools=bool(self.tools))}

    def take_steps(self) -> list[dict[str, Any]]:
        """Transcript entries of the user's own tool calls since the last take (a ``user`` message with
        ``tool_calls``, then one ``tool`` result per call, ``"requestor": "user"``)."""
        steps, self._steps = self._steps, []
        return steps

    def respond(self, agent_text: str, *, deadline: float | None = None) -> UserReply:
        """The user's reply to ``agent_text``. Roles are flipped for the user model (the agent speaks as ``user``).

        ``deadline`` (a ``time.monotonic()`` instant) cuts the model call off when it passes."""
        self._history.append({"role": "user", "content": agent_text})
        completion = self._complete(deadline)
        rounds = 0
        while completion.tool_calls and self.act is not None:
            rounds += 1
            if rounds > MAX_USER_TOOL_ROUNDS:
                raise UserToolLoop(f"user simulator model {self.model!r} made more than {MAX_USER_TOOL_ROUNDS} rounds "
                                   "of tool calls without replying")
            self._run_tools(completion.content, completion.tool_calls)
            completion = self._complete(deadline)
        text = (completion.content or "").strip()
        if not text:
            self.stopped = True
            raise EmptyUserReply(f"user simulator model {self.model!r} returned an empty reply")
        self._history.append({"role": "assistant", "content": text})
        self.stopped = is_stop(text)
        return UserReply(text=text, stop=self.stopped)

    def _complete(self, deadline: float | None) -> Any:
        """One call of the user model on the conversation so far, accounted."""
        try:
            completion = self.llm.complete(self.model, [self._system, *self._history], role=Role.USER,
                                           tools=self.tools, context=self.context, deadline=deadline)
        except Exception as exc:
            crossing = getattr(exc, "completion", None)  # BudgetExceeded: the crossing call was made and paid for
            if crossing is not None:
                self.calls += 1
                self.tokens = self.tokens + crossing.tokens
                if crossing.cost_usd is not None:
                    self.cost_usd = (self.cost_usd or 0.0) + crossing.cost_usd
            message = f"user simulator model {self.model!r} failed: {type(exc).__name__}: {exc}"
            raise UserSimulatorError(message) from exc
        self.calls += 1
        self.tokens = self.tokens + completion.tokens
        self.cache_hits += int(completion.cache_hit)
        if completion.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + completion.cost_usd
        return completion

    def _run_tools(self, content: str | None, tool_calls: list[dict[str, Any]]) -> None:
        """Execute one round of the user's tool calls; their results go to the user model and the transcript."""
        assert self.act is not None
        self._history.append({"role": "assistant", "content": content, "tool_calls": tool_calls})
        calls, results = [], []
        for i, call in enumerate(tool_calls):
            function = call.get("function") or {}
            call_id = str(call.get("id") or f"user-call-{self.calls}-{i}")
            name, arguments = str(function.get("name", "")), _arguments(function.get("arguments"))
            result, error = self.act(name, arguments)
            calls.append({"id": call_id, "name": name, "arguments": arguments})
            results.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": result, "error": error,
                            "requestor": "user"})
            self._history.append({"role": "tool", "tool_call_id": call_id, "content": result})
        self._steps += [{"role": "user", "content": content, "tool_calls": calls}, *results]
