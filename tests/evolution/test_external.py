"""External coding-agent CLIs: config, command lines, and a real sandboxed run (the CLIs are not installed here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from ecdysis.evolution.external import (
    ExternalCLICodingAgent,
    ExternalCLIConfig,
    build_command,
    container_script,
    opencode_config,
)
from ecdysis.llm import Gateway
from ecdysis.records import ModificationSpec

ECHO = "scripted/ecdysis.testing.evolution:echo"


def test_config_rejects_bad_fields_by_name() -> None:
    with pytest.raises(ValidationError, match="type"):
        ExternalCLIConfig(type="cursor", image="i", model=ECHO)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="api_key"):
        ExternalCLIConfig(type="aider", image="i", model=ECHO, api_key="sk-...")  # type: ignore[call-arg]


def test_commands_point_the_clis_at_the_loopback_proxy() -> None:
    aider = build_command(ExternalCLIConfig(type="aider", image="i", model=ECHO, extra_args=["--map-tokens", "0"]),
                          "/ecdysis/prompt.md", port=9000)
    assert aider[0] == "aider" and "--no-git" in aider and "--yes-always" in aider
    assert aider[aider.index("--openai-api-base") + 1] == "http://127.0.0.1:9000/v1"
    assert aider[aider.index("--message") + 1] == '"$(cat /ecdysis/prompt.md)"'
    assert aider[-2:] == ["--map-tokens", "0"]
    opencode = build_command(ExternalCLIConfig(type="opencode", image="i", model=ECHO), "/p.md")
    assert opencode[:4] == ["opencode", "run", "--model", "ecdysis/ecdysis-coder"]
    config = opencode_config("ecdysis-coder", port=9000)
    assert config["provider"]["ecdysis"]["options"]["baseURL"] == "http://127.0.0.1:9000/v1"
    assert config["model"] == "ecdysis/ecdysis-coder"
    script = container_script("aider --message hi", port=9000)
    assert "cli_relay.py 9000 /ecdysis/sock/proxy.sock" in script and script.rstrip().endswith("aider --message hi")


@pytest.mark.docker
def test_missing_cli_leaves_the_copy_unchanged_and_does_not_crash(gateway: Gateway, tmp_path: Path) -> None:
    import docker

    try:
        docker.from_env().images.get("ecdysis-sandbox-base:local")
    except Exception:
        pytest.skip("ecdysis-sandbox-base:local is not built")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "harness.py").write_text("def run(session):\n    return None\n")
    agent = ExternalCLICodingAgent(gateway, ExternalCLIConfig(type="aider", image="ecdysis-sandbox-base:local",
                                                              model=ECHO, timeout_s=60))
    assert agent.apply(ModificationSpec(spec_id="s"), copy, run_id="cli", round=0) == copy
    assert agent.last_run is not None and agent.last_run.exit_code == 127  # sh: aider: not found
    assert "aider" in agent.last_run.logs
    assert (copy / "harness.py").read_text() == "def run(session):\n    return None\n"
