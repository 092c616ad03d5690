"""An S3 endpoint that stops answering mid-run (a paused or restarting server) is waited out with a warning, and the
writes made during the outage land exactly once; one that stays down past ``ECDYSIS_S3_OUTAGE_S`` raises."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from ecdysis.store import ArtifactStore, EndpointUnreachableError, open_backend, s3
from tests.services.s3 import TEST_CREDENTIALS, create_bucket, free_port

pytestmark = pytest.mark.s3


@pytest.fixture
def moto_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Our own moto server, so the test can freeze it (SIGSTOP, what ``docker pause`` does to a container)."""
    import urllib.request

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            break
        except Exception:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise
            time.sleep(0.2)
    for key, value in TEST_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ECDYSIS_S3_ENDPOINT_URL", endpoint)
    try:
        yield proc, endpoint
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(timeout=10)


def test_a_paused_endpoint_is_waited_out_and_nothing_is_lost_or_doubled(
        moto_process: tuple[subprocess.Popen[bytes], str], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    proc, endpoint = moto_process
    monkeypatch.setenv("ECDYSIS_S3_OUTAGE_S", "60")
    # Take the server for out after 2 s without an answer (10 s, twice, in production), so 8 s is an outage.
    monkeypatch.setattr(s3, "READ_TIMEOUT_S", 2)
    monkeypatch.setattr(s3, "MAX_ATTEMPTS", 1)
    store = ArtifactStore(f"s3://{create_bucket(endpoint)}/runs")
    store.put_object("ns", "before", b"1")
    done: list[float] = []

    def write_during_the_outage() -> None:
        for i in range(3):
            store.put_object("ns", f"during-{i}", str(i).encode())
        done.append(time.monotonic())

    os.kill(proc.pid, signal.SIGSTOP)
    paused_at = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="ecdysis.store.s3"):
        writer = threading.Thread(target=write_during_the_outage)
        writer.start()
        time.sleep(8)
        assert not done, "a write finished while the server was frozen"
        os.kill(proc.pid, signal.SIGCONT)
        writer.join(timeout=90)
    assert done and done[0] - paused_at >= 8
    assert "is not answering" in caplog.text and "waiting up to 60 s" in caplog.text
    assert "answers again after" in caplog.text
    listed = open_backend(store.uri).list("objects/ns/")
    assert listed == ["objects/ns/before", "objects/ns/during-0", "objects/ns/during-1", "objects/ns/during-2"]
    assert [store.get_object("ns", f"during-{i}") for i in range(3)] == [b"0", b"1", b"2"]


def test_an_outage_longer_than_the_limit_raises_naming_the_endpoint(
        moto_process: tuple[subprocess.Popen[bytes], str], monkeypatch: pytest.MonkeyPatch) -> None:
    proc, endpoint = moto_process
    monkeypatch.setenv("ECDYSIS_S3_OUTAGE_S", "3")
    monkeypatch.setattr(s3, "READ_TIMEOUT_S", 1)
    monkeypatch.setattr(s3, "MAX_ATTEMPTS", 1)
    store = ArtifactStore(f"s3://{create_bucket(endpoint)}/runs")
    os.kill(proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    with pytest.raises(EndpointUnreachableError, match=r"127\.0\.0\.1.*unreachable"):
        store.put_object("ns", "k", b"v")
    assert time.monotonic() - started < 60
