"""Stdlib-only TCP → unix-socket relay, run inside the external coding agent's no-network sandbox.

``python3 cli_relay.py PORT SOCKET`` listens on 127.0.0.1:PORT and pipes every connection to the gateway proxy's
unix socket (bound in from the host), so the CLI's only network path is a loopback OpenAI-compatible endpoint.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _serve(client: socket.socket, socket_path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(socket_path)
    except OSError:
        client.close()
        return
    threading.Thread(target=_pipe, args=(client, upstream), daemon=True).start()
    _pipe(upstream, client)


def main(port: int, socket_path: str) -> None:
    """Relay forever."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    print(f"relay ready on 127.0.0.1:{port}", flush=True)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_serve, args=(client, socket_path), daemon=True).start()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
