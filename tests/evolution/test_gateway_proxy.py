"""The loopback OpenAI-compatible proxy in front of the real gateway, over TCP, a unix socket, the relay, and a
no-network Docker container (the external coding agents' only way out)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ecdysis.coders.gateway_proxy import GatewayProxy
from ecdysis.llm import Gateway
from tests.services.s3 import free_port

ECHO = "scripted/ecdysis.testing.evolution:echo"
CODER = "scripted/ecdysis.benchmarks.refund_desk.scripted:coder"


def _post(url: str, body: Any) -> tuple[int, bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_chat_completion_goes_through_the_gateway_as_coder(gateway: Gateway) -> None:
    with GatewayProxy(gateway, ECHO, context={"run_id": "proxy-run"}) as proxy:
        status, raw = _post(f"{proxy.base_url}/chat/completions",
                            {"model": "whatever-the-cli-says", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200
    body = json.loads(raw)
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "echo: hi"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] > 0
    usage = gateway.usage("proxy-run")
    assert usage.calls == 1 and usage.completion_tokens == body["usage"]["completion_tokens"]


def test_tool_calls_and_streaming(gateway: Gateway) -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    with GatewayProxy(gateway, CODER) as proxy:
        status, raw = _post(f"{proxy.base_url}/chat/completions",
                            {"model": "m", "stream": True, "tools": tools,
                             "messages": [{"role": "user", "content": "SPEC_JSON_BEGIN {} SPEC_JSON_END"}]})
    assert status == 200
    events = [line[len("data: "):] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:  # reassembled as an OpenAI streaming client does
        for part in (chunk["choices"][0]["delta"].get("tool_calls") or []) if chunk["choices"] else []:
            call = calls.setdefault(part["index"], {"id": "", "name": "", "arguments": ""})
            call["id"] = part.get("id") or call["id"]
            call["name"] += part.get("function", {}).get("name", "")
            call["arguments"] += part.get("function", {}).get("arguments", "")
    assert list(calls) == [0] and calls[0]["name"] == "read_file" and calls[0]["id"]
    assert json.loads(calls[0]["arguments"]) == {"path": "harness.py"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls" and chunks[-1]["usage"]["total_tokens"] > 0


def test_streaming_with_include_usage_ends_with_a_usage_chunk(gateway: Gateway) -> None:
    with GatewayProxy(gateway, ECHO) as proxy:
        status, raw = _post(f"{proxy.base_url}/chat/completions",
                            {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                             "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200
        assert proxy.log == [{"stream": True, "roles": ["user"], "tools": [], "tool_calls": []}]
    events = [line[len("data: "):] for line in raw.decode().splitlines() if line.startswith("data: ")]
    chunks = [json.loads(event) for event in events[:-1]]
    assert events[-1] == "[DONE]"
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "echo: hi"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_bad_requests_get_clear_errors(gateway: Gateway) -> None:
    with GatewayProxy(gateway, ECHO) as proxy:
        status, raw = _post(f"{proxy.base_url}/chat/completions", b"{not json")
        assert status == 400 and "invalid JSON" in json.loads(raw)["error"]["message"]
        status, raw = _post(f"{proxy.base_url}/chat/completions", {"messages": []})
        assert status == 400 and "messages" in json.loads(raw)["error"]["message"]
        status, _ = _post(f"{proxy.base_url}/embeddings", {"input": "x"})
        assert status == 404
        with urllib.request.urlopen(f"{proxy.base_url}/models", timeout=10) as response:
            assert json.loads(response.read())["data"][0]["id"] == ECHO
    with pytest.raises(ValueError, match="loopback"):
        GatewayProxy(gateway, ECHO, host="0.0.0.0")


def test_a_model_the_run_cannot_use_is_kept_for_the_caller_to_raise() -> None:
    """The CLI behind the proxy only sees an upstream error; the proxy keeps the provider's refusal so the coding
    run raises it, and the training run stops instead of rejecting one candidate after another."""
    from ecdysis.llm import GatewayConfig, ModelAccessError, ModelConfig
    from ecdysis.testing.stub_server import StubServer

    with StubServer(then=401) as stub:
        gateway = Gateway(GatewayConfig(models={"openai/coder": ModelConfig(api_base=stub.api_base)}))
        with GatewayProxy(gateway, "openai/coder") as proxy:
            status, raw = _post(f"{proxy.base_url}/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
    assert status == 502 and "AuthenticationError" in json.loads(raw)["error"]["message"]
    assert isinstance(proxy.refused, ModelAccessError) and proxy.refused.error is not None
    assert proxy.refused.error.role == "coder"


def test_relay_reaches_the_proxy_on_a_unix_socket(gateway: Gateway, tmp_path: Path) -> None:
    socket_path = tmp_path / "proxy.sock"
    port = free_port()
    relay_source = Path(__file__).parents[2] / "ecdysis" / "coders" / "cli_relay.py"
    with GatewayProxy(gateway, ECHO, unix_socket=socket_path):
        relay = subprocess.Popen([sys.executable, str(relay_source), str(port), str(socket_path)],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert relay.stdout is not None and "ready" in relay.stdout.readline()
            status, raw = _post(f"http://127.0.0.1:{port}/v1/chat/completions",
                                {"model": "m", "messages": [{"role": "user", "content": "via relay"}]})
        finally:
            relay.kill()
            relay.wait()
    assert status == 200
    assert json.loads(raw)["choices"][0]["message"]["content"] == "echo: via relay"
    assert not socket_path.exists()  # the proxy removes its socket when it stops

