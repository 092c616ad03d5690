"""Fixtures of the τ² tests: domains parsed once per session, one process-sandbox backend, one gateway."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from ecdysis.benchmarks.tau2.domain import TauDomain


@pytest.fixture(scope="session")
def airline() -> TauDomain:
    return TauDomain.load("airline")


@pytest.fixture(scope="session")
def retail() -> TauDomain:
    return TauDomain.load("retail")


@pytest.fixture(scope="session")
def backend() -> Iterator[object]:
    from ecdysis.sandbox import ProcessSandboxConfig, make_backend

    sandboxes = make_backend(ProcessSandboxConfig())
    yield sandboxes
    sandboxes.shutdown()


@pytest.fixture(scope="session")
def gateway() -> Iterator[object]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from ecdysis.llm import GatewayConfig
    from ecdysis.llm.gateway import Gateway

    with Gateway(GatewayConfig(cache=False, max_retries=0)) as gw:
        yield gw
