"""One threaded HTTP server on a background thread: bind, serve, stop and free the address (stdlib only).

The stub LLM server (:mod:`ecdysis.testing.stub_server`), the coding agents' gateway proxy
(:mod:`ecdysis.coders.gateway_proxy`) and tests serve their :class:`~http.server.BaseHTTPRequestHandler` through it.
It binds a loopback TCP port (a free one unless told) or a unix socket, answers each connection on its own daemon
thread, and :meth:`BackgroundHTTPServer.stop` returns once the port is free again. A handler that raises ends its own
connection only; the server goes on (``on_error`` hears of it, else the traceback goes to stderr as
:mod:`socketserver` does).

>>> import urllib.request
>>> from http.server import BaseHTTPRequestHandler
>>> class Hello(BaseHTTPRequestHandler):
...     def do_GET(self) -> None:
...         self.send_response(200)
...         self.send_header("Content-Length", "5")
...         self.end_headers()
...         self.wfile.write(b"hello")
...     def log_message(self, format: str, *args: object) -> None:
...         pass
>>> with BackgroundHTTPServer(Hello) as server:
...     urllib.request.urlopen(f"{server.url}/", timeout=5).read()
b'hello'
"""

from __future__ import annotations

import socketserver
import threading
import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

ErrorHook = Callable[[str, Any], None]
"""Told ``(traceback text, client address)`` when a connection ends because its handler raised."""


class _Serving(socketserver.BaseServer):
    """What both transports share: daemon threads per connection, a deep backlog, handler errors to a hook."""

    daemon_threads = True
    # socketserver's default listen backlog is 5: a burst of new connections (a runner opening 32 at once)
    # overflowed it and clients saw "Connection error".
    request_queue_size = 256
    on_error: ErrorHook | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        if self.on_error is None:
            super().handle_error(request, client_address)
        else:
            self.on_error(traceback.format_exc(limit=8), client_address)


class _TCPServer(_Serving, ThreadingHTTPServer):
    pass


class _UnixServer(_Serving, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    pass


class BackgroundHTTPServer:
    """Serves ``handler`` on ``host:port`` (default: a free loopback port) or on ``unix_socket``, in a daemon thread;
    a context manager.

    Args:
        handler: the request handler class, one instance per request as :mod:`http.server` makes them.
        host / port: the TCP address to bind; ignored with ``unix_socket``.
        unix_socket: bind this path instead (a file left there is replaced; :meth:`stop` removes it).
        name: the serving thread's name.
        on_error: told of every connection its handler ended by raising (else stderr, as :mod:`socketserver`).
        poll_interval_s: how often the serving loop looks for :meth:`stop`, which waits up to this long (at
            :mod:`socketserver`'s default 0.5 s, every stop of the stub server took half a second).
    """

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, host: str = "127.0.0.1", port: int = 0,
                 unix_socket: Path | None = None, name: str = "http-server", on_error: ErrorHook | None = None,
                 poll_interval_s: float = 0.05) -> None:
        self.handler, self.name, self.on_error, self.poll_interval_s = handler, name, on_error, poll_interval_s
        self.host, self.unix_socket, self._port = host, unix_socket, port
        self._server: _Serving | None = None

    @property
    def running(self) -> bool:
        """Whether it is started and not stopped."""
        return self._server is not None

    @property
    def port(self) -> int:
        """The bound TCP port."""
        return int(self._tcp_address()[1])

    @property
    def url(self) -> str:
        """``http://<bound address>:<port>``."""
        host, port = self._tcp_address()[:2]
        return f"http://{host}:{port}"

    def _tcp_address(self) -> tuple[Any, ...]:
        address = None if self._server is None else self._server.server_address
        if not isinstance(address, tuple):
            raise RuntimeError(f"{self.name}: the address of a started TCP server only")
        return address

    def start(self) -> Self:
        """Bind and serve in a daemon thread."""
        if self._server is not None:
            raise RuntimeError(f"{self.name} is already serving")
        server: _Serving
        if self.unix_socket is not None:
            self.unix_socket.unlink(missing_ok=True)
            server = _UnixServer(str(self.unix_socket), self.handler)
        else:
            server = _TCPServer((self.host, self._port), self.handler)
        server.on_error = self.on_error
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": self.poll_interval_s}, name=self.name,
                         daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and free the address (requests still running finish on their own threads). Idempotent."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.unix_socket is not None:
            self.unix_socket.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
