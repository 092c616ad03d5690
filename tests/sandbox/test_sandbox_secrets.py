"""The process sandbox holds no host secret and shares no keyring: a provider key in the host's environment is in no
process a harness can see, and a key one sandbox writes to a keyring reaches neither the next sandbox nor the host's
session keyring (an ssh login with pam_keyinit, or a systemd service, gives the host one; the test makes its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import BUNDLES, Episode, assert_gone, limits_config

from ecdysis.records import TerminationReason
from ecdysis.sandbox import bundle_hash, make_backend, run_protocol
from ecdysis.sandbox.spawner import spawner
from tests.keyring_support import ENOKEY, join_host_session_keyring, search_session

pytestmark = pytest.mark.sandbox

CANARY = "sk-test-secret-ecdysis-7c41"
HOST_KEY = "ecdysis-host-key"
EPERM = "errno 1"
NO_KEY = f"errno {ENOKEY}"
SECRETS = {"OPENAI_API_KEY": CANARY, "ANTHROPIC_API_KEY": CANARY, "AWS_SECRET_ACCESS_KEY": CANARY}


@pytest.fixture
def host_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Provider keys in the host's environment, and a host session keyring holding a key."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    keyring = join_host_session_keyring(HOST_KEY, CANARY.encode())
    if keyring < 0:
        pytest.skip(f"needs a session keyring, which this kernel or container refuses (errno {-keyring}): run on a "
                    "host whose seccomp profile allows keyctl")
    assert search_session(HOST_KEY) > 0  # the host can find its key: the "not found" checks below can fail


def report(outcome: Any) -> dict[str, Any]:
    (text,) = [event["params"]["text"] for event in outcome.events if event["kind"] == "log"]
    return dict(json.loads(text))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the allow-list process sandbox runs only as root (run "
                                              "the tests as root)")
@pytest.mark.parametrize("kind", ["process"])
def test_no_host_secret_and_no_keyring_reach_a_process_sandbox(episode: Episode, host_secrets: None) -> None:
    base = {"canary_hex": CANARY.encode().hex(), "key_payload": "written-by-a"}
    first, sandbox1 = episode("secrets", config={**base, "write": ["ecdysis-sandbox-a"], "look_for": [HOST_KEY]})
    second, sandbox2 = episode("secrets", config={**base, "look_for": ["ecdysis-sandbox-a", HOST_KEY]})
    for outcome in (first, second):
        assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    one, two = report(first), report(second)
    for seen in (one, two):
        assert seen["found"] == [], seen
        assert "1/environ" in seen["readable"] and "1/cmdline" in seen["readable"], seen  # the scan could read
        assert seen["pid"] == 1  # the runtime is the sandbox's init: no process of it holds bubblewrap's environment
        assert seen["keyrings"]["session_id"] == EPERM, seen
        assert seen["keyrings"]["proc_keys_names"] == [], seen
    assert one["keyrings"]["add ecdysis-sandbox-a @s"] == one["keyrings"]["add ecdysis-sandbox-a @u"] == EPERM
    assert set(one["keyrings"]["search"].values()) == set(two["keyrings"]["search"].values()) == {EPERM}
    assert search_session("ecdysis-sandbox-a") == -ENOKEY
    assert_gone(sandbox1)
    assert_gone(sandbox2)


def test_each_child_of_the_spawner_has_its_own_empty_session_keyring(host_secrets: None, tmp_path: Path) -> None:
    """The other defence, without the seccomp filter: a child (here as root, keyring calls allowed) adds a key to its
    session keyring; the next child and the host do not find it, and no child finds the host's key."""
    program = str(BUNDLES / "secrets" / "harness.py")

    def child(config: dict[str, Any]) -> dict[str, Any]:
        process = spawner().spawn([sys.executable, "-I", "-S", program, json.dumps(config)], stdout=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
        out, _ = process.communicate(timeout=30)
        return dict(json.loads(out.decode().removeprefix("PROBE"))["keyrings"])

    base = {"canary_hex": CANARY.encode().hex(), "key_payload": "written-by-a", "write_to": ["@s"]}
    one = child({**base, "write": ["ecdysis-child-a"], "look_for": [HOST_KEY]})
    two = child({**base, "look_for": ["ecdysis-child-a", HOST_KEY]})
    assert isinstance(one["add ecdysis-child-a @s"], int), one  # the write itself worked
    assert one["search"][f"{HOST_KEY} @s"] == NO_KEY, one
    assert two["search"]["ecdysis-child-a @s"] == two["search"][f"{HOST_KEY} @s"] == NO_KEY, two
    assert isinstance(one["session_id"], int) and isinstance(two["session_id"], int)
    assert one["session_id"] != two["session_id"]
    assert search_session("ecdysis-child-a") == -ENOKEY


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a weak sandbox gets its own uid only from root (run the "
                                              "tests as root)")
def test_no_keyring_reaches_a_weak_process_sandbox(host_secrets: None) -> None:
    """A weak sandbox has the host's user namespace, where a uid's user keyring outlives its processes: the filter
    keeps a sandbox from writing one that the next sandbox given the same uid would read."""
    backend = make_backend(limits_config("process", isolation="weak"))
    try:
        base = {"canary_hex": CANARY.encode().hex(), "key_payload": "written-by-a"}
        seen = []
        for config in ({**base, "write": ["ecdysis-weak-a"], "look_for": [HOST_KEY]},
                       {**base, "look_for": ["ecdysis-weak-a", HOST_KEY]}):
            sandbox = backend.acquire(BUNDLES / "secrets", bundle_hash(BUNDLES / "secrets"))
            start = {"mode": "episode", "session": {"episode_id": uuid.uuid4().hex, "config": config}}
            outcome = run_protocol(sandbox, start, {}, wall_clock_s=30, max_requests=5)
            assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
            seen.append(report(outcome))
            assert_gone(sandbox)
    finally:
        backend.shutdown()
    for found in seen:
        assert found["found"] == [], found
        assert found["keyrings"]["session_id"] == EPERM, found
        assert set(found["keyrings"]["search"].values()) == {EPERM}, found
    assert seen[0]["keyrings"]["add ecdysis-weak-a @s"] == seen[0]["keyrings"]["add ecdysis-weak-a @u"] == EPERM
