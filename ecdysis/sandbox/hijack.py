"""Hijacked Docker connections (``attach_socket``, ``exec_start(socket=True)``) read without losing their first bytes.

docker-py returns the raw socket under the HTTP response. The HTTP client read the response's headers through a
buffer, though, and when the engine's first output came in the same read as the headers (a loaded machine reads
them late), those bytes sit in that buffer, not in the socket. Read from the socket alone, they are lost: all of a
short exec's output, or the start of a frame, after which the framing is garbage.

:class:`FrameReader` splits such a stream into Docker's multiplexed frames (stdout and stderr of a non-TTY exec or
attach).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from typing import Any

FRAME_HEADER = struct.Struct(">BxxxL")
"""A frame's header: its stream (1 stdout, 2 stderr), three zero bytes, the payload's size (big-endian)."""


class HijackedSocket:
    """The socket of a hijacked connection, with the bytes its HTTP response had already buffered served first."""

    def __init__(self, response: Any) -> None:
        self._response = response  # keeps the HTTP response (and so the socket) alive
        self.sock: socket.socket = getattr(response, "_sock", response)
        self._pending = bytearray(_buffered_past_headers(response, self.sock))

    def recv(self, size: int) -> bytes:
        """Up to ``size`` bytes: the buffered ones first, then from the socket (b"" at its end)."""
        if self._pending:
            data = bytes(self._pending[:size])
            del self._pending[:size]
            return data
        return self.sock.recv(size)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()


def _buffered_past_headers(response: Any, sock: socket.socket) -> bytes:
    """What the HTTP client's buffered reader holds beyond the headers; reads nothing more from the socket."""
    # docker-py keeps the response on what it returns; its reader is the buffer the headers were read through.
    http_response = getattr(response, "_response", None)
    reader = getattr(getattr(getattr(http_response, "raw", None), "_fp", None), "fp", None)
    if reader is None or not hasattr(reader, "peek"):
        return b""
    previous = sock.gettimeout()
    sock.settimeout(0.0)  # peek reads the socket when the buffer is empty; non-blocking, that read finds nothing
    try:
        with contextlib.suppress(OSError, ValueError):
            return bytes(reader.peek())
        return b""
    finally:
        sock.settimeout(previous)


class FrameReader:
    """Reads Docker's multiplexed stream frames from a hijacked socket, tolerating frames split across reads."""

    def __init__(self, sock: HijackedSocket) -> None:
        self.sock = sock
        self._pending = bytearray()
        self.eof = False
        """True once the stream ended (or the socket failed)."""

    def read(self, timeout: float | None) -> list[tuple[int, bytes]]:
        """The complete ``(stream, payload)`` frames that arrive within ``timeout`` seconds (None: wait as long as it
        takes); at least one unless it times out or the stream ends. Sets ``eof`` when the stream ended."""
        frames = self._frames()
        if frames or self.eof:
            return frames
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        if deadline is None:
            self.sock.settimeout(None)
        while not frames and not self.eof:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                break
            except OSError:
                self.eof = True
                break
            if not data:
                self.eof = True
                break
            self._pending += data
            frames = self._frames()
        return frames

    def _frames(self) -> list[tuple[int, bytes]]:
        frames = []
        while len(self._pending) >= FRAME_HEADER.size:
            stream, size = FRAME_HEADER.unpack_from(self._pending)
            end = FRAME_HEADER.size + size
            if len(self._pending) < end:
                break
            frames.append((stream, bytes(self._pending[FRAME_HEADER.size:end])))
            del self._pending[:end]
        return frames
