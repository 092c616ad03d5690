"""Turns the runtime's raw output into protocol messages, enforcing the line and total-output limits."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from typing import Any

from ecdysis.sandbox.errors import ProtocolViolation
from ecdysis.sandbox.untrusted import UntrustedDataError, needs_repair, repaired

Item = tuple[str, Any]  # ("message", dict) | ("violation", ProtocolViolation) | ("eof", None)


class OutputPump:
    """Fed with stdout/stderr chunks by reader threads; hands parsed messages to ``get``.

    Every parsed line is bounded and repaired (:mod:`ecdysis.sandbox.untrusted`) before anyone sees it. The first
    violation (bad line, oversized line, too deep, output past the cap) is queued after every message that came
    before it, and ``on_violation`` is called once so the owner can stop a flooding sandbox at once.
    """

    def __init__(self, *, max_line_bytes: int, max_output_bytes: int, stderr_tail_bytes: int = 8192,
                 on_violation: Callable[[], None] | None = None) -> None:
        self.max_line_bytes = max_line_bytes
        self.max_output_bytes = max_output_bytes
        self._tail_bytes = stderr_tail_bytes
        self._on_violation = on_violation
        self._queue: queue.Queue[Item] = queue.Queue()
        self._lock = threading.Lock()
        self._line = bytearray()
        self._tail = bytearray()
        self._total = 0
        self._stopped = False
        self.violated = False
        """True once a violation was queued (the sandbox must not be trusted again)."""

    def feed_stdout(self, data: bytes) -> None:
        """Protocol bytes from the runtime."""
        with self._lock:
            if self._stopped or not self._count(len(data)):
                return
            self._line += data
            while not self._stopped:
                end = self._line.find(b"\n")
                if end < 0:
                    if len(self._line) > self.max_line_bytes:
                        self._violate(f"protocol line longer than {self.max_line_bytes} bytes")
                    return
                line = bytes(self._line[:end])
                del self._line[: end + 1]
                self._parse(line)

    def feed_stderr(self, data: bytes) -> None:
        """Diagnostic bytes (the harness's prints); only a tail is kept.

        Bytes that arrive after the protocol stream ended still join the tail (uncounted: the sandbox has stopped):
        stderr is read by its own thread, which may reach what the runtime wrote before it exited only after the
        stdout reader saw the end."""
        with self._lock:
            if not self._stopped and not self._count(len(data)):
                return
            self._tail += data
            if len(self._tail) > self._tail_bytes:
                del self._tail[: len(self._tail) - self._tail_bytes]

    def feed_eof(self) -> None:
        """The output stream ended (the sandbox stopped)."""
        with self._lock:
            if not self._stopped:
                self._stopped = True
                self._queue.put(("eof", None))

    def get(self, timeout: float) -> Item | None:
        """The next item, or None when ``timeout`` seconds pass with nothing."""
        try:
            return self._queue.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None

    def stderr_tail(self) -> str:
        """The last bytes the sandbox wrote to stderr, decoded leniently."""
        with self._lock:
            return self._tail.decode("utf-8", errors="replace")

    def _count(self, size: int) -> bool:
        self._total += size
        if self._total > self.max_output_bytes:
            self._violate(f"sandbox output exceeded the {self.max_output_bytes}-byte cap")
            return False
        return True

    def _parse(self, line: bytes) -> None:
        if len(line) > self.max_line_bytes:
            self._violate(f"protocol line of {len(line)} bytes exceeds {self.max_line_bytes}")
            return
        try:
            message = json.loads(line)
            if needs_repair(line):
                message = repaired(message)
        except UntrustedDataError as exc:
            self._violate(f"protocol line refused: {exc}")
            return
        except RecursionError:
            self._violate(f"protocol line nested deeper than the parser allows: {line[:200]!r}")
            return
        except ValueError:
            self._violate(f"protocol line is not JSON: {line[:200]!r}")
            return
        if not isinstance(message, dict):
            self._violate(f"protocol line is not a JSON object: {line[:200]!r}")
        elif message.get("v") != 1:
            self._violate(f"protocol version {message.get('v')!r} is not 1: {line[:200]!r}")
        else:
            self._queue.put(("message", message))

    def _violate(self, text: str) -> None:
        self._stopped = True
        self.violated = True
        self._queue.put(("violation", ProtocolViolation(text)))
        if self._on_violation is not None:
            # Stopping the sandbox may block on I/O; never do it under the lock or on the reader thread.
            threading.Thread(target=self._on_violation, daemon=True).start()
