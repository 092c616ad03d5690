"""An AgentBench episode (a DBBench database or an OS task container) as the shared episode layer runs it.

AgentBench has no simulated user: the first thing the agent says to the "user" is answered with the task's
instruction, and anything it says after that ends the conversation (upstream ends an episode whose turn holds no
action). The episode ends, on the benchmark's side, when the agent calls an answer tool (``commit_final_answer``;
``answer_action`` / ``finish_action``), and is graded then.
"""

from __future__ import annotations

from typing import Any, Protocol

from ecdysis.records import TerminationReason, TokenUsage


class TaskEpisode(Protocol):
    """What the DBBench and OS episodes both offer (see their modules)."""

    tools: list[dict[str, Any]]
    finished: bool

    def call(self, name: str, arguments: Any) -> tuple[str, bool]: ...

    def grade(self) -> Any: ...

    def close(self) -> None: ...


class AgentBenchEnvironment:
    """One AgentBench episode (an :class:`ecdysis.protocols.EpisodeEnvironment`)."""

    def __init__(self, episode: TaskEpisode, *, policy: str, instruction: str, answer_tools: list[str],
                 benchmark: str) -> None:
        self.episode = episode
        self.policy = policy
        self.instruction = instruction
        self.tools = episode.tools
        self.config: dict[str, Any] = {"benchmark": benchmark, "answer_tools": list(answer_tools)}
        self._told = False

    @property
    def finished(self) -> bool:
        return bool(self.episode.finished)

    def respond(self, text: str, *, deadline: float | None) -> tuple[str, bool]:
        if not self._told:
            self._told = True
            return self.instruction, False
        return "", True

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        return self.episode.call(name, arguments)

    def peek(self, name: str, arguments: Any) -> tuple[str, bool]:
        return f"{name} cannot be peeked: AgentBench has no read-only tools", True

    def grade(self, reason: TerminationReason, messages: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
        grade = self.episode.grade()
        return float(grade.reward), dict(grade.breakdown)

    def usage(self) -> tuple[TokenUsage, int, int, float | None]:
        return TokenUsage(), 0, 0, None

    def close(self) -> None:
        self.episode.close()
