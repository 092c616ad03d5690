"""Start-up before the first episode of a run: a local Ray coming up, then rollout workers built (benchmarks loaded,
gateway and sandbox backend made) until the first episode runs.

Two figures, because they have different owners: ``ray_init_s`` is Ray's own start of a local cluster (GCS, raylet,
worker pool), paid by every command that starts one and by none that joins a running cluster (``--ray-address``);
``to_first_episode_s`` is ours, from asking for a rollout pool on a running Ray to the first episode's start.
"""

from __future__ import annotations

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
    import ray

    from benchmarks import rollout_bench
    from ecdysis.rollouts import RolloutPool
    from ecdysis.store import ArtifactStore
    from ecdysis.testing.latency import LatencyServer

    with LatencyServer(0.0) as server, tempfile.TemporaryDirectory(prefix="ecdysis-startup-") as folder:
        settings = rollout_bench.settings_for(server, 2, folder, "process")
        requests = rollout_bench.requests_for(list(tasks), 1, settings, run_id="startup")
        epoch, started = time.time(), time.perf_counter()
        pool = RolloutPool(settings, store=ArtifactStore(folder))
        try:
            ray.get([worker.ping.remote() for worker in pool._workers])
            ready = time.perf_counter() - started
            (trajectory,) = pool.evaluate(requests)
        finally:
            pool.close()
    first = trajectory.created_at.timestamp() - trajectory.wall_time_s - epoch
    return {"workers_ready_s": ready, "to_first_episode_s": first, "episode_ok": trajectory.reward == 1.0}


def run(repeats: int = 3) -> dict[str, Any]:
    return {"ray_init_s": ray_init_s(repeats), **to_first_episode()}
