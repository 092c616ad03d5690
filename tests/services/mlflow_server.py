"""A real MLflow tracking server on loopback (``mlflow server``, SQLite backend, local artifacts) for tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    """A TCP port nobody listens on right now (loopback)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def mlflow_server(root: Path, *, start_timeout_s: float = 120.0) -> Iterator[str]:
    """Run ``mlflow server`` under ``root`` until the block ends; yields its ``http://127.0.0.1:PORT`` URI."""
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    mlflow = str(Path(sys.executable).with_name("mlflow"))
    log = (root / "server.log").open("w")
    proc = subprocess.Popen(
        [mlflow, "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}", "--artifacts-destination",
         str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {proc.returncode}: {(root / 'server.log').read_text()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{uri}/health", timeout=2) as reply:
                if reply.status == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not answer in {start_timeout_s} s")
            time.sleep(0.5)
        yield uri
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
