"""FDCR fixtures: the failures of :mod:`fdcr_support`, a harness folder, a local artifact store and the real gateway
(litellm path, tests/conftest.py) in front of the scripted roles of :mod:`ecdysis.testing.fdcr`, its cache off."""

from __future__ import annotations

from pathlib import Path

import pytest
from fdcr_support import make_failures

from ecdysis.llm import GatewayConfig
from ecdysis.records import FailureRecord


@pytest.fixture
def failures() -> list[FailureRecord]:
    return make_failures()


@pytest.fixture
def harness_dir(tmp_path: Path) -> Path:
    root = tmp_path / "harness"
    root.mkdir()
    (root / "harness.py").write_text("MAX_STEPS = 30\n\ndef run(session):\n    return session.loop()\n")
    (root / "prompts").mkdir()
    (root / "prompts" / "system.md").write_text("You are a careful airline agent. Confirm before cancelling.\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "harness.cpython-311.pyc").write_bytes(b"\x00\x01binary")
    return root


@pytest.fixture
def gateway_config() -> GatewayConfig:
    """The gateway's response cache is off, so every ask is a model call the ledger counts."""
    return GatewayConfig(cache=False)
