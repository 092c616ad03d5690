"""Rollout throughput against the latency server, and our CPU seconds per rollout.

Every episode is a real τ² episode (airline, ``human`` harness, a sandbox per episode) whose task and user models
are the loopback latency server (:mod:`ecdysis.testing.latency`), so the wall clock is bounded below by the model
latency alone. The *ideal* wall time of a batch is what perfect packing of its LLM calls would take::

    ideal = max(sum(calls_i) * latency / concurrency, max(calls_i) * latency)

and the efficiency is ``ideal / measured``. Episodes/min are reported both ways.

A finite batch also pays a ramp (every slot starts at once) and a drain (the last episodes run while other slots
idle), which no runner avoids. The *steady-state* throughput leaves both out: episodes completed between the first
completion and the last dispatch (while every slot is busy and work is queued), per second, against the LLM-bound
rate ``concurrency ÷ (mean calls per episode × latency)``.
"""

from __future__ import annotations

import math
import tempfile
import time
from typing import Any

from ecdysis.testing.latency import LatencyServer
from perf.cpu import CpuMeter, RssSampler

DEFAULT_TASKS = ("1", "2", "4", "5", "7", "10", "12", "13")
"""Airline tasks the stub attributes unambiguously, with 1–4 gold actions (short and long episodes mixed)."""


WARM_POOL = 2
"""Most started sandboxes waiting per worker (the product's default). A process sandbox starts in ~40 ms while an
episode takes seconds, so a couple keep starts off the episodes' path; one per slot (as before) kept up to 128 idle
sandboxes at 128 concurrent (1.6 GB resident), most of them started for nothing at the end of a batch."""


def sandbox_config(kind: str, warm_pool: int = 4) -> dict[str, Any]:
    """The sandbox section for ``kind`` (``process``, ``docker``, or ``docker-reuse``: containers reused for 100
    episodes, opt-in): a warm pool of ``warm_pool`` per worker."""
    if kind in ("docker", "docker-reuse"):
        reuse = {"reuse_episodes": 100} if kind == "docker-reuse" else {}
        return {"type": "docker", "warm_pool": warm_pool, "labels": {"ecdysis.bench": "1"}, **reuse}
    return {"type": "process", "warm_pool": warm_pool}


EPISODES_PER_WORKER = 64
"""Episodes one worker process runs at once at most. Measured at 128 concurrent, 2 s per call, back to back on a
quiet machine: 2 workers × 64 reached 92% of the ideal in the steady state at 0.099 CPU-s per rollout and 32.6 MB per
episode, 4 × 32 87% at 0.119 CPU-s and 40.8 MB: each worker process holds ~300 MB (litellm, τ², Ray) and adds its
own threads to schedule, and one process's GIL is far from saturated by 64 episodes' Python (~0.45 s per second)."""


CALLS_PER_WORKER_S = 32
"""Model calls a second one worker process handles at most: episodes per worker are capped at this × the per-call
latency (each episode has one call in flight), so 16 at 0.5 s and :data:`EPISODES_PER_WORKER` from 2 s. A reply costs
a worker ~9 ms of Python (litellm, τ²'s user and tools, the sandbox protocol); past ~30 a second, replies that arrive
together queue for its interpreter lock. Measured at 64 concurrent, 0.5 s per call, 384 episodes, three runs each,
alternated: 2 workers × 32 reached 81–86% of the LLM-bound ideal in the steady state at 0.087–0.095 CPU-s per rollout,
4 × 16 85–89% at 0.080–0.082; 3, 6 and 8 workers 84–92% at 0.079–0.084, for 49–80 MB per concurrent episode."""


def episodes_per_worker_cap(latency_s: float) -> int:
    """Most episodes one worker runs at once at ``latency_s`` per call (:data:`CALLS_PER_WORKER_S`,
    :data:`EPISODES_PER_WORKER`)."""
    return max(1, min(EPISODES_PER_WORKER, math.floor(CALLS_PER_WORKER_S * latency_s)))


def settings_for(server: LatencyServer, concurrency: int, store_uri: str, sandbox: str, *,
                 domain: str = "airline", tasks: list[str] | None = None) -> Any:
    """Rollout settings: one worker per core (more where that would give a worker more than
    :func:`episodes_per_worker_cap` episodes at the server's latency), episodes spread over them, no response
    cache; the τ² benchmark of ``domain``, and routes for the stub's task-tagged models of ``tasks`` where the domain
    needs them (:func:`tagged_models`)."""
    import os

    from ecdysis.rollouts import RolloutSettings
    from ecdysis.testing.latency import MODELS

    cores = os.cpu_count() or 1
    cap = episodes_per_worker_cap(server.latency_s)
    workers = max(1, min(concurrency, max(cores, math.ceil(concurrency / cap))))
    per_worker = math.ceil(concurrency / workers)
    tagged = tuple(name for pair in tagged_models(domain, tasks or []).values() for name in pair)
    gateway = {"cache": False, "max_retries": 0, "timeout_s": 60.0,
               "models": server.gateway_models((*MODELS, *tagged))}
    # Each episode takes a started sandbox and the pool starts the next one while the episode waits on its model.
    return RolloutSettings.model_validate(dict(
        store_uri=store_uri, gateway=gateway, sandbox=sandbox_config(sandbox, min(per_worker, WARM_POOL)),
        workers=workers, episodes_per_worker=per_worker, max_attempts=1, max_steps=30, wall_clock_s=300.0,
        benchmarks=[{"type": "tau2", "domain": domain}]))


def tagged_models(domain: str, tasks: list[str]) -> dict[str, tuple[str, str]]:
    """Task id → (task model, user model) names tagged with the task, for a domain whose conversations the stub
    cannot attribute to one task (telecom: :func:`ecdysis.testing.tau2_replies.tagged_model`); empty for the
    others."""
    from ecdysis.testing.tau2_replies import DOMAINS, tagged_model

    if domain in DOMAINS:
        return {}
    return {t: (tagged_model("task-gold", domain, t), tagged_model("user", domain, t)) for t in tasks}


def requests_for(tasks: list[str], n: int, settings: Any, *, model: str = "openai/task-gold",
                 run_id: str = "bench", domain: str = "airline") -> list[Any]:
    """``n`` episode requests cycling over ``tasks`` of ``domain`` (later cycles are further trials), with the
    domain's ``human`` seed."""
    from ecdysis.benchmarks.tau2.benchmark import Tau2Benchmark
    from ecdysis.benchmarks.tau2.config import Tau2Config
    from ecdysis.evaluation import episode_requests
    from ecdysis.harness import resolve_harness

    tau2 = Tau2Benchmark(Tau2Config.model_validate({"domain": domain}))
    path, digest = resolve_harness("human", seeds=tau2.seed_harnesses())
    records = tau2.tasks(None, ids=tasks)
    trials = math.ceil(n / len(records))
    requests = episode_requests(records, harness_dir=path, harness_hash=digest, model=model,
                                user_model="openai/user", trials=trials, run_id=run_id, round=0, phase="eval",
                                settings=settings)
    tagged = tagged_models(domain, tasks)
    if tagged and model == "openai/task-gold":
        requests = [r.model_copy(update={"model": f"openai/{tagged[r.task.task_id][0]}",
                                         "user_model": f"openai/{tagged[r.task.task_id][1]}"}) for r in requests]
    order = {task_id: i for i, task_id in enumerate(tasks)}
    return sorted(requests, key=lambda r: (r.trial, order[r.task.task_id]))[:n]


def run_batch(server: LatencyServer, concurrency: int, n: int, *, tasks: list[str], sandbox: str = "process",
              warmup: bool = True, domain: str = "airline") -> dict[str, Any]:
    """Run ``n`` episodes of ``domain`` at ``concurrency`` on a fresh pool; wall clock, CPU and the ideal, in one
    dict."""
    from ecdysis.rollouts import RolloutPool
    from ecdysis.store import ArtifactStore

    with tempfile.TemporaryDirectory(prefix="ecdysis-bench-") as folder:
        settings = settings_for(server, concurrency, folder, sandbox, domain=domain, tasks=tasks)
        store = ArtifactStore(folder)
        pool = RolloutPool(settings, store=store)
        try:
            if warmup:  # worker start-up and imports are a one-off per run; keep them out of the steady state
                pool.evaluate(requests_for(tasks[:1], min(len(pool._workers), 2), settings, run_id="warmup",
                                           domain=domain))
            requests = requests_for(tasks, n, settings, domain=domain)
            meter = CpuMeter(exclude={server.pid})
            memory = RssSampler(exclude={server.pid})
            epoch, started = time.time(), time.perf_counter()
            trajectories = pool.evaluate(requests)
            wall = time.perf_counter() - started
            peak_rss = memory.stop()
            cpu = meter.read()
            cpu["ours"] -= memory.cpu_s  # the sampler measures; it is no part of a rollout's cost
            cpu["sampler"] = memory.cpu_s
        finally:
            pool.close()
    calls = [t.llm_calls for t in trajectories]
    ideal = max(sum(calls) * server.latency_s / concurrency, max(calls) * server.latency_s)
    ok = sum(1 for t in trajectories if t.termination_reason.is_normal_stop)
    steady = steady_state(trajectories, epoch, concurrency, server.latency_s)
    return {
        "domain": domain, "concurrency": concurrency, "episodes": n, "episodes_ok": ok,
        "mean_llm_calls": sum(calls) / n, "mean_tool_calls": sum(len(t.tool_calls) for t in trajectories) / n,
        "mean_user_actions": sum(len(t.user_actions) for t in trajectories) / n,
        "mean_reward": sum(t.reward for t in trajectories) / n, "llm_calls": sum(calls), "wall_s": wall,
        "ideal_wall_s": ideal, "efficiency": ideal / wall, "episodes_per_min": 60 * n / wall,
        "ideal_episodes_per_min": 60 * n / ideal, "cpu_s": cpu, "cpu_s_per_rollout": cpu["ours"] / n, **steady,
        "workers": settings.workers, "peak_rss_mb": peak_rss / 2**20,
        "rss_mb_per_concurrent_episode": peak_rss / 2**20 / concurrency,
        "peak_pss_mb": memory.peak_pss / 2**20, "pss_mb_per_concurrent_episode": memory.peak_pss / 2**20 / concurrency,
        "errors": sorted({f"{t.termination_reason.value}: {(t.error or '')[:200]}" for t in trajectories
                          if not t.termination_reason.is_normal_stop})[:3],
    }


def steady_state(trajectories: list[Any], epoch: float, concurrency: int, latency_s: float) -> dict[str, Any]:
    """:func:`steady_rate` of our episodes: each ends at its record's ``created_at``, started ``wall_time_s``
    before; the ideal is the LLM-bound rate of the batch's mean calls per episode."""
    ends = [t.created_at.timestamp() - epoch for t in trajectories]
    starts = [end - t.wall_time_s for end, t in zip(ends, trajectories, strict=True)]
    mean_llm_s = sum(t.llm_calls for t in trajectories) * latency_s / max(1, len(trajectories))
    return steady_rate(starts, ends, 60 * concurrency / mean_llm_s if mean_llm_s else None)


def steady_rate(starts: list[float], ends: list[float], ideal_per_min: float | None) -> dict[str, Any]:
    """Completions per minute between the first completion and the last start (every slot busy, work queued).

    None when the batch has no such window (fewer than about two episodes per slot).
    """
    first_end, last_start = min(ends), max(starts)
    window = last_start - first_end
    done = sum(1 for end in ends if first_end < end <= last_start)
    if window <= 0 or done == 0:
        return {"steady_window_s": None, "steady_episodes_per_min": None, "steady_efficiency": None,
                "ideal_steady_per_min": ideal_per_min}
    rate = 60 * done / window
    return {"steady_window_s": window, "steady_episodes_per_min": rate,
            "steady_efficiency": rate / ideal_per_min if ideal_per_min else None,
            "ideal_steady_per_min": ideal_per_min}


def throughput(latency_s: float, concurrencies: list[int], *, tasks: list[str] | None = None,
               episodes_per_slot: int = 2, sandbox: str = "process") -> dict[str, Any]:
    """Throughput at each concurrency (``episodes_per_slot × concurrency`` episodes each), against the ideal."""
    chosen = list(tasks or DEFAULT_TASKS)
    with LatencyServer(latency_s) as server:
        rows = [run_batch(server, c, max(2, episodes_per_slot * c), tasks=chosen, sandbox=sandbox)
                for c in concurrencies]
    return {"latency_s": latency_s, "sandbox": sandbox, "tasks": chosen, "rows": rows}
