"""Candidate validation: static checks and the self-test in a real sandbox (process, and Docker)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ecdysis.harness import harness_hash
from ecdysis.protocols import SandboxBackend
from ecdysis.sandbox import DockerSandboxConfig, docker_available, make_backend
from ecdysis.sandbox.validation import check_bundle, validate_bundle


def bundle(tmp_path: Path, source: str, name: str = "b") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "harness.py").write_text(source)
    return folder


def test_seed_harness_passes(seed: Path, backend: SandboxBackend) -> None:
    result = validate_bundle(seed, backend, harness_hash(seed))
    assert result.ok and result.reason == ""


@pytest.mark.parametrize(("source", "reason"), [
    ("def run(session)\n    pass\n", "harness.py does not compile: SyntaxError"),
    ("import module_that_does_not_exist\n\ndef run(session):\n    pass\n", "ModuleNotFoundError"),
    ("def run(session):\n    pass\n\ndef selftest():\n    assert False, 'rule table empty'\n",
     "AssertionError: rule table empty"),
])
def test_broken_candidates_are_rejected_with_a_reason(tmp_path: Path, backend: SandboxBackend, source: str,
                                                      reason: str) -> None:
    folder = bundle(tmp_path, source)
    result = validate_bundle(folder, backend, harness_hash(folder))
    assert not result.ok
    assert reason in result.reason


def test_static_checks(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    missing.mkdir()
    (missing / "rules.py").write_text("R = []\n")
    assert check_bundle(missing).reason == "harness.py is missing"
    assert "not a folder" in check_bundle(tmp_path / "nowhere").reason

    linked = bundle(tmp_path, "def run(session):\n    pass\n", "linked")
    os.symlink("/etc/passwd", linked / "passwd")
    assert check_bundle(linked).reason == "symlink in bundle: passwd"

    big = bundle(tmp_path, "def run(session):\n    pass\n", "big")
    (big / "blob.txt").write_text("x" * 5000)
    assert "over the limit of 1000" in check_bundle(big, max_bytes=1000).reason
    many = bundle(tmp_path, "def run(session):\n    pass\n", "many")
    for i in range(5):
        (many / f"m{i}.py").write_text("")
    assert "6 files, over the limit of 3" in check_bundle(many, max_files=3).reason
    assert check_bundle(bundle(tmp_path, "def run(session):\n    pass\n", "fine")).ok


@pytest.mark.docker
def test_selftest_in_docker(tmp_path: Path, seed: Path) -> None:
    if not docker_available():
        pytest.skip("needs a Docker engine: make sandbox-ready")
    docker_backend = make_backend(DockerSandboxConfig(warm_pool=0, labels={"ecdysis.test": "evolution"}))
    try:
        assert validate_bundle(seed, docker_backend, harness_hash(seed)).ok
        broken = bundle(tmp_path, "def run(session):\n    pass\n\ndef selftest():\n    raise RuntimeError('nope')\n")
        result = validate_bundle(broken, docker_backend, harness_hash(broken))
        assert not result.ok and "RuntimeError: nope" in result.reason
    finally:
        docker_backend.shutdown()
