"""The simulated user (trusted side): τ²'s user guidelines and the task's hidden scenario, through the gateway.

The user never leaves the host: the sandbox only sends what the agent says (``user.respond``) and receives the
reply text and whether the user has ended the conversation.

Failures: any exception from the gateway raises :class:`UserSimulatorError`. The episode turns it into
``infrastructure_error`` (not ``llm_error``): the user simulator is part of the benchmark, not of the agent, so its
failures say nothing about the harness, must be retried, and must never become evidence for a modification.

An empty or whitespace reply is not such a failure: the model answered, and what it answered follows from what the
agent said (a harness can provoke one). It raises :class:`EmptyUserReply`, which the episode ends as ``user_stop`` and
grades like any other ending; as infrastructure it would be retried and then excluded, hiding the harness's failure.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class UserReply:
    """What the user said, and whether the conversation is over."""

    text: str
    stop: bool


def is_stop(text: str) -> bool:
    """Whether ``text`` carries one of τ²'s stop tokens."""
    return any(token in text for token in STOP_TOKENS)


def system_prompt(task: Any) -> str:
    """τ²'s user-simulator system prompt for ``task``: the global guidelines, then the scenario."""
    from tau2.user.user_simulator import get_global_user_sim_guidelines

    return _PROMPT.format(guidelines=get_global_user_sim_guidelines(use_tools=False), scenario=str(task.user_scenario))


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
    _history: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._system = {"role": "system", "content": system_prompt(self.task)}

    def respond(self, agent_text: str, *, deadline: float | None = None) -> UserReply:
        """The user's reply to ``agent_text``. Roles are flipped for the user model (the agent speaks as ``user``).

        ``deadline`` (a ``time.monotonic()`` instant) cuts the model call off when it passes."""
        self._history.append({"role": "user", "content": agent_text})
        try:
            completion = self.llm.complete(self.model, [self._system, *self._history], role=Role.USER,
                                           context=self.context, deadline=deadline)
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
        text = (completion.content or "").strip()
        if not text:
            self.stopped = True
            raise EmptyUserReply(f"user simulator model {self.model!r} returned an empty reply")
        self._history.append({"role": "assistant", "content": text})
        self.stopped = is_stop(text)
        return UserReply(text=text, stop=self.stopped)
