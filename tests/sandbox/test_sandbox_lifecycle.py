"""Warm pool, cleanup on every path, and backend shutdown, on both backends."""

from __future__ import annotations

import json
import time
from typing import Any

from sandbox_support import BUNDLES, Episode, assert_gone, limits_config, session_containers

from ecdysis.records import TerminationReason
from ecdysis.sandbox import make_backend

ATTACKS = BUNDLES / "attacks"


def test_warm_pool_reuses_nothing_between_episodes(kind: str, episode: Episode) -> None:
    from ecdysis.sandbox import bundle_hash

    backend = make_backend(limits_config(kind, warm_pool=1))
    try:
        if kind == "process" and not backend.private_tmp:  # type: ignore[attr-defined]
            import pytest

            pytest.skip("needs root: only a root-run process backend gives each sandbox its own /tmp (run the tests "
                        "as root)")
        digest = bundle_hash(ATTACKS)
        backend.prewarm(ATTACKS, digest)  # type: ignore[attr-defined]
        assert backend.wait_warm(digest, timeout=60)  # type: ignore[attr-defined]
        reports, places = [], []
        for _ in range(3):
            warm = backend.idle_count(digest)  # type: ignore[attr-defined]
            outcome, sandbox = episode(ATTACKS, config={"attack": "tmp_state"}, on=backend)
            assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
            assert_gone(sandbox)
            reports.append((warm, json.loads(outcome.events[0]["params"]["text"])))
            places.append(sandbox.container.id if kind == "docker" else sandbox.sandbox_id)
            assert backend.wait_warm(digest, timeout=60)  # type: ignore[attr-defined]
        assert [warm for warm, _ in reports] == [1, 1, 1]  # every episode was served from the pool
        assert [report["existed"] for _, report in reports] == [False, False, False]
        assert len(set(places)) == len(places), places  # each in a sandbox (a container) of its own
    finally:
        backend.shutdown()


def test_shutdown_closes_idle_and_busy_sandboxes(kind: str) -> None:
    from ecdysis.sandbox import bundle_hash

    backend = make_backend(limits_config(kind, warm_pool=1))
    digest = bundle_hash(ATTACKS)
    busy = backend.acquire(ATTACKS, digest)
    assert backend.wait_warm(digest, timeout=60)  # type: ignore[attr-defined]
    idle = list(backend._idle[digest])  # type: ignore[attr-defined]
    busy.send({"type": "start", "mode": "episode", "session": {"config": {"attack": "infinite_loop"}}})
    backend.shutdown()
    for sandbox in [busy, *idle]:
        assert_gone(sandbox)
    try:
        backend.acquire(ATTACKS, digest)
    except Exception as exc:
        assert "shut down" in str(exc)
    else:
        raise AssertionError("acquire after shutdown must fail")


def test_lifetime_watchdog_kills_an_abandoned_sandbox(kind: str) -> None:
    from ecdysis.sandbox import SandboxExited, bundle_hash

    backend = make_backend(limits_config(kind, wall_clock_s=1.0))
    try:
        sandbox = backend.acquire(ATTACKS, bundle_hash(ATTACKS))
        sandbox.send({"type": "start", "mode": "episode", "session": {"config": {"attack": "infinite_loop"}}})
        messages: list[Any] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                messages.append(sandbox.receive(1.0))
            except SandboxExited as exc:
                assert exc.timed_out, exc
                break
        else:
            raise AssertionError("the watchdog did not stop the sandbox")
        assert [m["params"]["text"] for m in messages if m is not None] == ["looping"]
        sandbox.close()  # waits for the watchdog's close to finish
        assert_gone(sandbox)
    finally:
        backend.shutdown()


def test_no_container_left_after_failures(kind: str, episode: Episode, limited_backend: Any) -> None:
    if kind != "docker":
        import pytest

        pytest.skip("containers exist only in the docker backend (process cleanup is checked by assert_gone)")
    episode("attacks", config={"attack": "infinite_loop"}, wall_clock_s=1)
    episode("attacks", config={"attack": "raw", "raw": "garbage\n"})
    # The runtime reports the harness's exception and exits 0: a clean end, so its container may wait for reuse.
    _, raised = episode("normal", config={"raise": True})
    idle = {holder.id for pool in limited_backend._containers.values() for holder in pool}
    assert {container["Id"] for container in session_containers()} <= idle
    assert raised.returned == (raised.container.id in idle)


def test_least_recently_used_pool_is_dropped(kind: str) -> None:
    from ecdysis.sandbox import bundle_hash

    backend = make_backend(limits_config(kind, warm_pool=1, warm_bundles=1))
    try:
        normal = BUNDLES / "normal"
        first, second = bundle_hash(ATTACKS), bundle_hash(normal)
        backend.prewarm(ATTACKS, first)  # type: ignore[attr-defined]
        assert backend.wait_warm(first, timeout=60)  # type: ignore[attr-defined]
        idle = list(backend._idle[first])  # type: ignore[attr-defined]
        sandbox = backend.acquire(normal, second)
        sandbox.close()
        assert backend.idle_count(first) == 0  # type: ignore[attr-defined]
        for stale in idle:
            assert_gone(stale)
    finally:
        backend.shutdown()


CRASHING_HOST = """
import sys
sys.path.insert(0, {support!r})
from sandbox_support import BUNDLES, limits_config
from ecdysis.sandbox import bundle_hash, make_backend
backend = make_backend(limits_config("docker"))
sandbox = backend.acquire(BUNDLES / "normal", bundle_hash(BUNDLES / "normal"))
print(sandbox.sandbox_id, flush=True)
import os
os._exit(1)  # dies without any cleanup, as a killed worker would
"""


def test_leftovers_of_a_crashed_host_process_are_removed(kind: str) -> None:
    import os
    import subprocess
    import sys

    import pytest

    if kind != "docker":
        pytest.skip("a process sandbox dies with its session; only containers can outlive their owner")
    from sandbox_support import docker_client

    support = os.path.dirname(os.path.abspath(__file__))
    script = CRASHING_HOST.format(support=support)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    sandbox_id = done.stdout.strip()
    assert sandbox_id, done.stderr
    client = docker_client()
    try:
        label = {"label": f"ecdysis.sandbox={sandbox_id}"}
        assert len(client.api.containers(all=True, filters=label)) == 1  # the crash left it behind
        backend = make_backend(limits_config("docker"))  # a new backend removes dead owners' containers first
        try:
            assert client.api.containers(all=True, filters=label) == []
            assert backend.cleanup_orphans() == 0
        finally:
            backend.shutdown()
    finally:
        client.close()


EXITING_HOST = """
import sys
sys.path.insert(0, {support!r})
from sandbox_support import BUNDLES, limits_config
from ecdysis.sandbox import bundle_hash, make_backend
backend = make_backend(limits_config({kind!r}, warm_pool=1))
sandbox = backend.acquire(BUNDLES / "normal", bundle_hash(BUNDLES / "normal"))
backend.wait_warm(bundle_hash(BUNDLES / "normal"), timeout=60)
idle = [s for pool in backend._idle.values() for s in pool]
assert idle, "the pool refilled"
print(getattr(sandbox, "uid", None), *(s.sandbox_id for s in [sandbox, *idle]), flush=True)
sys.exit(0)  # no shutdown(): the backend's atexit hook must clean up
"""


def test_interpreter_exit_cleans_up(kind: str) -> None:
    import os
    import subprocess
    import sys

    from sandbox_support import docker_client, processes_of

    support = os.path.dirname(os.path.abspath(__file__))
    script = EXITING_HOST.format(support=support, kind=kind)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    uid, *sandbox_ids = done.stdout.split()
    assert len(sandbox_ids) == 2  # one in use, one idle in the pool
    if kind == "docker":
        client = docker_client()
        try:
            for sandbox_id in sandbox_ids:
                assert client.api.containers(all=True, filters={"label": f"ecdysis.sandbox={sandbox_id}"}) == []
        finally:
            client.close()
    else:
        assert processes_of(int(uid)) == []
