"""A loopback OpenAI-compatible chat server for fault-injection tests and benchmarks (stdlib only).

Serves ``POST /v1/chat/completions``, ``GET /v1/models`` and ``GET /stats`` (its counters). Replies come from a
callable with the :class:`ecdysis.protocols.ScriptedModelFn` signature (or a ``"module:function"`` name of one);
failures are injected deterministically from a seed, in request-arrival order, or scripted request by request
(``answers``, then ``then``): an error status (429 with ``Retry-After``), a request that hangs, a connection closed
without a reply. Example::

    with StubServer(failure_rate=0.3, seed=7) as stub:
        gateway.complete("openai/stub", messages, role=Role.TASK)  # with models={"openai/stub": {"api_base": ...}}
        print(stub.requests, stub.failures)

    with StubServer(answers=[None], then=401) as stub:  # the first chat request is answered, every later one is a 401
        ...
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal, TextIO

from ecdysis.httpserve import BackgroundHTTPServer

ReplyFn = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, dict[str, Any]], Any]

Answer = int | Literal["hang", "close"] | None
"""How the stub answers one chat request: None a normal reply, an int that HTTP error status (an OpenAI-style error
body; 429 also sends ``Retry-After``), ``hang`` no answer until the server stops, ``close`` the connection closed
without a reply."""

ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_api_key", 403: "permission_denied", 404: "model_not_found",
               429: "rate_limit_exceeded"}


def _words(value: Any) -> int:
    if value is None:
        return 0
    return len((value if isinstance(value, str) else json.dumps(value, sort_keys=True)).split())


def _default_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    last: dict[str, Any] = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    return f"stub: {last.get('content') or ''}"


class StubServer:
    """OpenAI-compatible stub (on ``127.0.0.1`` unless ``host`` says otherwise) in a background thread; a context
    manager.

    Args:
        reply: ScriptedModelFn-shaped callable, or ``"module:function"``; default echoes ``"stub: <last user>"``.
        failure_rate: fraction of requests answered with an error status instead.
        fail_statuses: statuses injected failures use, drawn in turn from the seeded generator.
        seed: seeds the failure draws, so the same request sequence fails the same way.
        latency_s: delay added to every request (failed ones included).
        model_latency_s: per-model delays (keyed by the request's model name, provider prefix dropped) that
            replace ``latency_s`` for those models: a provider-like profile where a coding turn is slower than a
            chat turn.
        prompt_tokens / completion_tokens: fixed usage figures; None counts words.
        cached_tokens: reported as ``usage.prompt_tokens_details.cached_tokens``.
        error_log: where a request handler's unexpected exception is written (its traceback) as it happens;
            they are also kept in :attr:`handler_errors` either way.
        answers: how the first chat requests are answered, in arrival order (see :data:`Answer`), before
            ``failure_rate`` draws; ``then``: how every request after them is answered (None: as ``failure_rate``
            draws).
        retry_after_s: the ``Retry-After`` header of every 429.
    """

    def __init__(self, reply: ReplyFn | str | None = None, *, failure_rate: float = 0.0,
                 fail_statuses: Sequence[int] = (429, 500), seed: int = 0, latency_s: float = 0.0,
                 model_latency_s: dict[str, float] | None = None,
                 prompt_tokens: int | None = None, completion_tokens: int | None = None,
                 cached_tokens: int = 0, error_log: TextIO | None = None, host: str = "127.0.0.1",
                 port: int = 0, answers: Sequence[Answer] = (), then: Answer = None,
                 retry_after_s: float = 1.0) -> None:
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError(f"failure_rate must be within [0, 1], got {failure_rate}")
        if isinstance(reply, str):
            from ecdysis.llm.scripted import resolve

            reply = resolve(reply.removeprefix("scripted/"))
        self.reply: ReplyFn = reply or _default_reply
        self.failure_rate = failure_rate
        self.fail_statuses = tuple(fail_statuses)
        self.latency_s = latency_s
        self.model_latency_s = dict(model_latency_s or {})
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.cached_tokens = cached_tokens
        self.requests = 0
        self.failures = 0
        self.status_counts: dict[int, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        """Most chat requests served at the same time (checks client-side concurrency limits)."""
        self.handler_errors: list[str] = []
        """Tracebacks of exceptions that ended a connection without a reply (a client that hung up included)."""
        self.dropped_connections = 0
        self.error_log = error_log
        self.host = host
        """Address to bind: loopback by default; a cluster's model server binds its network address."""
        self.answers = list(answers)
        self.then = then
        self.retry_after_s = retry_after_s
        self._stopping = threading.Event()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        # a handler class of its own per stub, which its requests reach it through
        handler = type("StubHandler", (_Handler,), {"stub": self})
        # clients that gave up (timeouts) close the socket mid-reply, which is expected; but the client of a
        # connection that ends here for another reason sees only "Connection error", so keep the why
        self._server = BackgroundHTTPServer(handler, host=host, port=port, name="stub-llm",
                                            on_error=self.record_handler_error)

    @property
    def port(self) -> int:
        if not self._server.running:
            raise RuntimeError("StubServer is not started")
        return self._server.port

    @property
    def api_base(self) -> str:
        """``http://<host>:<port>/v1``, the litellm ``api_base``."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> StubServer:
        """Bind the port (default: a free one) and serve in a daemon thread."""
        self._stopping.clear()
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (requests left hanging end without a reply). Idempotent."""
        self._stopping.set()
        self._server.stop()

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next_answer(self) -> Answer:
        """How to answer this chat request: the next scripted answer, else ``then``, else a seeded draw."""
        with self._lock:
            scripted = self.requests < len(self.answers)
            answer = self.answers[self.requests] if scripted else self.then
            if scripted or answer is not None:
                self.requests += 1
                key = answer if isinstance(answer, int) else 200 if answer is None else 0  # 0: no status sent
                self.status_counts[key] = self.status_counts.get(key, 0) + 1
                self.failures += answer is not None
                return answer
        return self.draw_failure()

    def hang(self) -> None:
        """Hold a request unanswered until the server stops."""
        self._stopping.wait()

    def draw_failure(self) -> int | None:
        """The status to fail this request with, or None; advances the seeded sequence."""
        with self._lock:
            self.requests += 1
            status = None
            if self._rng.random() < self.failure_rate:
                status = self.fail_statuses[self._rng.randrange(len(self.fail_statuses))]
                self.failures += 1
            key = status or 200
            self.status_counts[key] = self.status_counts.get(key, 0) + 1
            return status

    def stats(self) -> dict[str, Any]:
        """Counters so far (also served at ``GET /stats``): chat requests, injected failures, connections dropped."""
        with self._lock:
            return {"requests": self.requests, "failures": self.failures, "max_in_flight": self.max_in_flight,
                    "dropped_connections": self.dropped_connections}

    def record_handler_error(self, text: str, client_address: object) -> None:
        """Keep (the last 50) and log why a connection ended without a reply."""
        with self._lock:
            self.dropped_connections += 1
            self.handler_errors.append(text)
            del self.handler_errors[:-50]
        if self.error_log is not None:
            print(f"{time.strftime('%H:%M:%S')} handler error from {client_address}:\n{text}", file=self.error_log,
                  flush=True)

    def latency_for(self, model: object) -> float:
        """The delay of a request for ``model``."""
        name = str(model or "").split("/")[-1]
        return self.model_latency_s.get(name, self.latency_s)

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat-completion JSON answering request ``body``."""
        messages = list(body.get("messages") or [])
        tools = body.get("tools")
        reply = self.reply(messages, tools, {"model": body.get("model"), "request": body})
        message: dict[str, Any] = {"role": "assistant", "content": reply} if isinstance(reply, str) else \
            {"role": "assistant", "content": reply.get("content"), **_tool_calls(reply)}
        prompt = self.prompt_tokens if self.prompt_tokens is not None else \
            sum(_words(m.get("content")) for m in messages) + _words(tools)
        completion = self.completion_tokens if self.completion_tokens is not None else \
            _words(message.get("content")) + _words(message.get("tool_calls"))
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                      "prompt_tokens_details": {"cached_tokens": min(self.cached_tokens, prompt)}},
        }


def _tool_calls(reply: dict[str, Any]) -> dict[str, Any]:
    calls = []
    for i, call in enumerate(reply.get("tool_calls") or []):
        function = dict(call["function"])
        if not isinstance(function.get("arguments"), str):
            function["arguments"] = json.dumps(function.get("arguments") or {})
        calls.append({"id": call.get("id") or f"call_{i}", "type": "function", "function": function})
    return {"tool_calls": calls} if calls else {}


class _Handler(BaseHTTPRequestHandler):
    stub: StubServer
    """The stub this handler's requests go to (set on each stub's own subclass)."""
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: Nagle held the body ~40 ms

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        if status == 429:
            self.send_header("Retry-After", f"{self.stub.retry_after_s:g}")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})
        elif self.path.rstrip("/") == "/stats":
            self._send(200, self.stub.stats())
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def _read_body(self) -> bytes | None:
        """The request body (by Content-Length, or chunked); None when the client hung up before sending it all."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size_line = self.rfile.readline(1024)
                if not size_line:
                    return None
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                chunk = self.rfile.read(size + 2)  # the chunk and its CRLF
                if len(chunk) < size + 2:
                    return None
                if size == 0:
                    return b"".join(chunks)
                chunks.append(chunk[:size])
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        return raw if len(raw) == length else None

    def do_POST(self) -> None:
        raw = self._read_body()
        if raw is None:
            self.close_connection = True
            self.stub.record_handler_error("the client closed the connection before its request body had arrived; "
                                           f"headers: {dict(self.headers)}", self.client_address)
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        self.stub._enter()
        try:
            self._chat(raw)
        finally:
            self.stub._leave()

    def _chat(self, raw: bytes) -> None:
        answer = self.stub.next_answer()
        if answer in ("hang", "close"):
            if answer == "hang":
                self.stub.hang()
            self.close_connection = True  # no reply at all: the client sees its connection end
            return
        status = answer if isinstance(answer, int) else None
        try:
            body: Any = json.loads(raw or b"{}")
        except ValueError as exc:
            body = exc
        latency = self.stub.latency_for(body.get("model") if isinstance(body, dict) else None)
        if latency:
            time.sleep(latency)
        if status is not None:
            self._send(status, {"error": {"message": f"injected failure {status}",
                                          "type": ERROR_TYPES.get(status, "stub_error"), "code": str(status)}})
            return
        try:
            if isinstance(body, Exception):
                raise body
            payload = self.stub.respond(body)
        except Exception as exc:  # a broken reply function is the caller's bug: say so in a 400
            self._send(400, {"error": {"message": f"{type(exc).__name__}: {exc}", "type": "invalid_request"}})
            return
        self._send(200, payload)
