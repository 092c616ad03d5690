"""Warm rollout workers on a standing Ray cluster, through the real CLI in separate processes: a second command with
the same settings runs in the first one's workers; other settings get their own; an idle warm worker ends itself
after ``--keep-warm-s``; ``ecdysis workers stop`` ends the rest; a command on a Ray it started keeps nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from integration_support import GOLD, USER, requests_for

from ecdysis.rollouts import RolloutPool, RolloutSettings
from ecdysis.rollouts.warm import NAMESPACE, warm_workers
from ecdysis.store import ArtifactStore
from tests.services.standing_ray import StandingRay

pytestmark = pytest.mark.slow

ECDYSIS = str(Path(sys.executable).with_name("ecdysis"))


def _cli(cluster: StandingRay, *args: str) -> str:
    done = subprocess.run([ECDYSIS, *args], capture_output=True, text=True, timeout=240, env=cluster.environment())
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _eval(cluster: StandingRay, store: Path, *extra: str) -> None:
    output = _cli(cluster, "eval", "--harness", "human", "--model", GOLD, "--user-model", USER, "--task-id", "7",
                  "--trials", "2", "--sandbox", "process", "--workers", "2", "--store", str(store), "--ray-address",
                  cluster.address, *extra)
    row = next(line for line in output.splitlines() if re.match(r"^[│|]\s*human\s*[│|]", line))
    assert float([c.strip() for c in re.split(r"[│|]", row) if c.strip()][3]) == 1.0, output


def _workers(cluster: StandingRay) -> dict[str, tuple[int, int]]:
    """Warm worker name → (pid, episodes run), from ``ecdysis workers list``."""
    output = _cli(cluster, "workers", "list", "--ray-address", cluster.address)
    found = {}
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│|]", line) if c.strip()]
        if cells and cells[0].startswith("ecdysis-rollout-"):
            found[cells[0]] = (int(cells[1]), int(cells[3]))
    return found


def _ended(pid: int, within_s: float = 30.0) -> bool:
    """Whether process ``pid`` is gone within ``within_s`` (Ray kills an actor's process asynchronously)."""
    deadline = time.monotonic() + within_s
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_warm_workers_serve_the_next_command_and_end_when_idle_or_stopped(tmp_path: Path) -> None:
    """Warm workers serve the next command with the same settings, other settings get their own, idle ones end and
    ``workers stop`` ends them; then, on the same cluster, two commands at once share the one warm worker in turn."""
    store = tmp_path / "runs"
    with StandingRay(num_cpus=2) as cluster:
        _eval(cluster, store, "--concurrency", "2")
        first = _workers(cluster)
        assert len(first) == 2 and sum(episodes for _, episodes in first.values()) == 2

        _eval(cluster, store, "--concurrency", "2")
        second = _workers(cluster)
        assert {name: pid for name, (pid, _) in second.items()} == {name: pid for name, (pid, _) in first.items()}
        assert sum(episodes for _, episodes in second.values()) == 4  # the same processes ran the new episodes

        # Other settings get workers of their own (the first ones run no more episodes), kept for 1 s only.
        _eval(cluster, store, "--concurrency", "4", "--keep-warm-s", "1")
        deadline = time.monotonic() + 60
        while (left := _workers(cluster)) != second and time.monotonic() < deadline:
            time.sleep(1)
        assert left == second, "the workers kept for 1 s did not end, or the first ones ran other settings' episodes"

        assert "stopped 2 warm rollout workers" in _cli(cluster, "workers", "stop", "--ray-address", cluster.address)
        assert "no warm rollout workers" in _cli(cluster, "workers", "list", "--ray-address", cluster.address)
        pids = [pid for pid, _ in second.values()]

        _one_command_at_a_time(cluster, tmp_path / "claims")
    assert all(_ended(pid) for pid in pids), "a warm worker outlived its cluster"


CONCURRENT = """
import json, sys
from ecdysis.ray_env import ensure_ray
ensure_ray(sys.argv[1])
from integration_support import GOLD, requests_for
from ecdysis.rollouts import RolloutPool, RolloutSettings
from ecdysis.store import ArtifactStore
store = ArtifactStore(sys.argv[2])
settings = RolloutSettings(store_uri=store.uri, sandbox={"type": "process"}, workers=1, keep_warm_s=60)
[request] = requests_for(store, model=GOLD, trials=1, run_id="claims", settings=settings, task_ids=["7"])
def run(pool):
    [trajectory] = pool.evaluate([request])
    workers = pool.describe_workers()
    return {"pids": [w["pid"] for w in workers], "claimed": [w["claimed"] for w in workers],
            "reward": trajectory.reward}
first = RolloutPool(settings, store=store)
second = RolloutPool(settings, store=store)  # while the first is open: same settings, another command
seen = {"first": run(first), "second": run(second)}
second.close()
first.close()
third = RolloutPool(settings, store=store)
seen["third"] = run(third)
third.close()
print(json.dumps(seen))
"""


def _one_command_at_a_time(cluster: StandingRay, store: Path) -> None:
    """Two pools with the same settings open at once (two commands): one holds the warm worker, the other gets a
    worker of its own, which ends with it; the warm worker serves the next pool once its holder closed. Runs on a
    cluster with no warm worker left (the standing cluster's start is the slow part: one for both checks)."""
    folder = str(Path(__file__).parent)
    done = subprocess.run([sys.executable, "-c", CONCURRENT, cluster.address, str(store)],
                          capture_output=True, text=True, timeout=300,
                          env={**cluster.environment(), "PYTHONPATH": folder})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert [seen[name]["reward"] for name in ("first", "second", "third")] == [1.0, 1.0, 1.0]
    # Which of the two claimed the warm worker first is Ray's scheduling; exactly one did.
    [warm] = [name for name in ("first", "second") if seen[name]["claimed"] == [True]]
    [other] = [name for name in ("first", "second") if seen[name]["claimed"] == [False]]
    assert seen[warm]["pids"] != seen[other]["pids"]
    assert seen["third"]["pids"] == seen[warm]["pids"]
    assert _ended(seen[other]["pids"][0]), "the other command's own worker outlived it"
    assert len(_workers(cluster)) == 1


def test_a_ray_this_process_started_keeps_no_workers(local_ray: dict[str, Any], tmp_path: Path) -> None:
    """Warm workers are for a cluster that outlives the command: on a Ray this process started, the pool's workers
    end with it, as before, whatever keep_warm_s says."""
    import ray

    from ecdysis.ray_env import joined_cluster

    assert not joined_cluster()  # also after a module that joined a cluster (test_multinode runs before this one)
    store = ArtifactStore(str(tmp_path / "runs"))
    settings = RolloutSettings(store_uri=store.uri, sandbox={"type": "process"}, workers=1, keep_warm_s=300)
    [request] = requests_for(store, model=GOLD, trials=1, run_id="not-warm", settings=settings, task_ids=["7"])
    pool = RolloutPool(settings, store=store)
    try:
        [trajectory] = pool.evaluate([request])
    finally:
        pool.close()
    assert trajectory.reward == 1.0
    assert warm_workers() == []
    assert not [a for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == NAMESPACE]
