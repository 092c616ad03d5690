"""End to end through litellm to a llama.cpp server on loopback (needs the `local` extra)."""

from __future__ import annotations

import json

import pytest

from ecdysis.llm import Gateway, GatewayConfig, ToolCallParsing
from ecdysis.llm.local_models import fetched
from ecdysis.llm.local_server import LocalModelServer, LocalServerError, llama_cpp_available, resolve_model_path
from ecdysis.records import Role

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_unknown_gguf_path_is_a_clear_error() -> None:
    with pytest.raises(LocalServerError, match="no such GGUF file"):
        resolve_model_path("/nonexistent/model.gguf")


@pytest.mark.slow
def test_tool_call_through_litellm_to_local_server() -> None:
    if not llama_cpp_available():
        print("SKIP reason: llama_cpp is not installed (python -m ecdysis.llm.local_setup)")
        pytest.skip("llama_cpp is not installed: run `python -m ecdysis.llm.local_setup`")
    with LocalModelServer("smollm2", n_ctx=2048, engine="llama-cpp-python") as server:  # the fallback engine
        gateway = Gateway(GatewayConfig(models={server.model: server.model_config()}, max_retries=1))
        reply = gateway.complete(
            server.model, [{"role": "user", "content": "What is the weather in Paris?"}], role=Role.TASK,
            tools=WEATHER, tool_choice={"type": "function", "function": {"name": "get_weather"}},
            temperature=0, max_tokens=64)
    [call] = reply.tool_calls
    assert call["function"]["name"] == "get_weather"
    assert isinstance(json.loads(call["function"]["arguments"]), dict)
    assert reply.tokens.prompt_tokens > 0 and reply.cost_usd == 0.0
    assert gateway.usage().calls == 1


@pytest.mark.slow
def test_qwen_on_its_own_chat_template_gets_tool_calls_through_lenient_parsing() -> None:
    """The opt-in Qwen2.5-Coder 0.5B (``python -m ecdysis.llm.local_setup --no-runtime --model qwen-0.5b``) served
    with the GGUF's own template writes its call as text; the gateway's lenient parsing turns it into a tool call."""
    if not llama_cpp_available():
        pytest.skip("llama_cpp is not installed: run `python -m ecdysis.llm.local_setup`")
    if fetched("qwen-0.5b") is None:
        print("SKIP reason: the opt-in qwen-0.5b GGUF is not downloaded")
        pytest.skip("the opt-in qwen-0.5b GGUF is not in the model cache: run "
                    "`python -m ecdysis.llm.local_setup --no-runtime --model qwen-0.5b`")
    with LocalModelServer("qwen-0.5b", chat_format=None, n_ctx=2048, n_threads=2, nice=10) as server:
        config = server.model_config()
        gateway = Gateway(GatewayConfig(models={server.model: config}, max_retries=1))
        reply = gateway.complete(
            server.model, [{"role": "system", "content": "You are a helpful assistant. Use the tools."},
                           {"role": "user", "content": "What is the weather in Paris?"}], role=Role.TASK,
            tools=WEATHER, temperature=0, max_tokens=96)
    assert config.tool_call_parsing == ToolCallParsing.LENIENT
    [call] = reply.tool_calls
    assert call["function"]["name"] == "get_weather"
    assert "paris" in json.loads(call["function"]["arguments"])["city"].lower()
