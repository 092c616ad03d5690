"""``training.coder: {type: builtin}``: the in-process tool loop of :mod:`ecdysis.coders.builtin_agent`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ecdysis.coders.base import CoderSection
from ecdysis.protocols import CodingAgent, LLMClient, SandboxBackend


class BuiltinCoderConfig(CoderSection):
    """The built-in coding agent: six tools confined to the bundle copy, driven by ``models.coder``."""

    type: Literal["builtin"] = "builtin"
    """Which coding agent."""
    max_turns: int = Field(default=20, ge=1)
    """Model turns per specification."""
    selftest_timeout_s: float = Field(default=60.0, gt=0)
    """Wall-clock limit of the self-test the agent may run."""

    def build(self, llm: LLMClient, model: str, backend: SandboxBackend | None) -> CodingAgent:
        """The agent this config describes."""
        from ecdysis.coders.builtin_agent import BuiltinCodingAgent

        return BuiltinCodingAgent(llm, model, backend, max_turns=self.max_turns,
                                  selftest_timeout_s=self.selftest_timeout_s)


def register_extensions() -> None:
    """Register ``training.coder: {type: builtin}``."""
    from ecdysis.extensions import register

    register("coder", "builtin", "the in-process tool loop (six tools confined to the bundle copy)",
             config=BuiltinCoderConfig)
