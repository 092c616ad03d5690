"""Stopping the servers the testing kit starts as child processes."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str], timeout_s: float = 10.0) -> None:
    """Terminate ``proc`` and wait for it; kill it if it has not exited within ``timeout_s``."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
