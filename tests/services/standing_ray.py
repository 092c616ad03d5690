"""A Ray cluster that outlives the commands that join it, as users run one (``ray start --head``), on this machine.

Example::

    with StandingRay(num_cpus=2) as cluster:
        subprocess.run(["ecdysis", "eval", ..., "--ray-address", cluster.address], env=cluster.environment())
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ecdysis.ray_env import LOCAL_SYSTEM_CONFIG


class StandingRay:
    """``ray start --head --block`` in its own session, with its own token; ``stop`` ends every process of it,
    the worker processes included (they outlive their raylet by themselves)."""

    def __init__(self, num_cpus: int = 2, *, start_timeout_s: float = 120.0, attempts: int = 3) -> None:
        self.num_cpus = num_cpus
        self.start_timeout_s = start_timeout_s
        self.attempts = attempts
        self.token = secrets.token_hex(32)
        self.address = ""
        self._proc: subprocess.Popen[bytes] | None = None
        # Its own temporary folder: `ray start` writes the machine's "current cluster" file there, which a bare
        # `ray.init()` elsewhere would otherwise try to join after this cluster is gone.
        self._temp = Path(tempfile.mkdtemp(prefix="ecdysis-ray-"))
        self._log = self._temp / "head.log"

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with what a command needs to join: Ray's token."""
        return {**(os.environ if base is None else base), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}

    def start(self) -> StandingRay:
        """Start the head; a head that Ray's own 30 s node-registration wait (hard-coded in ``ray start``) gave up on,
        as it can on a busy 2-core host, is started again, up to ``attempts`` times in all."""
        for attempt in range(1, self.attempts + 1):
            try:
                return self._start_once()
            except _SlowNodeStart:
                if attempt == self.attempts:
                    raise
                self._temp.mkdir(parents=True, exist_ok=True)
        raise AssertionError("unreachable")

    def _start_once(self) -> StandingRay:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        ray = str(Path(sys.executable).with_name("ray"))
        command = [ray, "start", "--head", "--block", f"--port={port}", f"--num-cpus={self.num_cpus}",
                   "--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats",
                   f"--temp-dir={self._temp}",
                   f"--system-config={json.dumps(LOCAL_SYSTEM_CONFIG)}"]
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                          env=self.environment())
        deadline = time.monotonic() + self.start_timeout_s
        while "Ray runtime started" not in self._log.read_text(errors="replace"):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = self._log.read_text(errors="replace")[-3000:]
                self.stop()
                error = _SlowNodeStart if "timed out during startup" in tail else RuntimeError
                raise error(f"the standing Ray head did not start: {tail}")
            time.sleep(0.2)
        self.address = f"127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        """End the head and every worker process of its raylet."""
        if self._proc is not None:
            session = self._proc.pid
            raylets = {pid for pid in _session_pids(session) if b"raylet/raylet" in _read(pid, "cmdline")}
            victims = set(_session_pids(session))
            for pid in _pids():
                if any(f"RAY_RAYLET_PID={raylet}".encode() in _read(pid, "environ").split(b"\0") for raylet in raylets):
                    victims.add(pid)
            for pid in victims:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=30)
            self._proc = None
        shutil.rmtree(self._temp, ignore_errors=True)

    def __enter__(self) -> StandingRay:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _SlowNodeStart(RuntimeError):
    """``ray start`` gave up waiting for its own raylet to register (its 30 s limit), not a configuration error."""


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _read(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


def _session_pids(session: int) -> list[int]:
    """The processes of session ``session`` (the head's ``start_new_session``)."""
    found = []
    for pid in _pids():
        stat = _read(pid, "stat").decode(errors="replace")
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 3 and fields[3] == str(session):
            found.append(pid)
    return found
