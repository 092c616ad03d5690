"""A real S3-compatible HTTP server on loopback (moto), for tests and offline demos of the S3 backend.

Needs the ``moto[server]`` extra (a dev dependency). Example::

    with moto_s3_server() as endpoint:
        os.environ["ECDYSIS_S3_ENDPOINT_URL"] = endpoint
        ...
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import IO

from ecdysis.testing.processes import stop_process

START_TIMEOUT_S = 60.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def moto_s3_server(host: str = "127.0.0.1") -> Iterator[str]:
    """Run ``python -m moto.server`` on a free loopback port; yields its endpoint URL; stops it on exit."""
    port = free_port(host)
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_listening(proc, host, port, log)
            yield f"http://{host}:{port}"
        finally:
            stop_process(proc)


def _wait_listening(proc: subprocess.Popen[bytes], host: str, port: int, log: IO[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"moto server exited with {proc.returncode}: {log.read().decode(errors='replace')}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"moto server did not listen on {host}:{port} within {START_TIMEOUT_S:.0f}s")


TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""Fake credentials moto accepts."""


@contextlib.contextmanager
def s3_environment(endpoint: str) -> Iterator[None]:
    """``ECDYSIS_S3_ENDPOINT_URL`` set to ``endpoint`` and the fake credentials exported while the block runs, so
    child processes and Ray workers reach it too; the previous environment is restored on exit."""
    import os

    env = {**TEST_CREDENTIALS, "ECDYSIS_S3_ENDPOINT_URL": endpoint}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def moto_s3_environment() -> Iterator[str]:
    """A moto S3 server, its endpoint and fake credentials exported while it runs (:func:`s3_environment`)."""
    with moto_s3_server() as endpoint, s3_environment(endpoint):
        yield endpoint


def create_bucket(endpoint: str, prefix: str = "t") -> str:
    """A fresh, empty bucket on the server at ``endpoint``; returns its name."""
    import uuid

    import boto3

    bucket = f"{prefix}-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return bucket
