"""Constants and helpers shared by the integration tests (imported as ``integration_support``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ecdysis.store import ArtifactStore

GOLD = "scripted/ecdysis.benchmarks.tau2.scripted:gold_agent"
SLOW_GOLD = "scripted/ecdysis.testing.rollouts:slow_gold_agent"
USER = "scripted/ecdysis.benchmarks.tau2.scripted:scripted_user"
TASK_IDS = ["0", "7", "9"]


def requests_for(store: ArtifactStore, *, model: str, trials: int, run_id: str, settings: Any,
                 task_ids: list[str] | None = None, harness: str = "human") -> list[Any]:
    """Episode requests for the airline tasks ``task_ids`` under a built-in harness."""
    from ecdysis.benchmarks.tau2.benchmark import Tau2Benchmark
    from ecdysis.evaluation import episode_requests
    from ecdysis.harness import resolve_harness

    tau2 = Tau2Benchmark()
    tasks = tau2.tasks(None, ids=task_ids or TASK_IDS)
    path, digest = resolve_harness(harness, seeds=tau2.seed_harnesses(), store=store)
    return episode_requests(tasks, harness_dir=path, harness_hash=digest, model=model, user_model=USER,
                            trials=trials, run_id=run_id, round=0, phase="eval", settings=settings)


def tau2_regrade(files: list[Path], domain: str) -> dict[str, float]:
    """τ²'s own grade of every simulation in exported ``files`` (each loaded with ``Results.load``), by its id."""
    from tau2.data_model.simulation import Results
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    graded = {}
    for path in files:
        loaded = Results.load(path)
        tasks = {t.id: t for t in loaded.tasks}
        for simulation in loaded.simulations:
            theirs = evaluate_simulation(simulation, tasks[simulation.task_id], EvaluationType.ALL, False, domain)
            graded[simulation.id] = theirs.reward
    return graded


def cluster_with_product_settings(num_cpus: int) -> Any:
    """A ``ray.cluster_utils.Cluster`` whose head runs with the product's local Ray settings (worker niceness 0, see
    ``ecdysis.ray_env``); nodes added later take them from the head. At Ray's defaults its workers starve beside any
    busy process."""
    from ray.cluster_utils import Cluster

    from ecdysis.ray_env import LOCAL_SYSTEM_CONFIG

    return Cluster(initialize_head=True, head_node_args={"num_cpus": num_cpus, "_system_config": LOCAL_SYSTEM_CONFIG})


def worker_niceness(**actor_options: Any) -> int:
    """The niceness of a Ray worker process placed with ``actor_options`` on the connected cluster."""
    import os

    import ray

    @ray.remote(num_cpus=0, **actor_options)
    class Probe:
        def niceness(self) -> int:
            return os.getpriority(os.PRIO_PROCESS, 0)

    probe = Probe.remote()  # type: ignore[attr-defined]
    try:
        return int(ray.get(probe.niceness.remote(), timeout=300))
    finally:
        ray.kill(probe)
