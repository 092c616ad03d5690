"""The set-up scripts on a host whose `docker` is only a client: a fake client on a temporary PATH that reaches no
daemon, no dockerd, and an apt-get that is missing or fails. Each script must exit 0 with one clear warning, and the
auto sandbox must then pick the process backend."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ecdysis.sandbox import AutoSandboxConfig, make_backend
from ecdysis.sandbox.process import ProcessBackend

REPO = Path(__file__).resolve().parents[2]
# What the scripts call besides docker, dockerd and apt-get; linked from the host so those three stay under control.
TOOLS = ("bash", "env", "id", "sleep", "pgrep", "timeout", "tail", "cat", "dirname", "mktemp", "rm", "setsid", "true",
         "tr", "dpkg-query")
NO_DAEMON = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"


def fake_bin(tmp_path: Path, *, apt_get: str | None) -> Path:
    """A PATH folder with a docker client that reaches no daemon, no dockerd, and ``apt_get`` as apt-get's body."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    scripts = {"docker": f"#!/bin/sh\necho '{NO_DAEMON}' >&2\nexit 1\n"}
    if apt_get is not None:
        scripts["apt-get"] = f"#!/bin/sh\n{apt_get}\n"
    for name, body in scripts.items():
        (folder / name).write_text(body)
        (folder / name).chmod(0o755)
    assert not (folder / "dockerd").exists()
    return folder


def run_script(name: str, path: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(path), "HOME": str(tmp_path), "ECDYSIS_DOCKER_WAIT_S": "2",
           "ECDYSIS_DOCKERD_LOG": str(tmp_path / "dockerd.log"), "ECDYSIS_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([shutil.which("bash") or "/bin/bash", str(REPO / "sandbox" / name)], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("apt_get", [None, "echo 'E: Unable to locate package docker.io' >&2; exit 100"],
                         ids=["no-apt-get", "apt-get-fails"])
def test_ensure_docker_falls_back_to_the_process_sandbox(tmp_path: Path, apt_get: str | None) -> None:
    done = run_script("ensure-docker.sh", fake_bin(tmp_path, apt_get=apt_get), tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, done.stderr
    assert "process sandbox" in warnings[0]
    assert ("apt-get is unavailable" if apt_get is None else "could not install docker.io") in warnings[0]
    assert done.stdout.strip().splitlines()[-1] == "ensure-docker: sandbox: process"
    assert "the Docker daemon answers" not in done.stdout


def test_ensure_docker_installs_the_engine_when_only_a_client_is_present(tmp_path: Path) -> None:
    """A `docker` client on PATH is no reason to skip the install: apt-get is asked for docker.io."""
    if os.geteuid() != 0:
        pytest.skip("needs root or password-less sudo: the script runs apt-get")
    calls = tmp_path / "apt-calls"
    done = run_script("ensure-docker.sh", fake_bin(tmp_path, apt_get=f'echo "$@" >> {calls}; exit 0'), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "installing docker.io" in done.stdout
    assert "install -y -qq --no-install-recommends docker.io" in calls.read_text()
    # The fake apt-get installed nothing, so the script still falls back, and says why.
    assert "dockerd is not on PATH" in done.stderr
    assert done.stdout.strip().splitlines()[-1] == "ensure-docker: sandbox: process"


def test_base_image_step_is_skipped_with_one_warning(tmp_path: Path) -> None:
    done = run_script("build-base-image.sh", fake_bin(tmp_path, apt_get=None), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("warning") == 1 and "no Docker daemon answers" in done.stderr, done.stderr
    assert not (tmp_path / "cache").exists(), "nothing is debootstrapped for an image that cannot be built"


@pytest.mark.sandbox
def test_auto_sandbox_picks_the_process_backend_without_a_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    backend = make_backend(AutoSandboxConfig.model_validate({"process": {"warm_pool": 0}}))
    try:
        assert isinstance(backend, ProcessBackend)
        assert "no Docker daemon answers" in capsys.readouterr().out
    finally:
        backend.shutdown()
