"""Retries with backoff against a loopback OpenAI-compatible stub that fails deterministically."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from ecdysis.llm import GatewayConfig, LLMCallError
from ecdysis.llm.gateway import Gateway
from ecdysis.llm.retry import backoff_delay, is_retryable
from ecdysis.records import Role
from ecdysis.store import ArtifactStore
from ecdysis.testing.stub_server import StubServer

MODEL = "openai/stub-model"


def test_thirty_percent_failures_all_calls_succeed_and_retries_are_counted(
        store: ArtifactStore, stub_config: Callable[..., GatewayConfig]) -> None:
    with StubServer(failure_rate=0.3, seed=11) as stub:
        gateway = Gateway(stub_config(stub, MODEL, max_retries=8, cache=False), store=store,
                          context={"run_id": "run-faults"})
        replies = [gateway.complete(MODEL, [{"role": "user", "content": f"q{i}"}], role=Role.TASK)
                   for i in range(30)]
    assert [r.content for r in replies] == [f"stub: q{i}" for i in range(30)]
    assert stub.failures > 0 and set(stub.status_counts) == {200, 429, 500}
    usage = gateway.usage()
    assert usage.retries == stub.failures
    assert stub.requests == 30 + stub.failures  # the client made no retries of its own
    gateway.flush()
    rows = store.read("llm_calls", run_id="run-faults")
    assert len(rows) == 30 and sum(r.retries for r in rows) == stub.failures
    assert all(r.error is None for r in rows)


def test_faults_under_concurrency(stub_config: Callable[..., GatewayConfig]) -> None:
    with StubServer(failure_rate=0.3, seed=5) as stub:
        gateway = Gateway(stub_config(stub, MODEL, max_retries=10, cache=False, max_concurrency=3))
        with ThreadPoolExecutor(max_workers=6) as pool:
            replies = list(pool.map(
                lambda i: gateway.complete(MODEL, [{"role": "user", "content": f"p{i}"}], role=Role.TASK),
                range(24)))
    assert sorted(r.content or "" for r in replies) == sorted(f"stub: p{i}" for i in range(24))
    assert gateway.usage().retries == stub.failures


def test_per_model_concurrency_limit(stub_config: Callable[..., GatewayConfig]) -> None:
    with StubServer(latency_s=0.1) as stub:
        config = stub_config(stub, MODEL, cache=False)
        config.models[MODEL].max_concurrency = 2
        gateway = Gateway(config)
        with ThreadPoolExecutor(max_workers=6) as pool:
            list(pool.map(lambda i: gateway.complete(MODEL, [{"role": "user", "content": f"c{i}"}], role=Role.TASK),
                          range(12)))
    assert stub.requests == 12
    assert 1 <= stub.max_in_flight <= 2


def test_exhausted_retries_raise_and_are_recorded(store: ArtifactStore,
                                                  stub_config: Callable[..., GatewayConfig]) -> None:
    with StubServer(failure_rate=1.0, fail_statuses=(503,)) as stub:
        gateway = Gateway(stub_config(stub, MODEL, max_retries=2), store=store, context={"run_id": "run-down"})
        with pytest.raises(LLMCallError, match="after 2 retries") as info:
            gateway.complete(MODEL, [{"role": "user", "content": "hi"}], role=Role.TASK)
    assert info.value.retries == 2 and info.value.retryable
    assert stub.requests == 3
    gateway.flush()
    [row] = store.read("llm_calls", run_id="run-down")
    assert row.retries == 2 and row.error is not None and "503" in row.error


def test_client_errors_are_not_retried(stub_config: Callable[..., GatewayConfig]) -> None:
    with StubServer(failure_rate=1.0, fail_statuses=(400,)) as stub:
        gateway = Gateway(stub_config(stub, MODEL, max_retries=5))
        with pytest.raises(LLMCallError) as info:
            gateway.complete(MODEL, [{"role": "user", "content": "hi"}], role=Role.TASK)
    assert info.value.retries == 0 and not info.value.retryable
    assert stub.requests == 1


def test_timeouts_are_retried(stub_config: Callable[..., GatewayConfig]) -> None:
    with StubServer(latency_s=3.0) as stub:  # far beyond the 0.2 s request timeout
        gateway = Gateway(stub_config(stub, MODEL, max_retries=1, timeout_s=0.2))
        with pytest.raises(LLMCallError, match="Timeout") as info:
            gateway.complete(MODEL, [{"role": "user", "content": "hi"}], role=Role.TASK)
    assert info.value.retries == 1 and info.value.retryable
    assert stub.requests == 2


def test_connection_errors_are_retried() -> None:
    with StubServer() as stub:
        api_base = stub.api_base
    # the server is gone: every attempt is refused
    gateway = Gateway(GatewayConfig.model_validate({"models": {MODEL: {"api_base": api_base}}, "max_retries": 2,
                                                    "backoff_base_s": 0.001, "backoff_max_s": 0.002}))
    with pytest.raises(LLMCallError) as info:
        gateway.complete(MODEL, [{"role": "user", "content": "hi"}], role=Role.TASK)
    assert info.value.retries == 2 and info.value.retryable


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    import random

    rng = random.Random(0)
    delays = [backoff_delay(n, 1.0, 8.0, rng) for n in range(6)]
    for n, delay in enumerate(delays):
        ceiling = min(8.0, 2.0**n)
        assert ceiling / 2 <= delay <= ceiling
    assert not is_retryable(ValueError("bad input"))


def test_the_stub_accepts_a_burst_of_new_connections() -> None:
    """A runner that opens many connections at once (τ²'s, in the benchmark) must not see resets."""
    import http.client
    import json
    import threading

    statuses: list[object] = []
    with StubServer(latency_s=0.5) as stub:
        def one() -> None:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=30)
                body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
                connection.request("POST", "/v1/chat/completions", body=body,
                                   headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                statuses.append(response.status)
            except OSError as exc:
                statuses.append(exc)

        threads = [threading.Thread(target=one) for _ in range(150)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert statuses == [200] * 150


def test_a_connection_that_ends_without_a_reply_is_logged_with_its_cause() -> None:
    """A client sees only "Connection error" when the stub drops a connection; the stub keeps the traceback."""
    import io
    import json
    import socket
    import struct
    import time

    log = io.StringIO()
    with StubServer(latency_s=0.3, error_log=log) as stub:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        client = socket.create_connection(("127.0.0.1", stub.port))
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # a reset while the stub waits out its latency: its reply has nowhere to go
        deadline = time.monotonic() + 10
        while not stub.handler_errors and time.monotonic() < deadline:
            time.sleep(0.05)
    assert stub.handler_errors, "the dropped connection left no trace"
    assert any(name in stub.handler_errors[0] for name in ("ConnectionResetError", "BrokenPipeError"))
    assert "handler error from" in log.getvalue()


def test_a_chunked_body_is_read_and_a_cut_one_is_logged() -> None:
    import http.client
    import json
    import socket

    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    with StubServer() as stub:
        connection = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=10)
        connection.request("POST", "/v1/chat/completions", body=iter([body[:10], body[10:]]),
                           headers={"Content-Type": "application/json"}, encode_chunked=True)
        response = connection.getresponse()
        assert response.status == 200, response.read()
        assert json.loads(response.read())["choices"][0]["message"]["content"] == "stub: hi"
        client = socket.create_connection(("127.0.0.1", stub.port))
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"mo")
        client.shutdown(socket.SHUT_WR)
        assert client.recv(100) == b""  # no reply to half a request: the stub just closes
        client.close()
    assert stub.requests == 1
    assert "before its request body had arrived" in stub.handler_errors[-1]
    assert "Content-Length" in stub.handler_errors[-1]


def test_the_stub_serves_its_counters() -> None:
    import json
    import urllib.request

    with StubServer(failure_rate=1.0, fail_statuses=(503,)) as stub:
        request = urllib.request.Request(f"{stub.api_base}/chat/completions", method="POST",
                                         data=json.dumps({"model": "m", "messages": []}).encode())
        try:
            urllib.request.urlopen(request, timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
        with urllib.request.urlopen(f"http://127.0.0.1:{stub.port}/stats", timeout=10) as response:
            stats = json.loads(response.read())
    assert stats == {"requests": 1, "failures": 1, "max_in_flight": 1, "dropped_connections": 0}
