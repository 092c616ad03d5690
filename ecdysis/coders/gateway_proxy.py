"""A loopback OpenAI-compatible endpoint in front of an :class:`LLMClient`, for external coding-agent CLIs.

The external CLI (OpenCode, aider) talks OpenAI chat completions to this proxy and never holds a provider key: every
request becomes ``llm.complete(model, messages, role=CODER, tools=...)`` on our gateway, with our accounting, cache
and budgets. The model name in the request is ignored: the proxy always uses the model it was built with.
It listens on 127.0.0.1 (TCP) or on a unix socket (mounted into a no-network sandbox). A streaming request (OpenCode
always streams) gets the answer as OpenAI ``chat.completion.chunk`` events (:func:`stream_chunks`) and ``[DONE]``.

>>> with GatewayProxy(gateway, "scripted/ecdysis.benchmarks.tau2.scripted:coder") as proxy:   # doctest: +SKIP
...     print(proxy.base_url)        # http://127.0.0.1:<port>/v1
"""

from __future__ import annotations

import json
import os
import time
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from ecdysis.httpserve import BackgroundHTTPServer
from ecdysis.llm.errors import ModelAccessError
from ecdysis.protocols import LLMClient
from ecdysis.records import Role

MAX_BODY_BYTES = 8 * 1024 * 1024
FORWARDED_PARAMS = ("temperature", "top_p", "max_tokens", "stop", "seed")


class GatewayProxy:
    """``POST /v1/chat/completions`` and ``GET /v1/models`` forwarded to ``llm.complete``."""

    def __init__(self, llm: LLMClient, model: str, *, role: Role = Role.CODER, context: dict[str, Any] | None = None,
                 host: str = "127.0.0.1", port: int = 0, unix_socket: Path | None = None,
                 token: str | None = None) -> None:
        if unix_socket is None and host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError(f"GatewayProxy listens on loopback only, got host {host!r}")
        self.llm = llm
        self.model = model
        self.role = role
        self.context = dict(context or {})
        self.token = token
        """When set, a request must carry ``Authorization: Bearer <token>`` (a per-run token, never a provider key)."""
        self.requests = 0
        self.first_request_at: float | None = None
        """``time.monotonic()`` of the first chat request (a CLI's start-up ends there)."""
        self.log: list[dict[str, Any]] = []
        """One summary per request: ``stream``, message roles, offered tool names, the answer's tool calls."""
        self.refused: ModelAccessError | None = None
        """The first call the provider refused for a reason that is the user's to fix (key, access, model name): the
        CLI only sees an upstream error, so whoever runs it raises this once it is done, and the run stops."""
        self._server = BackgroundHTTPServer(_handler_for(self), host=host, port=port, unix_socket=unix_socket,
                                            name="gateway-proxy")

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (TCP mode)."""
        if not self._server.running or self._server.unix_socket is not None:
            raise RuntimeError("base_url needs a started TCP proxy")
        return f"{self._server.url}/v1"

    def start(self) -> GatewayProxy:
        """Start serving in a daemon thread."""
        self._server.start()
        if self._server.unix_socket is not None:
            os.chmod(self._server.unix_socket, 0o666)  # the container user is not us
        return self

    def stop(self) -> None:
        """Stop serving (a unix socket is removed). Idempotent."""
        self._server.stop()

    def __enter__(self) -> GatewayProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """The OpenAI ``chat.completion`` object for one request body."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' must be a non-empty list")
        params = {key: body[key] for key in FORWARDED_PARAMS if body.get(key) is not None}
        if self.first_request_at is None:
            self.first_request_at = time.monotonic()
        self.requests += 1
        completion = self.llm.complete(self.model, messages, role=self.role, tools=body.get("tools") or None,
                                       context={**self.context, "via": "gateway_proxy"}, **params)
        self.log.append({"stream": bool(body.get("stream")),
                         "roles": [str(m.get("role")) for m in messages if isinstance(m, dict)],
                         "tools": [str((t.get("function") or {}).get("name")) for t in body.get("tools") or []
                                   if isinstance(t, dict)],
                         "tool_calls": [str((c.get("function") or {}).get("name"))
                                        for c in completion.tool_calls or []]})
        message: dict[str, Any] = {"role": "assistant", "content": completion.content}
        if completion.tool_calls:
            message["tool_calls"] = completion.tool_calls
        usage = {"prompt_tokens": completion.tokens.prompt_tokens,
                 "completion_tokens": completion.tokens.completion_tokens,
                 "total_tokens": completion.tokens.total}
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model") or self.model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if completion.tool_calls else "stop"}],
                "usage": usage}


def stream_chunks(response: dict[str, Any], *, include_usage: bool = False) -> list[dict[str, Any]]:
    """A ``chat.completion`` as the OpenAI ``chat.completion.chunk`` stream a streaming client expects: the role, the
    text, each tool call (its ``index``, ``id`` and name first, then its arguments), a finish chunk, and, when the
    request asked for ``stream_options.include_usage``, a last chunk with no choices carrying the usage (else the
    usage rides on the finish chunk)."""
    choice = response["choices"][0]
    message = choice["message"]
    base = {"id": response["id"], "object": "chat.completion.chunk", "created": response["created"],
            "model": response["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        chunks.append(chunk({"content": message["content"]}))
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call.get("id") or f"call_{index}",
                                             "type": "function",
                                             "function": {"name": function.get("name", ""), "arguments": ""}}]}))
        chunks.append(chunk({"tool_calls": [{"index": index,
                                             "function": {"arguments": function.get("arguments") or "{}"}}]}))
    finish = chunk({}, choice["finish_reason"])
    if include_usage:
        return [*chunks, finish, {**base, "choices": [], "usage": response["usage"]}]
    return [*chunks, {**finish, "usage": response["usage"]}]


def _handler_for(proxy: GatewayProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def address_string(self) -> str:  # unix sockets have no client address
            return "local"

        def _send_json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str) -> None:
            self._send_json(status, {"error": {"message": message, "type": kind}})

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send_json(200, {"object": "list", "data": [
                    {"id": proxy.model, "object": "model", "created": 0, "owned_by": "ecdysis"}]})
            else:
                self._error(404, f"no route {self.path}", "not_found")

        def do_POST(self) -> None:
            if proxy.token is not None and self.headers.get("Authorization") != f"Bearer {proxy.token}":
                self._error(401, "missing or wrong proxy token", "authentication_error")
                return
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._error(404, f"no route {self.path}", "not_found")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY_BYTES:
                self._error(400, f"body must be 1..{MAX_BODY_BYTES} bytes, got {length}", "invalid_request_error")
                return
            try:
                body = json.loads(self.rfile.read(length))
                if not isinstance(body, dict):
                    raise ValueError("body must be a JSON object")
            except ValueError as exc:
                self._error(400, f"invalid JSON body: {exc}", "invalid_request_error")
                return
            try:
                response = proxy.chat_completion(body)
            except ValueError as exc:
                self._error(400, str(exc), "invalid_request_error")
                return
            except Exception as exc:  # the gateway's failure, reported to the CLI as an upstream error
                if isinstance(exc, ModelAccessError) and proxy.refused is None:
                    proxy.refused = exc
                self._error(502, f"{type(exc).__name__}: {exc}", "upstream_error")
                return
            if not body.get("stream"):
                self._send_json(200, response)
                return
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            data = b"".join(f"data: {json.dumps(chunk)}\n\n".encode()
                            for chunk in stream_chunks(response, include_usage=include_usage))
            data += b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
