"""``training.coder: {type: aider}``: aider, pinned to 0.86.2 in its own venv, sandboxed and offline.

One streaming request with no tools per run; edits come back in the diff (SEARCH/REPLACE) format and aider applies
them to the files named on its command line. ``--model-metadata-file`` and ``LITELLM_LOCAL_MODEL_COST_MAP=True`` keep
litellm from downloading its price list; ``--no-git``, no history files, no analytics, no update check.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Literal

from pydantic import Field

from ecdysis.coders.base import CoderSection
from ecdysis.coders.install import AIDER_VERSION, INSTALL_HINT, agents_dir
from ecdysis.coders.sandboxed import CONTROL, Invocation, SandboxedCLIAgent, python_prefix
from ecdysis.extensions import register
from ecdysis.protocols import CodingAgent, LLMClient, SandboxBackend


class AiderConfig(CoderSection):
    """aider, pinned to 0.86.2, behind the gateway proxy."""

    type: Literal["aider"] = "aider"
    """Which coding agent."""
    venv: str | None = None
    """aider's virtual environment (default: the pinned install, ``aider/`` of ``coders.install.agents_dir()``)."""
    served_name: str = "ecdysis-coder"
    """The model name aider is told (``openai/<served_name>``; the proxy always answers with ``models.coder``)."""
    edit_format: Literal["diff", "whole"] = "diff"
    """How aider asks the model for edits."""
    timeout_s: float = Field(default=900.0, gt=0)
    """Wall-clock limit of one run."""
    memory_mb: int = Field(default=2048, ge=256)
    """Memory limit of the sandbox (where a cgroup can be made)."""
    extra_args: list[str] = Field(default_factory=list)
    """Appended to the aider command line."""

    def python(self) -> Path:
        """aider's interpreter."""
        return Path(self.venv or agents_dir() / "aider") / "bin" / "python"

    def installed(self) -> str | None:
        """None when aider's venv is there, else why not."""
        script = self.python().parent / "aider"
        return None if script.is_file() else f"aider {AIDER_VERSION} is not installed at {script}; {INSTALL_HINT}"

    def invocation(self, *, port: int, token: str, files: list[str]) -> Invocation:
        """The sandboxed command line (see the module doc)."""
        python = self.python()
        model = f"openai/{self.served_name}"
        metadata = {model: {"max_tokens": 8192, "max_input_tokens": 128_000, "max_output_tokens": 8192,
                            "input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": "openai",
                            "mode": "chat"}}
        argv = [str(python.parent / "aider"), "--yes-always", "--no-git", "--model", model,
                "--openai-api-base", f"http://127.0.0.1:{port}/v1", "--openai-api-key", token,
                "--edit-format", self.edit_format, "--model-metadata-file", f"{CONTROL}/meta.json",
                "--no-check-update", "--no-show-model-warnings", "--analytics-disable", "--no-auto-lint",
                "--no-pretty", "--no-fancy-input", "--map-tokens", "0", "--chat-history-file", "/dev/null",
                "--input-history-file", "/dev/null", *[shlex.quote(a) for a in self.extra_args],
                "--message", f'"$(cat {CONTROL}/prompt.md)"', *[shlex.quote(f) for f in files]]
        return Invocation(argv=argv, env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_ANALYTICS": "false"},
                          files={"meta.json": json.dumps(metadata)}, binds=python_prefix(python))

    def build(self, llm: LLMClient, model: str, backend: SandboxBackend | None) -> CodingAgent:
        """The agent this config describes."""
        return SandboxedCLIAgent(llm, model, self)


def register_extensions() -> None:
    """Register ``training.coder: {type: aider}``."""
    register("coder", "aider", "aider 0.86.2 in a no-network bubblewrap sandbox", config=AiderConfig)
