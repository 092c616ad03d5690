"""The latency server in its own process, so its CPU never counts as ours: ``python -m ecdysis.testing.latency``.

Example::

    with LatencyServer(latency_s=2.0) as server:
        gateway_models = server.gateway_models(["task-gold", "user"])   # GatewayConfig.models entries
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import IO, Any

from ecdysis.testing.stub_server import StubServer
from ecdysis.testing.tau2_replies import known_tasks

REPLY = "ecdysis.testing.tau2_replies:reply"
MODELS = ("task-gold", "task-repeat", "task-quirky", "user", "diagnoser", "aggregator", "coder", "opencode-coder",
          "aider-coder")


class LatencyServer:
    """A :class:`~ecdysis.testing.stub_server.StubServer` serving a reply router (default: τ²'s,
    :func:`ecdysis.testing.tau2_replies.reply`) in a child process."""

    def __init__(self, latency_s: float, *, reply: str = REPLY,
                 model_latency_s: dict[str, float] | None = None) -> None:
        self.latency_s = latency_s
        self.model_latency_s = dict(model_latency_s or {})
        self.reply = reply
        self.process: subprocess.Popen[str] | None = None
        self.port = 0
        self._log: IO[str] | None = None

    @property
    def api_base(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else -1

    def gateway_models(self, names: tuple[str, ...] = MODELS, *, max_concurrency: int = 256) -> dict[str, Any]:
        """``GatewayConfig.models`` entries routing ``openai/<name>`` to this server, with no client-side cap."""
        return {f"openai/{name}": {"api_base": self.api_base, "max_concurrency": max_concurrency} for name in names}

    def start(self) -> LatencyServer:
        per_model = [arg for name, seconds in sorted(self.model_latency_s.items())
                     for arg in ("--model-latency", f"{name}={seconds}")]
        self._log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (kept open while the server runs; closed in stop)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ecdysis.testing.latency", "--latency", str(self.latency_s), "--reply", self.reply,
             *per_model], stdout=subprocess.PIPE, stderr=self._log, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("port "):
            said = self.log_tail()
            self.stop()
            raise RuntimeError(f"latency server did not start (said {line!r}; its stderr: {said})")
        self.port = int(line.split()[1])
        return self

    def stats(self) -> dict[str, Any]:
        """The server's counters (:meth:`ecdysis.llm.StubServer.stats`)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as response:
            stats: dict[str, Any] = json.loads(response.read())
        return stats

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server's stderr: its start-up errors and the traceback of every connection that ended
        without a reply (what a client reports as "Connection error")."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read()[-chars:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LatencyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve until killed; the first stdout line is ``port <n>``."""
    parser = argparse.ArgumentParser(prog="python -m ecdysis.testing.latency")
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--reply", default=REPLY)
    parser.add_argument("--model-latency", action="append", default=[], metavar="MODEL=SECONDS",
                        help="latency of one model name (repeatable); others get --latency")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (a cluster's model server: 0.0.0.0)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: a free one)")
    args = parser.parse_args(argv)
    per_model = {name: float(seconds) for name, _, seconds in (item.partition("=") for item in args.model_latency)}
    if args.reply == REPLY:
        known_tasks("airline")  # build the task index before the first request
    server = StubServer(args.reply, latency_s=args.latency, model_latency_s=per_model, error_log=sys.stderr,
                        host=args.host, port=args.port).start()
    print(f"port {server.port}", flush=True)
    parent = os.getppid()
    try:
        while os.getppid() == parent:  # never outlive the benchmark that started it
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    server.stop()


if __name__ == "__main__":
    main()
