"""AgentBench's two benchmarks at 16 concurrent episodes on the loopback latency server: episodes per minute, and CPU
seconds per episode with the shares of the MariaDB server and of the task containers.

Every episode is a real one (``human`` harness in a process sandbox, DBBench on the shared MariaDB, OS interaction in
a task container); the task model is the gold agent, served by the latency server, which finds the task from the
instruction the conversation opens with (``ecdysis.benchmarks.agentbench.scripted.latency_reply``).
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections import Counter
from typing import Any

import psutil

from ecdysis.benchmarks.agentbench.scripted import latency_servable
from ecdysis.testing.latency import LatencyServer
from perf.cpu import CpuMeter

REPLY = "ecdysis.benchmarks.agentbench.scripted:latency_reply"


def _named_cpu(name: str) -> float:
    total = 0.0
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] == name:
            try:
                times = proc.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
            except psutil.Error:
                continue
    return total


def run_variant(variant: str, *, latency_s: float, concurrency: int, episodes: int) -> dict[str, Any]:
    """``episodes`` episodes of ``variant``'s training tasks (cycled) at ``concurrency``; tasks that share their
    instruction with another are left out, since the latency server knows a task only by what the model is told."""
    from ecdysis.benchmarks import config_for
    from ecdysis.benchmarks.agentbench.manifest import find_data_dir
    from ecdysis.evaluation import episode_requests
    from ecdysis.harness import resolve_harness
    from ecdysis.rollouts import RolloutPool, RolloutSettings
    from ecdysis.store import ArtifactStore

    data = find_data_dir()  # $ECDYSIS_AGENTBENCH_DATA, else shared/agentbench in or beside the checkout
    config = config_for(variant, **({"data_dir": str(data)} if data else {}))
    benchmark = config.build()
    tasks = [task for task in benchmark.tasks("train") if latency_servable(variant, task.task_id)]
    path, digest = resolve_harness("human", seeds=benchmark.seed_harnesses())
    with LatencyServer(latency_s, reply=REPLY) as server, tempfile.TemporaryDirectory(prefix="ecdysis-ab-") as folder:
        workers = max(1, min(concurrency, os.cpu_count() or 1))
        settings = RolloutSettings.model_validate({
            "store_uri": folder, "gateway": {"cache": False, "max_retries": 0, "timeout_s": 60.0,
                                             "models": server.gateway_models()},
            "sandbox": {"type": "process", "warm_pool": math.ceil(concurrency / workers)},
            "benchmarks": [config.model_dump()], "workers": workers,
            "episodes_per_worker": math.ceil(concurrency / workers), "max_attempts": 1, "max_steps": 12,
            "wall_clock_s": 300.0})
        pool = RolloutPool(settings, store=ArtifactStore(folder))
        try:
            pool.evaluate(episode_requests(tasks[:1], harness_dir=path, harness_hash=digest, model="openai/task-gold",
                                           user_model=None, trials=workers, run_id="warmup", round=0, phase="eval",
                                           settings=settings))
            trials = math.ceil(episodes / len(tasks))
            requests = episode_requests(tasks, harness_dir=path, harness_hash=digest, model="openai/task-gold",
                                        user_model=None, trials=trials, run_id="bench", round=0, phase="eval",
                                        settings=settings)
            requests = sorted(requests, key=lambda r: r.trial)[:episodes]
            meter, mariadb = CpuMeter(exclude={server.pid}), _named_cpu("mariadbd")
            started = time.perf_counter()
            trajectories = pool.evaluate(requests)
            wall = time.perf_counter() - started
            cpu = meter.read()
            cpu["mariadb"] = _named_cpu("mariadbd") - mariadb
        finally:
            pool.close()
    n = len(trajectories)
    calls = [t.llm_calls for t in trajectories]
    ideal = max(sum(calls) * latency_s / concurrency, max(calls) * latency_s)
    return {"variant": variant, "episodes": n, "concurrency": concurrency, "latency_s": latency_s,
            "episodes_ok": sum(1 for t in trajectories if t.reward == 1.0), "wall_s": wall,
            "endings": dict(Counter(t.termination_reason.value for t in trajectories)),
            "episodes_per_min": 60 * n / wall, "ideal_episodes_per_min": 60 * n / ideal, "llm_calls": sum(calls),
            "cpu_s": cpu, "cpu_s_per_episode": {k: v / n for k, v in cpu.items()},
            "errors": sorted({f"{t.task.task_id}: {t.termination_reason.value}: {(t.error or '')[:160]}"
                              for t in trajectories if t.reward != 1.0})[:3]}


def run(*, latency_s: float = 0.5, concurrency: int = 16, episodes: int = 48) -> dict[str, Any]:
    """Both variants; a variant whose environment cannot be had here (no MariaDB, no Docker, no data) says why."""
    out: dict[str, Any] = {}
    for variant in ("agentbench-db", "agentbench-os"):
        try:
            out[variant] = run_variant(variant, latency_s=latency_s, concurrency=concurrency, episodes=episodes)
        except Exception as exc:
            out[variant] = {"variant": variant, "unavailable": f"{type(exc).__name__}: {exc}"[:500]}
    return out
