"""``training.coder: {type: builtin}``: the in-process tool loop of :mod:`ecdysis.coders.builtin_agent`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ecdysis.coders.base import CoderSection
from ecdysis.coders.builtin_agent import BuiltinCodingAgent
from ecdysis.extensions import register
from ecdysis.protocols import CodingAgent, LLMClient, SandboxBackend


class BuiltinCoderConfig(CoderSection):
    """The built-in coding agent: six tools confined to the bundle copy, driven by ``models.coder``."""

    type: Literal["builtin"] = "builtin"
    """Which coding agent."""
    max_turns: int = Field(default=20, ge=1)
    """Model turns per specification."""
    selftest_timeout_s: float = Field(default=60.0, gt=0)
    """Wall-clock limit of the self-test the agent may run."""
    finish_checks: int = Field(default=0, ge=0)
    """How many times a ``done`` whose bundle fails the candidate checks (static checks, self-test) goes back to the
    model while turns are left. 0 (the default, so that runs recorded before this setting replay as they ran):
    the model's first ``done`` ends the coding."""
    file_tokens: int = Field(default=0, ge=0)
    """Show the bundle's files whole in the task message while they fit in this many tokens (estimated), the rest by
    name. 0 (the default, so that runs recorded before this setting replay as they ran): names only, the model reads
    what it needs with ``read_file``."""

    def build(self, llm: LLMClient, model: str, backend: SandboxBackend | None) -> CodingAgent:
        """The agent this config describes."""
        return BuiltinCodingAgent(llm, model, backend, max_turns=self.max_turns,
                                  selftest_timeout_s=self.selftest_timeout_s, finish_checks=self.finish_checks,
                                  file_tokens=self.file_tokens)


def register_extensions() -> None:
    """Register ``training.coder: {type: builtin}``."""
    register("coder", "builtin", "the in-process tool loop (six tools confined to the bundle copy)",
             config=BuiltinCoderConfig)
