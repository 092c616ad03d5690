"""LLM gateway fixtures: a real artifact store in a temp folder, a real local Ray, loopback stub servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from ecdysis.llm import GatewayConfig, ModelConfig
from ecdysis.testing.stub_server import StubServer

FAST_RETRIES = {"backoff_base_s": 0.001, "backoff_max_s": 0.01}


@pytest.fixture
def gateway_config() -> GatewayConfig:
    """The gateway of these tests retries with near-zero backoff."""
    return GatewayConfig.model_validate(FAST_RETRIES)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


def _stub_config(stub: StubServer, *models: str, **fields: object) -> GatewayConfig:
    merged: dict[str, object] = {**FAST_RETRIES, **fields}
    return GatewayConfig.model_validate({"models": {m: ModelConfig(api_base=stub.api_base) for m in models},
                                         **merged})


@pytest.fixture
def stub_config() -> Callable[..., GatewayConfig]:
    """``stub_config(stub, *models, **fields)``: a config routing ``models`` to ``stub``, with fast backoff."""
    return _stub_config


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    ray = pytest.importorskip("ray", reason="needs ray: make setup")
    if ray.is_initialized():  # another area's fixture owns it
        yield
        return
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
