"""The agent's one persistent shell in a task container.

A long-lived ``bash --login`` (no terminal, stderr merged into stdout) reads commands from an attached exec socket,
so the working directory, variables and ``su`` carry over from one command to the next, as in upstream's terminal
session. Each command is sent as ``eval "$(printf '<octal-escaped text>')"``: a command with a syntax error or an
unclosed quote cannot swallow what follows, and ``printf`` and ``eval`` exist in every POSIX shell, so this still
works after ``su`` to a user whose login shell is ``sh``. A second line prints a sentinel (a per-command nonce, the
exit status and the pid of the shell that ran it), which marks the end of the command's output.

A command still running at its time limit is stopped: the processes the current shell started since the command
began are killed (found through /proc), and a fresh sentinel is sent. If even that does not come back (the command
replaced the shell, or something still reads its input), the shell is killed and a new one started.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from ecdysis.benchmarks.agentbench.os_interaction.dockerio import MARKER_VARIABLE, SYSTEM_PATH, run_exec
from ecdysis.sandbox.hijack import FrameReader, HijackedSocket

_MARKER = re.compile(rb"\x1e([0-9a-f]{16}) (\d+) (\d+)\x1e\n")
_HOLD_BACK = 64  # bytes kept uncommitted in case they begin a sentinel that is not complete yet
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-+=.,:/@#!?()[]{}<>|&;*~^$\"`")
_FIRST_POLL, _POLL_EVERY = 1.0, 2.0  # seconds: when a long command is first checked for having ended, then how often
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class ShellUnavailable(RuntimeError):
    """The shell could not be started (the container or the daemon is gone)."""


@dataclass(frozen=True)
class ShellResult:
    """What one command printed (stdout and stderr interleaved), cut at the shell's ``max_bytes``."""

    output: bytes
    exit_code: int | None
    """None when the command was stopped or the shell ended."""
    timed_out: bool = False
    restarted: bool = False
    """The shell ended (``exit``, killed) or had to be replaced: a new one runs as root in /root."""
    dropped_bytes: int = 0


def encode_command(command: str) -> bytes:
    """The line that makes the shell run ``command`` as if typed, whatever characters it contains."""
    escaped = "".join(chr(byte) if byte in _SAFE else f"\\{byte:03o}" for byte in command.encode("utf-8"))
    # `%` would be a printf directive and `\` an escape: both are outside _SAFE, so they arrive as octal escapes.
    return f"eval \"$(printf '{escaped}')\"\n".encode()


class PersistentShell:
    """One ``bash --login`` in a container, driven over an attached exec. Not thread-safe: its episode serialises
    calls."""

    def __init__(self, client: Any, container_id: str, *, max_bytes: int = 64 * 1024) -> None:
        self.client = client
        self.container_id = container_id
        self.max_bytes = max_bytes
        self._reader: FrameReader | None = None
        self._marker = ""
        self._shell_pid = 0  # pid (in the container) of the shell that printed the last sentinel
        self._leftover = b""
        self._start()

    # -- lifetime -----------------------------------------------------------------------------------------------

    def _start(self) -> None:
        self._marker = secrets.token_hex(8)
        try:
            exec_id = self.client.api.exec_create(
                self.container_id, ["/usr/bin/bash", "-c", "exec /usr/bin/bash --login 2>&1"], stdin=True, stdout=True,
                stderr=True, tty=False, user="root", workdir="/root", environment={MARKER_VARIABLE: self._marker})["Id"]
            response = self.client.api.exec_start(exec_id, socket=True)
        except Exception as exc:
            raise ShellUnavailable(f"could not start the shell: {exc}") from exc
        self._reader = FrameReader(HijackedSocket(response))  # it keeps the response alive
        self._leftover = b""
        result = self._wait(self._sentinel(), time.monotonic() + 30)
        if result is None:
            raise ShellUnavailable("the shell did not start within 30 seconds")

    def close(self) -> None:
        """Drop the connection (the container's removal ends the shell itself)."""
        if self._reader is not None:
            with contextlib.suppress(OSError):
                self._reader.sock.close()
            self._reader = None

    # -- commands -----------------------------------------------------------------------------------------------

    def run(self, command: str, timeout: float) -> ShellResult:
        """Run ``command`` in the shell and return its output once it ends, or once ``timeout`` seconds pass (then
        it is stopped and ``timed_out`` is set)."""
        if self._reader is None:
            raise ShellUnavailable("the shell is closed")
        started = time.monotonic()
        self._send(encode_command(command))
        collected = _Output(self.max_bytes, self._leftover)
        self._leftover = b""
        nonces = {self._sentinel()}
        deadline, poll = started + timeout, started + _FIRST_POLL
        while True:
            end = self._wait(nonces, min(deadline, poll), collected)
            if end is not None:
                return ShellResult(collected.text(), end, dropped_bytes=collected.dropped)
            if self._reader is None or self._reader.eof:
                self._restart()
                return ShellResult(collected.text(), None, restarted=True, dropped_bytes=collected.dropped)
            if time.monotonic() >= deadline:
                break
            # A command that read its input (`read`, a password prompt) may have eaten the sentinel and ended: the
            # shell then waits for more input with nothing of the command left running.
            if self._idle(time.monotonic() - started):
                nonces.add(self._sentinel())
            poll = time.monotonic() + _POLL_EVERY
        self._interrupt(time.monotonic() - started)
        end = self._wait({self._sentinel()}, time.monotonic() + 3, collected)
        if end is None:
            self._restart()
        return ShellResult(collected.text(), None, timed_out=True, restarted=end is None,
                           dropped_bytes=collected.dropped)

    def _send(self, data: bytes) -> None:
        assert self._reader is not None
        try:
            self._reader.sock.sendall(data)
        except OSError:
            self._reader.eof = True

    def _sentinel(self) -> str:
        nonce = secrets.token_hex(8)
        self._send(f"printf '\\036%s %s %s\\036\\n' {nonce} \"$?\" \"$$\"\n".encode())
        return nonce

    def _wait(self, nonces: set[str] | str, deadline: float, collected: _Output | None = None) -> int | None:
        """Read until one of the sentinels ``nonces`` arrives (returns the exit status it carries) or the deadline
        passes or the stream ends (returns None)."""
        nonces = {nonces} if isinstance(nonces, str) else nonces
        collected = collected if collected is not None else _Output(0)
        reader = self._reader
        while reader is not None and not reader.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            for _, payload in reader.read(min(left, 1.0)):
                found = collected.feed(payload, nonces)
                if found is not None:
                    status, pid, self._leftover = found
                    self._shell_pid = pid
                    return status
        return None

    # -- stopping -----------------------------------------------------------------------------------------------

    def _processes(self) -> tuple[float, dict[int, tuple[int, float, bool]]]:
        """The container's uptime clock and, per pid: (parent pid, start time on that clock, carries the shell's
        marker). The listing's own process is left out."""
        script = ('cat /proc/uptime; for d in /proc/[0-9]*; do [ "${d#/proc/}" = "$$" ] && continue; '
                  's=$(cat "$d/stat" 2>/dev/null) || continue; '
                  'if grep -qxz "$1=$2" "$d/environ" 2>/dev/null; then m=1; else m=0; fi; echo "$m $s"; done')
        result = run_exec(self.client, self.container_id,
                          ["/usr/bin/sh", "-c", script, "sh", MARKER_VARIABLE, self._marker], timeout=10,
                          environment={"PATH": SYSTEM_PATH})
        lines = result.stdout.decode("utf-8", "replace").splitlines()
        if not lines:
            raise ShellUnavailable("could not list the container's processes")
        uptime = float(lines[0].split()[0])
        table: dict[int, tuple[int, float, bool]] = {}
        for line in lines[1:]:
            marked, _, stat = line.partition(" ")
            pid, _, rest = stat.partition(" ")
            fields = rest[rest.rfind(")") + 2:].split()
            if pid.isdigit() and len(fields) > 19:
                table[int(pid)] = (int(fields[1]), int(fields[19]) / _CLOCK_TICKS, marked == "1")
        return uptime, table

    def _kill(self, pids: set[int]) -> None:
        pids.discard(1)
        if pids:
            run_exec(self.client, self.container_id, ["/usr/bin/kill", "-9", *map(str, sorted(pids))], timeout=10,
                     environment={"PATH": SYSTEM_PATH})

    def _idle(self, elapsed: float) -> bool:
        """Whether nothing the current command started is still running."""
        try:
            uptime, table = self._processes()
        except Exception:
            return False
        since = uptime - elapsed - 0.5
        return self._shell_pid in table and not any(
            table[pid][1] >= since for pid in _descendants(table, self._shell_pid))

    def _interrupt(self, elapsed: float) -> None:
        """Kill what the current shell started since the command began (its later descendants)."""
        with contextlib.suppress(Exception):
            uptime, table = self._processes()
            since = uptime - elapsed - 0.5
            self._kill({pid for pid in _descendants(table, self._shell_pid) if table[pid][1] >= since})

    def _restart(self) -> None:
        """Kill the whole shell (everything that carries its marker, and their descendants) and start a new one."""
        with contextlib.suppress(Exception):
            _, table = self._processes()
            roots = {pid for pid, (_, _, marked) in table.items() if marked}
            victims = set(roots)
            for root in roots:
                victims |= _descendants(table, root)
            self._kill(victims)
        self.close()
        self._start()


def _descendants(table: dict[int, tuple[int, float, bool]], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


class _Output:
    """A command's output as it streams in: stores up to ``limit`` bytes, counts the rest, and finds sentinels
    (dropping stale ones, from commands that were stopped, wherever they appear)."""

    def __init__(self, limit: int, initial: bytes = b"") -> None:
        self.limit = limit
        self.stored = bytearray()
        self.dropped = 0
        self._pending = bytearray(initial)

    def feed(self, chunk: bytes, nonces: set[str]) -> tuple[int, int, bytes] | None:
        """Add ``chunk``; when one of the sentinels ``nonces`` is complete, return (status, shell pid, the bytes
        after it)."""
        self._pending += chunk
        while (found := _MARKER.search(self._pending)) is not None:
            self._commit(self._pending[:found.start()])
            rest = bytes(self._pending[found.end():])
            self._pending = bytearray(rest)
            if found.group(1).decode() in nonces:
                self._pending = bytearray()
                return int(found.group(2)), int(found.group(3)), rest
        if len(self._pending) > _HOLD_BACK:
            self._commit(self._pending[:-_HOLD_BACK])
            del self._pending[:-_HOLD_BACK]
        return None

    def _commit(self, data: bytes | bytearray) -> None:
        room = max(self.limit - len(self.stored), 0)
        self.stored += data[:room]
        self.dropped += max(len(data) - room, 0)

    def text(self) -> bytes:
        """Everything received so far that is not a sentinel (held-back bytes included)."""
        self._commit(self._pending)
        self._pending = bytearray()
        return bytes(self.stored)
