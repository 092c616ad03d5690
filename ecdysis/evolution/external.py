"""External coding-agent CLIs (OpenCode, aider) as a :class:`ecdysis.protocols.CodingAgent`.

The CLI runs in a Docker container with no network (``--network none``), the bundle copy mounted read-write and
nothing else writable but a tmpfs. Its only way out is a loopback relay (``cli_relay.py``) to a unix socket on which
:class:`GatewayProxy` serves an OpenAI-compatible endpoint backed by our gateway, so the CLI never sees a provider
key and every call is accounted as ``role=CODER``. The image must contain ``python3`` and the CLI, with OpenCode's
``@ai-sdk/openai-compatible`` provider package already installed (there is no network to fetch it).
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.evolution.gateway_proxy import GatewayProxy
from ecdysis.evolution.prompts import render
from ecdysis.protocols import LLMClient
from ecdysis.records import ModificationSpec, Role

RELAY_PORT = 8765
RELAY_SOURCE = Path(__file__).parent / "cli_relay.py"
WORKDIR = "/work/bundle"
CONTROL = "/ecdysis"


class ExternalCLIConfig(BaseModel):
    """How to run one external coding-agent CLI."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["opencode", "aider"]
    """Which CLI."""
    image: str
    """Docker image holding the CLI and python3."""
    model: str
    """Gateway model (any litellm model string, or ``scripted/...``) that answers the CLI's requests."""
    served_name: str = "ecdysis-coder"
    """The model name the CLI is told to use (the proxy ignores it)."""
    timeout_s: float = Field(default=900.0, gt=0)
    """Wall-clock limit for one ``apply``."""
    memory: str = "2g"
    """Container memory limit."""
    user: str = "65532:65532"
    """Unprivileged uid:gid the CLI runs as (the bundle copy is made writable for it)."""
    extra_args: list[str] = Field(default_factory=list)
    """Appended to the CLI command line."""


def opencode_config(served_name: str, port: int = RELAY_PORT) -> dict[str, Any]:
    """The ``opencode.json`` that points OpenCode at the loopback proxy."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "provider": {"ecdysis": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Ecdysis gateway",
            "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "no-key-needed"},
            "models": {served_name: {"name": served_name}},
        }},
        "model": f"ecdysis/{served_name}",
    }


def build_command(config: ExternalCLIConfig, prompt_file: str, port: int = RELAY_PORT) -> list[str]:
    """The CLI's argv inside the container; the prompt is read from ``prompt_file`` by the wrapping shell."""
    prompt = f'"$(cat {shlex.quote(prompt_file)})"'
    if config.type == "opencode":
        argv = ["opencode", "run", "--model", f"ecdysis/{config.served_name}", prompt]
    else:
        argv = ["aider", "--yes-always", "--no-git", "--no-auto-commits", "--no-check-update",
                "--analytics-disable", "--no-show-model-warnings", "--no-stream",
                "--model", f"openai/{config.served_name}",
                "--openai-api-base", f"http://127.0.0.1:{port}/v1", "--openai-api-key", "no-key-needed",
                "--message", prompt]
    return argv + [shlex.quote(arg) for arg in config.extra_args]


def container_script(command: str, port: int = RELAY_PORT) -> str:
    """The shell script run in the container: start the relay, wait for it, run ``command`` in the bundle."""
    relay = f"python3 {CONTROL}/cli_relay.py {port} {CONTROL}/sock/proxy.sock"
    return (f"{relay} > /tmp/relay.log 2>&1 &\n"
            f"for i in $(seq 50); do grep -q ready /tmp/relay.log && break; sleep 0.1; done\n"
            f"cd {WORKDIR} && {command}\n")


@dataclass
class SandboxedRun:
    """How a command in the CLI sandbox ended."""

    exit_code: int | None
    """None when it ran past its time limit and was killed."""
    logs: str
    """The tail of its stdout and stderr."""


def run_behind_proxy(llm: LLMClient, model: str, image: str, command: str, bundle_dir: Path, *,
                     files: dict[str, str] | None = None, context: dict[str, Any] | None = None,
                     timeout_s: float = 900.0, memory: str = "2g", user: str = "65532:65532",
                     environment: dict[str, str] | None = None) -> SandboxedRun:
    """Run ``command`` (shell) in a no-network container whose only way out is the loopback relay to a
    :class:`GatewayProxy` for ``model``. ``bundle_dir`` is mounted read-write at ``/work/bundle`` (the working
    folder); ``files`` are written read-only-by-intent under ``/ecdysis``."""
    import docker  # the Docker SDK is only needed here

    with tempfile.TemporaryDirectory(prefix="ecdysis-cli-") as tmp:
        control = Path(tmp)
        os.chmod(control, 0o755)
        (control / "sock").mkdir()
        os.chmod(control / "sock", 0o777)
        for name, text in {**(files or {}), "cli_relay.py": RELAY_SOURCE.read_text()}.items():
            (control / name).write_text(text, encoding="utf-8")
        proxy = GatewayProxy(llm, model, role=Role.CODER, unix_socket=control / "sock" / "proxy.sock",
                             context=context)
        _open_up(bundle_dir)
        client = docker.from_env()
        try:
            with proxy:
                container = client.containers.run(
                    image, entrypoint=["sh", "-c", container_script(command)], command=[], detach=True,
                    network_mode="none", user=user, working_dir=WORKDIR, environment={"HOME": "/tmp",
                                                                                      **(environment or {})},
                    labels={"ecdysis": "1", "ecdysis.role": "coder"},
                    volumes={str(bundle_dir.resolve()): {"bind": WORKDIR, "mode": "rw"},
                             str(control): {"bind": CONTROL, "mode": "ro"}},
                    tmpfs={"/tmp": "rw,size=512m"}, read_only=True, cap_drop=["ALL"],
                    security_opt=["no-new-privileges"], pids_limit=256, mem_limit=memory)
                exit_code: int | None
                try:
                    exit_code = int(container.wait(timeout=timeout_s).get("StatusCode", -1))
                except Exception:  # past the time limit (or a daemon hiccup): stop it
                    exit_code = None
                    container.kill()
                finally:
                    logs = container.logs().decode(errors="replace")[-20_000:]
                    container.remove(force=True)
        finally:
            client.close()
    return SandboxedRun(exit_code, logs)


class ExternalCLICodingAgent:
    """Runs an external CLI over the bundle copy, sandboxed, behind the gateway proxy."""

    def __init__(self, llm: LLMClient, config: ExternalCLIConfig) -> None:
        self.llm = llm
        self.config = config
        self.last_run: SandboxedRun | None = None
        """How the CLI ended in the last ``apply``."""

    def apply(self, spec: ModificationSpec, bundle_dir: Path, *, run_id: str, round: int) -> Path:
        """Run the CLI on ``bundle_dir``; a CLI failure leaves the copy as it is (validation judges it)."""
        prompt = render("coder_system") + "\n\n" + render(
            "coder_task", round=round, spec_json=spec.model_dump_json(indent=1), files="(see the current folder)")
        files = {"prompt.md": prompt}
        if self.config.type == "opencode":
            files["opencode.json"] = json.dumps(opencode_config(self.config.served_name))
        command = " ".join(build_command(self.config, f"{CONTROL}/prompt.md"))
        self.last_run = run_behind_proxy(
            self.llm, self.config.model, self.config.image, command, bundle_dir, files=files,
            context={"run_id": run_id, "round": round, "spec_id": spec.spec_id}, timeout_s=self.config.timeout_s,
            memory=self.config.memory, user=self.config.user,
            environment={"OPENCODE_CONFIG": f"{CONTROL}/opencode.json"})
        return bundle_dir


def _open_up(bundle_dir: Path) -> None:
    """Let the container's unprivileged user edit the private bundle copy."""
    for path in [bundle_dir, *bundle_dir.rglob("*")]:
        if path.is_symlink():
            continue
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
