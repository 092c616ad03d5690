"""A call whose caller gave up (its timeout passed) no longer holds the local model server: the next request is served
at once, not after the abandoned one has decoded to its end (a diagnosis once ran 806 s against a 600 s timeout).

The gateway streams its calls to a local server (``ModelConfig.streaming``): llama-cpp-python's server only stops a
streamed request whose client left, and llama-server noticed the closed connection of a plain request only some of the
time (4 of 8 tries decoded the abandoned reply to its end), a streamed one's every time."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from typing import Any

import pytest

from ecdysis.llm import Gateway, GatewayConfig, LLMCallError, ModelConfig, Streaming, llama_build
from ecdysis.llm.local_server import LLAMA_CPP_PYTHON, LLAMA_SERVER, LocalModelServer, llama_cpp_available
from ecdysis.llm.routing import route
from ecdysis.records import Role

LONG = [{"role": "user", "content": "Write a very long story about a lighthouse keeper, chapter by chapter."}]
MAX_TOKENS = 1900
"""Far more than any reply decodes in the caller's 1 s on a CPU, within the 2048-token context."""


def _slots(server: LocalModelServer) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/slots", timeout=30) as response:
        slots: list[dict[str, Any]] = json.load(response)
    return slots


def _give_up(server: LocalModelServer, **params: Any) -> None:
    """Make a call to ``server`` that times out after 1 s."""
    gateway = Gateway(GatewayConfig(models={server.model: server.model_config()}, max_retries=0, cache=False,
                                    timeout_s=1.0))
    with pytest.raises(LLMCallError, match=r"(?i)timeout|timed out"):
        gateway.complete(server.model, LONG, role=Role.DIAGNOSER, max_tokens=MAX_TOKENS, **params)


@pytest.mark.slow
def test_llama_server_frees_the_slot_of_a_request_whose_client_gave_up() -> None:
    if llama_build.cached_binary("llama-server") is None:
        pytest.skip("needs llama.cpp's llama-server: `make setup` builds it (python -m ecdysis.llm.local_setup)")
    with LocalModelServer("smollm2", chat_format=None, n_ctx=2048, parallel=1, engine=LLAMA_SERVER) as server:
        assert server.model_config().streaming == Streaming.ON
        for _ in range(3):  # a plain request's cancellation failed one try in two: one pass proves little
            _give_up(server, extra_body={"ignore_eos": True})
            while (slot := _slots(server)[0])["is_processing"]:  # until it is cancelled, or decoded to its end
                time.sleep(0.2)
            assert slot["params"]["n_predict"] == MAX_TOKENS and slot["params"]["ignore_eos"]
        # Each release logs the tokens its slot held: prompt and decoded reply (under 100 when cut, 1900+ at its end).
        held = [int(n) for n in re.findall(r"stop processing: n_tokens = (\d+)", server.log_tail(100_000))]
        assert len(held) == 3 and max(held) < MAX_TOKENS, f"an abandoned request decoded to its end: {held}"


@pytest.mark.slow
def test_llama_cpp_python_stops_a_streamed_request_whose_client_gave_up() -> None:
    if not llama_cpp_available():
        pytest.skip("needs llama-cpp-python, the fallback engine: `make setup` installs it")
    with LocalModelServer("smollm2", n_ctx=2048, engine=LLAMA_CPP_PYTHON) as server:
        config = server.model_config()
        # llama-cpp-python decodes a plain request to its end whatever the client does; its chatml-function-calling
        # format cannot stream a tool choice, so calls with tools stay plain
        assert config.streaming == Streaming.WITHOUT_TOOLS
        # No EOS: SmolLM2's <|im_end|> (2) and <|endoftext|> (0) are barred, so only the cancellation ends it early.
        _give_up(server, logit_bias={"0": -100, "2": -100})
        # Served only once the abandoned reply stopped decoding: at this machine's speed, its end is far past 600 s.
        patient = Gateway(GatewayConfig(models={server.model: config}, max_retries=0, cache=False, timeout_s=600))
        next_reply = patient.complete(server.model, [{"role": "user", "content": "Say hi."}], role=Role.DIAGNOSER,
                                      max_tokens=8)
        assert next_reply.content and next_reply.tokens.completion_tokens > 0
        assert "Disconnected from client" in server.log_tail(50_000)


def test_which_calls_stream_follows_the_engine_and_its_chat_format() -> None:
    def config(engine: str, chat_format: str | None) -> ModelConfig:
        server = LocalModelServer("smollm2", chat_format=chat_format)
        server.engine_used, server.port = engine, 8080  # as start() leaves them
        return server.model_config()

    assert config(LLAMA_SERVER, None).streaming == Streaming.ON
    assert config(LLAMA_CPP_PYTHON, None).streaming == Streaming.ON
    assert config(LLAMA_CPP_PYTHON, "chatml-function-calling").streaming == Streaming.WITHOUT_TOOLS
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    routes = {mode: route("local/m", GatewayConfig(models={"local/m": ModelConfig(api_base="http://127.0.0.1:9/v1",
                                                                                  streaming=mode)}))
              for mode in Streaming}
    assert [routes[mode].streams(None) for mode in Streaming] == [False, True, True]
    assert [routes[mode].streams(tools) for mode in Streaming] == [False, True, False]
