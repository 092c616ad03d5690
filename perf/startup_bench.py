"""Start-up before the first episode of a run: a local Ray coming up, then rollout workers built (benchmarks loaded,
gateway and sandbox backend made) until the first episode runs.

Figures with different owners: ``ray_init_s`` is Ray's own start of a local cluster (GCS, raylet, worker pool), paid
by every command that starts one and by none that joins a running cluster (``--ray-address``);
``to_first_episode_s`` is ours, from asking for a rollout pool on a running Ray to the first episode's start. Then
two commands in fresh interpreters that join a standing cluster (``ray start --head``): the first starts the
workers, the second finds the warm workers the first one left (`ecdysis.rollouts.warm`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from typing import Any

RAY_INIT = """
import time
from ecdysis.ray_env import ensure_ray
started = time.perf_counter()
ensure_ray(num_cpus=2)
print(time.perf_counter() - started)
"""


def ray_init_s(repeats: int = 3) -> float:
    """Seconds ``ensure_ray`` takes to start a local Ray, in a fresh interpreter (median of ``repeats``)."""
    times = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", RAY_INIT], capture_output=True, text=True, timeout=300,
                              check=True)
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return sorted(times)[len(times) // 2]


def to_first_episode(tasks: tuple[str, ...] = ("7",)) -> dict[str, Any]:
    """On the running Ray: seconds from creating a pool of 2 workers until its workers are ready and until the first
    episode starts (the latency server answers at once)."""
    from ecdysis.testing.latency import LatencyServer
    from perf import rollout_bench

    with LatencyServer(0.0) as server, tempfile.TemporaryDirectory(prefix="ecdysis-startup-") as folder:
        settings = rollout_bench.settings_for(server, 2, folder, "process")
        return first_episode_with(settings.model_dump_json(), tasks)


def first_episode_with(settings_json: str, tasks: tuple[str, ...] = ("7",)) -> dict[str, Any]:
    """On the connected Ray, with these rollout settings: seconds until the pool's workers are ready and until the
    first episode starts, and the workers' process ids."""
    from ecdysis.rollouts import RolloutPool, RolloutSettings
    from ecdysis.store import ArtifactStore
    from perf import rollout_bench

    settings = RolloutSettings.model_validate_json(settings_json)
    requests = rollout_bench.requests_for(list(tasks), 1, settings, run_id=f"startup-{time.time_ns()}")
    epoch, started = time.time(), time.perf_counter()
    pool = RolloutPool(settings, store=ArtifactStore(settings.store_uri))
    try:
        pids = pool.describe_workers()
        ready = time.perf_counter() - started
        (trajectory,) = pool.evaluate(requests)
    finally:
        pool.close()
    first = trajectory.created_at.timestamp() - trajectory.wall_time_s - epoch
    return {"workers_ready_s": ready, "to_first_episode_s": first, "episode_ok": trajectory.reward == 1.0,
            "worker_pids": sorted(p["pid"] for p in pids)}


JOIN = """
import json, sys, time
started = time.perf_counter()
from ecdysis.ray_env import ensure_ray
ensure_ray(sys.argv[1])
joined = time.perf_counter() - started
from perf.startup_bench import first_episode_with
print(json.dumps({"join_s": joined, **first_episode_with(sys.stdin.read())}))
"""


def standing_cluster() -> dict[str, Any]:
    """Two commands in turn, each a fresh interpreter joining a standing 2-CPU cluster with the same settings: the
    first starts the workers, the second reuses them warm. Each: seconds to join, to workers ready, to the first
    episode."""
    from pathlib import Path

    from ecdysis.testing.latency import LatencyServer
    from perf import rollout_bench
    from tests.services.standing_ray import StandingRay

    repo = str(Path(__file__).resolve().parents[1])
    with LatencyServer(0.0) as server, tempfile.TemporaryDirectory(prefix="ecdysis-startup-") as folder, \
            StandingRay(num_cpus=2) as cluster:
        settings = rollout_bench.settings_for(server, 2, folder, "process").model_copy(update={"keep_warm_s": 120.0})
        commands = {}
        for name in ("first", "next"):
            done = subprocess.run([sys.executable, "-c", JOIN, cluster.address], input=settings.model_dump_json(),
                                  capture_output=True, text=True, timeout=300, cwd=repo,
                                  env={**cluster.environment(), "PYTHONPATH": repo})
            if done.returncode != 0:
                raise RuntimeError(f"the {name} command on the standing cluster failed: {done.stderr[-3000:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            commands[name] = {**figures, "total_s": figures["join_s"] + figures["to_first_episode_s"]}
    commands["next"]["warm_workers_reused"] = commands["next"]["worker_pids"] == commands["first"]["worker_pids"]
    return commands


def run(repeats: int = 3) -> dict[str, Any]:
    return {"ray_init_s": ray_init_s(repeats), **to_first_episode(), "standing": standing_cluster()}
