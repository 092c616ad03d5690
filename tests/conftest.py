"""Suite-wide settings, the test tiers, and the fixtures more than one area uses. Fixtures of one area live in that
area's conftest (tests/<area>/conftest.py).

Tiers: every test that needs something heavy carries its marker (registered in pyproject.toml), put there by
:func:`pytest_collection_modifyitems` from the fixtures it uses, or explicitly by its module where no fixture tells.
``make test-fast`` deselects them all; ``make test`` runs everything.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ecdysis.benchmarks.agentbench.manifest import find_data_dir
from ecdysis.llm import Gateway, GatewayConfig
from ecdysis.protocols import SandboxBackend
from ecdysis.store import ArtifactStore

# Tests can never reach a real LLM provider by accident: the gateway refuses every model that is not scripted or on
# loopback while this is set. Live-provider tests opt in with ECDYSIS_LIVE_TESTS=1.
if os.environ.get("ECDYSIS_LIVE_TESTS") != "1":
    os.environ["ECDYSIS_BLOCK_PROVIDERS"] = "1"
    for key in list(os.environ):
        if key.endswith("_API_KEY") or key in ("AWS_BEARER_TOKEN_BEDROCK",):
            os.environ.pop(key)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# AgentBench's data is never part of the project: tests read the copy $ECDYSIS_AGENTBENCH_DATA names (the Makefile
# names the workplace's shared copy where one sits in or beside the checkout), else one in the user's cache
# (~/.cache/ecdysis/agentbench); exported, so that subprocesses and Ray workers read the same. Without it, the tests
# that need it skip, saying so.
_agentbench_data = find_data_dir()
if _agentbench_data is not None:
    os.environ["ECDYSIS_AGENTBENCH_DATA"] = str(_agentbench_data)

FIXTURE_TIERS = {
    "local_ray": "ray",
    "ray_local": "ray",
    "ray_cluster": "ray",
    "_ray_session": "ray",
    "s3_endpoint": "s3",
    "docker_backend": "docker",
    "process_backend": "sandbox",
    "page_url": "browser",
}
"""A test that uses one of these fixtures (directly or through another fixture) needs what its tier names."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        present = {mark.name for mark in item.iter_markers()}
        for tier in sorted({FIXTURE_TIERS[name] for name in used & FIXTURE_TIERS.keys()} - present):
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    """An empty artifact store in a temp folder."""
    return ArtifactStore(tmp_path / "runs")


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URI of an empty store: a temp folder, then a prefix in a fresh bucket on the S3 server."""
    if request.param == "local":
        return str(tmp_path / "runs")
    bucket = request.getfixturevalue("s3_bucket")
    return f"s3://{bucket}/runs"


@pytest.fixture
def any_store(store_uri: str) -> ArtifactStore:
    """An empty store on each backend: a local folder, then S3."""
    return ArtifactStore(store_uri)


@pytest.fixture
def gateway_config() -> GatewayConfig:
    """The configuration of :func:`gateway`; an area's conftest overrides it where its tests need another."""
    return GatewayConfig()


@pytest.fixture
def gateway(store: ArtifactStore, gateway_config: GatewayConfig) -> Iterator[Gateway]:
    """The real gateway (litellm path) in front of the in-package scripted models, its records in :func:`store`."""
    with Gateway(gateway_config, store=store) as gw:
        yield gw


@pytest.fixture(scope="session")
def shared_gateway() -> Iterator[Gateway]:
    """One gateway for the session with no store, no response cache and no retries: every ask reaches its scripted
    model once (the benchmark episode tests)."""
    with Gateway(GatewayConfig(cache=False, max_retries=0)) as gw:
        yield gw


@pytest.fixture(scope="session")
def memory_backend() -> Iterator[SandboxBackend]:
    """The in-memory sandbox double: the harness runs in a thread of this process (trusted test bundles only)."""
    from ecdysis.testing.sandbox import InMemoryBackend

    sandbox_backend = InMemoryBackend()
    yield sandbox_backend
    sandbox_backend.shutdown()


@pytest.fixture(scope="session")
def process_backend() -> Iterator[SandboxBackend]:
    """The process sandbox (real runtime, rlimits, own uid). Generous start timeout: the machine may be shared, and a
    slow start would turn an episode into an infrastructure ending."""
    from ecdysis.sandbox import ProcessSandboxConfig, make_backend

    sandbox_backend = make_backend(ProcessSandboxConfig(warm_pool=0, start_timeout_s=180))
    yield sandbox_backend
    sandbox_backend.shutdown()


@pytest.fixture(params=["memory", pytest.param("process", marks=pytest.mark.sandbox)])
def backend(request: pytest.FixtureRequest) -> SandboxBackend:
    """The sandbox of the training-loop tests: the in-memory double (the fast tier), then the process sandbox."""
    return request.getfixturevalue(f"{request.param}_backend")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """One real S3-compatible HTTP server (moto) on loopback for the whole session, its endpoint and fake
    credentials exported for child processes and Ray workers."""
    from tests.services.s3 import moto_s3_environment

    with moto_s3_environment() as endpoint:
        yield endpoint


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket for one test."""
    from tests.services.s3 import create_bucket

    return create_bucket(s3_endpoint)


@pytest.fixture
def late_http_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HTTP response's headers are read 0.5 s after they arrive, as a loaded machine reads them: by then a
    hijacked Docker stream's first output has come in behind them, in the same read."""
    import http.client
    import time

    begin = http.client.HTTPResponse.begin

    def late_begin(self: http.client.HTTPResponse) -> None:
        time.sleep(0.5)
        begin(self)

    monkeypatch.setattr(http.client.HTTPResponse, "begin", late_begin)

