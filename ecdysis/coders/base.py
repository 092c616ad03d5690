"""What every ``training.coder`` section shares: strict fields, a ``type`` naming the agent, and ``build``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ecdysis.protocols import CodingAgent, LLMClient, SandboxBackend


class CoderSection(BaseModel):
    """Base of a coding agent's config; each subclass narrows ``type`` to its registry name."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    type: str
    """Which coding agent."""

    def build(self, llm: LLMClient, model: str, backend: SandboxBackend | None) -> CodingAgent:
        """The agent this config describes, driven by ``model`` through ``llm``."""
        raise NotImplementedError
