"""Low-level Docker plumbing for the task containers: multiplexed attach streams and one-off execs with a deadline.

Docker's ``exec_run`` waits for the process's output streams to close, and a hung process holds them forever.
``run_exec`` instead reads until its deadline, then kills what is left of it. Once the process has exited it reads on
until the stream ends: the engine records the exit before it has copied all the output, and closes the stream at most
about 2 s after the exit even when a background child still holds it open (several tasks' init scripts leave one).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

from ecdysis.sandbox.hijack import FrameReader, HijackedSocket

_STREAM_DRAIN_S = 3.0
"""How long to read on after the process exited: the engine ends the stream within about 2 s of the exit."""


@dataclass(frozen=True)
class ExecResult:
    """What a one-off exec produced. ``exit_code`` is None when it ran past its deadline (and was killed)."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    truncated: bool = False

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None


def run_exec(client: Any, container_id: str, cmd: list[str], *, timeout: float, workdir: str = "/root",
             environment: dict[str, str] | None = None, max_bytes: int = 1 << 20) -> ExecResult:
    """Run ``cmd`` in the container as root and wait at most ``timeout`` seconds (then kill it and everything it
    started); keeps at most ``max_bytes`` of each stream. Raises docker errors (the container or the daemon is
    gone): callers decide what they mean."""
    # A marker in the environment finds the exec's processes from inside the container, where its host pid means
    # nothing; unlike a wrapper process (`timeout`), it leaves the process table as upstream's grader sees it.
    marker = secrets.token_hex(8)
    exec_id = client.api.exec_create(container_id, cmd, stdout=True, stderr=True, stdin=False, tty=False,
                                     user="root", workdir=workdir,
                                     environment={**(environment or {}), MARKER_VARIABLE: marker})["Id"]
    response = client.api.exec_start(exec_id, socket=True)
    sock = HijackedSocket(response)
    reader = FrameReader(sock)
    out, err = bytearray(), bytearray()
    truncated = False
    deadline = time.monotonic() + timeout
    exited = False
    try:
        while not reader.eof:
            now = time.monotonic()
            if now >= deadline:
                break
            for stream, payload in reader.read(min(0.2, deadline - now)):
                buffer = out if stream == 1 else err
                room = max_bytes - len(buffer)
                truncated |= len(payload) > room
                buffer += payload[:max(room, 0)]
            if not reader.eof and not exited and exec_finished(client.api.exec_inspect(exec_id)):
                exited, deadline = True, time.monotonic() + _STREAM_DRAIN_S
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    info = client.api.exec_inspect(exec_id)
    if not exec_finished(info):
        kill_marked(client, container_id, marker)
        return ExecResult(None, bytes(out), bytes(err), truncated)
    return ExecResult(int(info["ExitCode"]), bytes(out), bytes(err), truncated)


def exec_finished(info: dict[str, Any]) -> bool:
    """Whether an exec, as ``exec_inspect`` describes it, has run and exited.

    Not running is not enough: the engine answers ``exec_start`` before it starts the process, and until then the
    exec reads as not running with no exit code."""
    return not info.get("Running") and info.get("ExitCode") is not None


MARKER_VARIABLE = "ECDYSIS_EXEC"
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH of the trusted side's own helper commands in a task container (given by absolute path as well): nothing
the agent installs elsewhere, in /usr/local/sbin say, is found first."""


def kill_marked(client: Any, container_id: str, marker: str) -> None:
    """SIGKILL every process in the container whose environment carries ``marker`` (an exec and its children)."""
    script = ('for p in /proc/[0-9]*; do grep -qxz "$1=$2" "$p/environ" 2>/dev/null && kill -9 "${p#/proc/}"; '
              'done 2>/dev/null; exit 0')
    with contextlib.suppress(Exception):
        exec_id = client.api.exec_create(container_id, ["/usr/bin/sh", "-c", script, "sh", MARKER_VARIABLE, marker],
                                         user="root", environment={"PATH": SYSTEM_PATH})["Id"]
        client.api.exec_start(exec_id)
