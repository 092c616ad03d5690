"""The one threaded HTTP server helper: it answers, a handler that raises costs only its own connection, and a stop
frees the port (or removes the unix socket)."""

from __future__ import annotations

import http.client
import socket
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from ecdysis.httpserve import BackgroundHTTPServer


class _Echo(BaseHTTPRequestHandler):
    """``GET /boom`` raises; any other path is answered with itself."""

    def do_GET(self) -> None:
        if self.path == "/boom":
            raise RuntimeError("the handler broke")
        body = self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        body: bytes = response.read()
    return body


def test_it_answers_on_a_free_loopback_port_and_a_stop_frees_it() -> None:
    server = BackgroundHTTPServer(_Echo).start()
    port = server.port
    assert port > 0 and server.url == f"http://127.0.0.1:{port}"
    assert _get(f"{server.url}/hello") == b"/hello"
    server.stop()
    assert not server.running
    with pytest.raises(RuntimeError, match="started TCP server"):
        _ = server.port
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    server.stop()  # idempotent
    with BackgroundHTTPServer(_Echo, port=port) as again:  # the address is free for the next server
        assert _get(f"{again.url}/again") == b"/again"


def test_a_handler_that_raises_ends_its_connection_only() -> None:
    errors: list[tuple[str, Any]] = []
    with BackgroundHTTPServer(_Echo, on_error=lambda text, client: errors.append((text, client))) as server:
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            _get(f"{server.url}/boom")
        assert _get(f"{server.url}/after") == b"/after"
    assert len(errors) == 1 and "RuntimeError: the handler broke" in errors[0][0]
    assert errors[0][1][0] == "127.0.0.1"


def test_without_a_hook_the_traceback_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with BackgroundHTTPServer(_Echo) as server:
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            _get(f"{server.url}/boom")
        assert _get(f"{server.url}/still") == b"/still"
    assert "RuntimeError: the handler broke" in capsys.readouterr().err


def test_a_unix_socket_is_served_and_removed_on_stop(tmp_path: Path) -> None:
    path = tmp_path / "serve.sock"
    path.write_text("left over")  # a stale file at the path is replaced
    with BackgroundHTTPServer(_Echo, unix_socket=path) as server:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))
            client.sendall(b"GET /unix HTTP/1.0\r\n\r\n")
            reply = b"".join(iter(lambda: client.recv(4096), b""))
        assert reply.startswith(b"HTTP/1.0 200") and reply.endswith(b"/unix")
        with pytest.raises(RuntimeError):
            _ = server.url
    assert not path.exists()
