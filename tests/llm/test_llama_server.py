"""llama.cpp's own llama-server behind ``local/`` models: slots decoding at once, the per-slot prompt cache seen by the
gateway, structured output under the schema grammar, and the fallback to llama-cpp-python's server. (Tool calls read
with the model's own template: tests/llm/test_local_model.py's Qwen test, which runs on llama-server when built.)"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from ecdysis.llm import Gateway, GatewayConfig, ToolCallParsing, llama_build
from ecdysis.llm.local_server import (
    LLAMA_CPP_PYTHON,
    LLAMA_SERVER,
    LocalModelServer,
    LocalServerError,
    busy_cores,
    free_threads,
    llama_cpp_available,
    served_slots,
    usable_cores,
)
from ecdysis.records import Role


def _needs_llama_server() -> None:
    if llama_build.cached_binary("llama-server") is None:
        pytest.skip("needs llama.cpp's llama-server: `make setup` builds it (python -m ecdysis.llm.local_setup)")


@pytest.fixture(scope="module")
def server() -> Iterator[LocalModelServer]:
    _needs_llama_server()
    with LocalModelServer("smollm2", chat_format=None, n_ctx=2048, parallel=2) as started:
        yield started


def test_without_the_binary_auto_falls_back_and_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if not llama_cpp_available():
        pytest.skip("needs llama-cpp-python, the fallback engine: `make setup` installs it")
    monkeypatch.setattr(llama_build, "BUILD_DIR", tmp_path / "not-built")

    def no_compiler() -> Path:
        raise llama_build.LlamaBuildError("cmake: not found")

    monkeypatch.setattr(llama_build, "ensure_built", no_compiler)  # built on first use: here it cannot be
    fallback = LocalModelServer("smollm2", chat_format=None)
    assert fallback._choose_engine() is None
    assert fallback.engine_used == LLAMA_CPP_PYTHON and fallback.slots == 1
    assert "llama-server could not be built" in fallback.engine_note
    with pytest.raises(LocalServerError, match="llama-server could not be built: run"):
        LocalModelServer("smollm2", engine=LLAMA_SERVER)._choose_engine()
    with pytest.raises(LocalServerError, match="unknown local engine 'vllm'"):
        LocalModelServer("smollm2", engine="vllm")


@pytest.mark.slow
def test_slots_decode_at_once_and_the_gateway_sees_them(server: LocalModelServer) -> None:
    assert server.engine_used == LLAMA_SERVER and server.slots == 2
    config = server.model_config()
    assert config.max_concurrency == 2 and config.tool_call_parsing == ToolCallParsing.LENIENT
    gateway = Gateway(GatewayConfig(models={server.model: config}, max_retries=1, cache=False))
    started = threading.Barrier(2)
    replies: list[object] = []

    def ask(city: str) -> None:
        started.wait()
        replies.append(gateway.complete(server.model, [{"role": "user", "content": f"Say hello to {city}."}],
                                        role=Role.TASK, temperature=0, max_tokens=24))

    threads = [threading.Thread(target=ask, args=(city,)) for city in ("Paris", "Oslo")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(replies) == 2
    assert served_slots(server.api_base) == 2
    assert served_slots("http://127.0.0.1:9/v1", timeout_s=0.5) is None  # nothing answers there


@pytest.mark.slow
def test_the_next_turn_of_a_conversation_is_served_from_the_slot_cache(server: LocalModelServer) -> None:
    gateway = Gateway(GatewayConfig(models={server.model: server.model_config()}, max_retries=1, cache=False))
    system = {"role": "system", "content": "You are a terse assistant for an airline. " * 20}
    messages: list[dict[str, object]] = [system, {"role": "user", "content": "Name one city in France."}]
    first = gateway.complete(server.model, messages, role=Role.TASK, temperature=0, max_tokens=16)
    messages += [{"role": "assistant", "content": first.content or ""},
                 {"role": "user", "content": "And one in Norway?"}]
    second = gateway.complete(server.model, messages, role=Role.TASK, temperature=0, max_tokens=16)
    assert first.tokens.prompt_tokens > 100
    # The second prompt repeats the first one's tokens: the slot still holds them, and the call record says so.
    assert second.tokens.cached_prompt_tokens >= first.tokens.prompt_tokens * 0.7
    assert second.tokens.cached_prompt_tokens < second.tokens.prompt_tokens


def test_a_llama_cpp_python_chat_format_keeps_the_fallback_engine() -> None:
    if not llama_cpp_available():
        pytest.skip("needs llama-cpp-python, the fallback engine: `make setup` installs it")
    server = LocalModelServer("smollm2", chat_format="chatml-function-calling")
    assert server._choose_engine() is None and server.slots == 1
    assert "chat format 'chatml-function-calling' is llama-cpp-python's own" in server.engine_note


class _City(BaseModel):
    # min_length goes into the grammar: unconstrained, SmolLM2 answered city '' once under stress-ng
    city: str = Field(min_length=1)
    country: str = Field(min_length=1)


@pytest.mark.slow
def test_structured_output_is_decoded_under_the_schema_grammar(server: LocalModelServer) -> None:
    gateway = Gateway(GatewayConfig(models={server.model: server.model_config()}, max_retries=1, cache=False))
    answer = gateway.structured(server.model, [{"role": "user", "content": "Name the capital of France."}], _City,
                                role=Role.DIAGNOSER, max_attempts=1)
    assert isinstance(answer, _City) and answer.city and answer.country


def test_threads_are_the_cores_left_free() -> None:
    assert free_threads(2, busy=1.0) == 1  # one busy neighbour on 2 cores: one decoding thread
    assert free_threads(2, busy=0.3) == 2
    assert free_threads(8, busy=2.6) == 5
    assert free_threads(2, busy=2.0) == 1 and free_threads(4, busy=7.5) == 1  # never none
    busy = busy_cores(0.2)
    assert 0.0 <= busy <= (os.cpu_count() or 1) + 0.01


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs an affinity call and two CPUs")
def test_a_server_pinned_to_one_core_decodes_with_one_thread() -> None:
    """``taskset -c N`` gives the server one core however many the machine has: it must not start a second thread
    that shares the core with the first (each would stall the other at every layer's barrier)."""
    allowed = os.sched_getaffinity(0)
    one = min(allowed)
    try:
        os.sched_setaffinity(0, {one})
        assert usable_cores() == {one}
        assert 0.0 <= busy_cores(0.2, cpus={one}) <= 1.01
        pinned = LocalModelServer("smollm2", chat_format=None)
        pinned._choose_threads()
        assert pinned.n_threads == 1 and "of 1 cores busy at start" in pinned.engine_note
    finally:
        os.sched_setaffinity(0, allowed)


def test_the_server_says_how_many_threads_it_chose() -> None:
    chosen = LocalModelServer("smollm2", chat_format=None)
    chosen._choose_threads()
    assert chosen.n_threads is not None and 1 <= chosen.n_threads <= (os.cpu_count() or 1)
    assert f"{chosen.n_threads} threads (" in chosen.engine_note and "cores busy at start" in chosen.engine_note
    given = LocalModelServer("smollm2", chat_format=None, n_threads=3)
    given._choose_threads()
    assert given.n_threads == 3 and "3 threads (as configured)" in given.engine_note


STARTS_A_SERVER = """
import sys, time
from ecdysis.llm.local_server import LocalModelServer
server = LocalModelServer("smollm2", chat_format=None, n_ctx=512, parallel=1, n_threads=1).start()
print(server._process.pid, flush=True)
time.sleep(600)
"""


def test_a_killed_owner_takes_its_server_with_it() -> None:
    """SIGKILL to the process that started the server (a study killed mid-run) leaves no llama-server behind: the
    kernel sends it SIGTERM when its parent dies, so a rerun does not find a core and the memory still taken."""
    _needs_llama_server()
    import signal
    import subprocess
    import sys

    owner = subprocess.Popen([sys.executable, "-c", STARTS_A_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        server_pid = int(owner.stdout.readline())
        os.kill(server_pid, 0)  # it runs
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        for _ in range(300):
            try:
                os.kill(server_pid, 0)
            except ProcessLookupError:
                break
            with open(f"/proc/{server_pid}/stat") as stat:  # a zombie waiting for init to reap it is gone too
                if stat.read().split(")")[-1].split()[0] == "Z":
                    break
            threading.Event().wait(0.1)
        else:
            os.kill(server_pid, signal.SIGKILL)
            pytest.fail("the server outlived the process that started it")
    finally:
        if owner.poll() is None:
            owner.kill()
