"""The task image: its build script's idempotent and no-daemon paths, and ensure_image."""

from __future__ import annotations

import os
import subprocess

import docker
import pytest
from os_support import docker_unavailable

from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError
from ecdysis.benchmarks.agentbench.os_interaction.image import BUILD_SCRIPT, IMAGE, ensure_image, image_exists

NO_DAEMON = "unix:///nonexistent/docker.sock"


def _script(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(BUILD_SCRIPT)], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120, check=False)


def test_build_script_warns_and_succeeds_without_a_daemon() -> None:
    done = _script(DOCKER_HOST=NO_DAEMON)
    assert done.returncode == 0
    assert "warning: no Docker daemon answers" in done.stderr


def test_ensure_image_without_a_daemon_is_an_environment_error() -> None:
    with pytest.raises(EnvironmentSetupError, match="no Docker daemon"):
        ensure_image(docker.DockerClient(base_url=NO_DAEMON, version="1.41"))


@pytest.mark.docker
@pytest.mark.skipif(docker_unavailable() is not None, reason=docker_unavailable() or "")
def test_existing_image_is_kept() -> None:
    client = docker.from_env()
    ensure_image(client)  # builds it once on a machine that lacks it
    assert image_exists(client, IMAGE)
    before = client.images.get(IMAGE).id
    done = _script()
    assert done.returncode == 0 and "already exists" in done.stdout
    ensure_image(client)
    assert client.images.get(IMAGE).id == before
    config = client.images.get(IMAGE).attrs["Config"]
    assert config["WorkingDir"] == "/root" and config["Labels"]["ecdysis"] == "1"
