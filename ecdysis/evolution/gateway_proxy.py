"""A loopback OpenAI-compatible endpoint in front of an :class:`LLMClient`, for external coding-agent CLIs.

The external CLI (OpenCode, aider) talks OpenAI chat completions to this proxy and never holds a provider key: every
request becomes ``llm.complete(model, messages, role=CODER, tools=...)`` on our gateway, with our accounting, cache
and budgets. The model name in the request is ignored: the proxy always uses the model it was built with.
It listens on 127.0.0.1 (TCP) or on a unix socket (mounted into a no-network container). Streaming requests get the
whole answer as one chunk.

>>> with GatewayProxy(gateway, "scripted/ecdysis.benchmarks.tau2.scripted:coder") as proxy:   # doctest: +SKIP
...     print(proxy.base_url)        # http://127.0.0.1:<port>/v1
"""

from __future__ import annotations

import json
import os
import socketserver
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ecdysis.protocols import LLMClient
from ecdysis.records import Role

MAX_BODY_BYTES = 8 * 1024 * 1024
FORWARDED_PARAMS = ("temperature", "top_p", "max_tokens", "stop", "seed")


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class GatewayProxy:
    """``POST /v1/chat/completions`` and ``GET /v1/models`` forwarded to ``llm.complete``."""

    def __init__(self, llm: LLMClient, model: str, *, role: Role = Role.CODER, context: dict[str, Any] | None = None,
                 host: str = "127.0.0.1", port: int = 0, unix_socket: Path | None = None) -> None:
        if unix_socket is None and host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError(f"GatewayProxy listens on loopback only, got host {host!r}")
        self.llm = llm
        self.model = model
        self.role = role
        self.context = dict(context or {})
        self.requests = 0
        self._host, self._port, self._unix_socket = host, port, unix_socket
        self._server: socketserver.BaseServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (TCP mode)."""
        if self._server is None or self._unix_socket is not None:
            raise RuntimeError("base_url needs a started TCP proxy")
        address: Any = self._server.server_address
        return f"http://{address[0]}:{address[1]}/v1"

    def start(self) -> GatewayProxy:
        """Start serving in a daemon thread."""
        handler = _handler_for(self)
        if self._unix_socket is not None:
            if self._unix_socket.exists():
                self._unix_socket.unlink()
            server: socketserver.BaseServer = _UnixHTTPServer(str(self._unix_socket), handler)
            os.chmod(self._unix_socket, 0o666)  # the container user is not us
        else:
            server = ThreadingHTTPServer((self._host, self._port), handler)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="gateway-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving. Idempotent."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._unix_socket is not None and self._unix_socket.exists():
            self._unix_socket.unlink()

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
        self.requests += 1
        completion = self.llm.complete(self.model, messages, role=self.role, tools=body.get("tools") or None,
                                       context={**self.context, "via": "gateway_proxy"}, **params)
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


def _stream_chunks(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The whole answer as one delta chunk, then a finish chunk carrying usage."""
    choice = response["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    base = {"id": response["id"], "object": "chat.completion.chunk", "created": response["created"],
            "model": response["model"]}
    return [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
             "usage": response["usage"]}]


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
                self._error(502, f"{type(exc).__name__}: {exc}", "upstream_error")
                return
            if not body.get("stream"):
                self._send_json(200, response)
                return
            data = b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in _stream_chunks(response))
            data += b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
