"""With ECDYSIS_BLOCK_PROVIDERS=1 (set for every test) only scripted, local and loopback models are callable."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ecdysis.llm import Gateway, GatewayConfig, GatewayError, ProviderBlockedError
from ecdysis.llm.routing import is_loopback
from ecdysis.records import Role
from ecdysis.testing.stub_server import StubServer

ASK = [{"role": "user", "content": "hi"}]


def test_the_suite_runs_with_providers_blocked() -> None:
    import os

    assert os.environ.get("ECDYSIS_BLOCK_PROVIDERS") == "1"


@pytest.mark.parametrize("model", ["openai/gpt-4.1", "anthropic/claude-sonnet-4-5", "hosted_vllm/qwen"])
def test_real_providers_are_refused(gateway: Gateway, model: str) -> None:
    with pytest.raises(ProviderBlockedError, match="ECDYSIS_BLOCK_PROVIDERS=1"):
        gateway.complete(model, ASK, role=Role.TASK)
    assert gateway.usage().calls == 0


def test_remote_api_base_and_aliases_are_refused() -> None:
    remote = Gateway(GatewayConfig.model_validate({"models": {"hosted_vllm/qwen": {"api_base": "http://10.1.2.3/v1"}}}))
    with pytest.raises(ProviderBlockedError, match=r"10\.1\.2\.3"):
        remote.complete("hosted_vllm/qwen", ASK, role=Role.TASK)
    alias = Gateway(GatewayConfig.model_validate({"models": {"scripted/fake": {"model": "openai/gpt-4.1"}}}))
    with pytest.raises(ProviderBlockedError, match=r"gpt-4\.1"):
        alias.complete("scripted/fake", ASK, role=Role.TASK)


def test_loopback_alias_is_allowed() -> None:
    with StubServer() as stub:
        gateway = Gateway(GatewayConfig.model_validate(
            {"models": {"task-model/default": {"model": "hosted_vllm/qwen", "api_base": stub.api_base}}}))
        reply = gateway.complete("task-model/default", ASK, role=Role.TASK)
    assert reply.content == "stub: hi" and reply.model == "task-model/default"


def test_local_models_need_a_server() -> None:
    with pytest.raises(GatewayError, match="no local server"):
        Gateway().complete("local/smollm2", ASK, role=Role.TASK)


def test_loopback_detection() -> None:
    assert is_loopback("http://127.0.0.1:8000/v1") and is_loopback("http://localhost:1/v1")
    assert is_loopback("http://[::1]:8000/v1")
    assert not is_loopback("https://api.openai.com/v1") and not is_loopback(None)


def test_config_rejects_unknown_fields_with_their_path() -> None:
    with pytest.raises(ValidationError, match="max_retry"):
        GatewayConfig.model_validate({"max_retry": 3})
    with pytest.raises(ValidationError, match=r"models\.openai/x\.apibase"):
        GatewayConfig.model_validate({"models": {"openai/x": {"apibase": "http://127.0.0.1"}}})
