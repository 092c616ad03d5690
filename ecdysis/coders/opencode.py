"""``training.coder: {type: opencode}``: OpenCode (the paper's coding agent), headless, sandboxed, offline.

``opencode run --pure --format json < prompt`` runs in the bundle copy (a message given as arguments reaches the model
quoted, so the prompt goes on stdin) with a config file (``OPENCODE_CONFIG``) whose
only provider is our proxy (``@ai-sdk/openai-compatible`` is built into the binary), with ``edit`` allowed and
``bash``/``webfetch`` denied (a denied tool is not offered to the model at all). ``OPENCODE_DISABLE_MODELS_FETCH``
stops the models.dev download; a fresh HOME per run holds its sqlite state; the config folder is read-only, so its
background plugin install is skipped. A run makes 3 requests: a title (no tools), the agent turn, the turn after the
tool result.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ecdysis.coders.base import CoderSection
from ecdysis.coders.install import INSTALL_HINT, OPENCODE_VERSION, agents_dir
from ecdysis.coders.sandboxed import CONTROL, Invocation, SandboxedCLIAgent
from ecdysis.extensions import register
from ecdysis.protocols import CodingAgent, LLMClient, SandboxBackend


class OpenCodeConfig(CoderSection):
    """OpenCode, pinned to 1.18.33, behind the gateway proxy."""

    type: Literal["opencode"] = "opencode"
    """Which coding agent."""
    binary: str | None = None
    """The ``opencode`` executable (default: the pinned install, under ``coders.install.agents_dir()``)."""
    served_name: str = "ecdysis-coder"
    """The model name OpenCode is told (the proxy always answers with ``models.coder``)."""
    timeout_s: float = Field(default=900.0, gt=0)
    """Wall-clock limit of one run."""
    memory_mb: int = Field(default=2048, ge=256)
    """Memory limit of the sandbox (where a cgroup can be made)."""
    extra_args: list[str] = Field(default_factory=list)
    """Appended to ``opencode run``."""

    def executable(self) -> Path:
        """The binary this config runs."""
        if self.binary:
            return Path(self.binary)
        return agents_dir() / "opencode" / "node_modules" / "opencode-linux-x64" / "bin" / "opencode"

    def installed(self) -> str | None:
        """None when the binary is there, else why not."""
        path = self.executable()
        return None if path.is_file() else f"OpenCode {OPENCODE_VERSION} is not installed at {path}; {INSTALL_HINT}"

    def settings(self, port: int) -> dict[str, Any]:
        """The ``opencode.json`` pointing OpenCode at the relay on ``127.0.0.1:port``."""
        model = f"ecdysis/{self.served_name}"
        return {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "provider": {"ecdysis": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Ecdysis gateway",
                "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "{env:ECDYSIS_PROXY_TOKEN}"},
                "models": {self.served_name: {"name": self.served_name, "tool_call": True}},
            }},
            "model": model,
            "small_model": model,
            "permission": {"edit": "allow", "bash": "deny", "webfetch": "deny", "external_directory": "deny"},
        }

    def invocation(self, *, port: int, token: str, files: list[str]) -> Invocation:
        """The sandboxed command line (see the module doc)."""
        binary = self.executable().resolve()
        # `opencode run` hands a message given as arguments to the model quoted ("…", with \" inside); a message on
        # stdin goes as it is.
        argv = [str(binary), "run", "--pure", "--format", "json", "--model", f"ecdysis/{self.served_name}",
                *[shlex.quote(arg) for arg in self.extra_args]]
        env = {"OPENCODE_CONFIG": f"{CONTROL}/opencode.json", "OPENCODE_DISABLE_MODELS_FETCH": "1",
               "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
               "ECDYSIS_PROXY_TOKEN": token}
        return Invocation(argv=argv, env=env, files={"opencode.json": json.dumps(self.settings(port), indent=1)},
                          binds=[str(binary.parent)], stdin=f"{CONTROL}/prompt.md")

    def build(self, llm: LLMClient, model: str, backend: SandboxBackend | None) -> CodingAgent:
        """The agent this config describes."""
        return SandboxedCLIAgent(llm, model, self)


def register_extensions() -> None:
    """Register ``training.coder: {type: opencode}``."""
    register("coder", "opencode", "OpenCode 1.18.33 in a no-network bubblewrap sandbox", config=OpenCodeConfig)
