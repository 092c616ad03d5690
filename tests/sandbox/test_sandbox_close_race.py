"""A process sandbox's close on a busy machine: killed processes take longer to finish dying, and the uid goes back
to the pool only once the kernel counts none left (else it is quarantined, never reused)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import Episode, assert_gone

from ecdysis.records import TerminationReason
from ecdysis.sandbox.uids import lease_uid, quarantine_marker

pytestmark = pytest.mark.sandbox

SYS_EXIT = {"x86_64": 60, "aarch64": 93}


@pytest.fixture
def cpu_burners() -> Iterator[None]:
    """Busy loops on every core for the test's duration (a `make test` on a small machine)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait(timeout=10)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the allow-list process sandbox runs only as root (run "
                                              "the tests as root)")
@pytest.mark.parametrize("kind", ["process"])
def test_children_started_while_the_sandbox_closes_are_gone_under_cpu_load(episode: Episode, limited_backend: object,
                                                                           cpu_burners: None) -> None:
    """Many processes are dying when the close starts, and the machine's cores are busy: the close still outwaits
    every one before the uid goes back (several episodes, since the timing varies)."""
    churns = [("attacks", {"attack": "fork_churn"}, {"churning": True}),
              ("secrets", {"churn": 4, "megabytes": 16}, {"churning": 4})] * 3
    for bundle, config, expected in churns:
        outcome, sandbox = episode(bundle, config=config)
        assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
        report = [json.loads(e["params"]["text"]) for e in outcome.events if e["kind"] == "log"]
        assert report == [expected]
        assert_gone(sandbox)
        assert sandbox.lease is not None and not sandbox.lease.held  # released (nothing survived), not quarantined
        assert not quarantine_marker(sandbox.lease._folder, sandbox.uid).exists()


def test_a_quarantined_uid_is_never_leased_again(tmp_path: Path) -> None:
    lease = lease_uid((650_000, 650_002), lock_dir=tmp_path)
    kept = lease.uid
    lease.quarantine()
    assert (tmp_path / f"{kept}.quarantined").exists() and not lease.held
    for _ in range(5):
        other = lease_uid((650_000, 650_002), lock_dir=tmp_path)
        assert other.uid == (650_000 if kept == 650_001 else 650_001)
        other.release()
    # Another process (a new rollout worker, its lock free) skips the uid too.
    done = subprocess.run([sys.executable, "-c", "import pathlib, sys; from ecdysis.sandbox.uids import lease_uid; "
                           f"print(lease_uid((650_000, 650_002), lock_dir=pathlib.Path({str(tmp_path)!r})).uid)"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert int(done.stdout) != kept


def test_a_process_whose_first_thread_ended_still_counts_as_alive() -> None:
    """Its /proc status says zombie while another thread runs on as its uid: the close must not take it for dead."""
    from ecdysis.sandbox.procfs import live_uid, processes_of

    program = ("import ctypes, os, sys, threading\n"
               "threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0))).start()\n"
               "print(os.getpid(), flush=True)\n"
               f"ctypes.CDLL(None).syscall({SYS_EXIT[platform.machine()]}, 0)  # exit this thread only\n")
    process = subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    try:
        assert process.stdout is not None
        pid = int(process.stdout.readline())
        deadline = time.monotonic() + 10
        while b"Z (zombie)" not in Path(f"/proc/{pid}/status").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b"Z (zombie)" in Path(f"/proc/{pid}/status").read_bytes()
        assert live_uid(pid) == os.getuid() and pid in processes_of(os.getuid())
    finally:
        process.communicate(input="", timeout=10)
    assert live_uid(pid) is None
