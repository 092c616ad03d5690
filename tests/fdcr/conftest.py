"""FDCR fixtures: the failures of :mod:`fdcr_support`, a harness folder, a local artifact store and the real gateway
(litellm path) in front of the scripted roles of :mod:`ecdysis.testing.fdcr`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from fdcr_support import make_failures

from ecdysis.llm import Gateway, GatewayConfig
from ecdysis.records import FailureRecord
from ecdysis.store import ArtifactStore


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
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(tmp_path / "runs")


@pytest.fixture
def gateway(store: ArtifactStore) -> Iterator[Gateway]:
    """The real gateway with its response cache off, so every ask is a model call the ledger counts."""
    with Gateway(GatewayConfig(cache=False), store=store) as gw:
        yield gw


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    """An empty store in a temp folder, then under a prefix of a fresh bucket on moto_server."""
    if request.param == "local":
        return ArtifactStore(tmp_path / "runs")
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = f"fdcr-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return ArtifactStore(f"s3://{bucket}/runs", endpoint_url=endpoint)
