"""Held-out evaluation: harnesses × models × tasks × trials on Ray, then the paper's comparison table."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.benchmarks import BenchmarkConfig, build, default_config
from ecdysis.metrics import EvalSummary, summarize
from ecdysis.protocols import EpisodeRequest
from ecdysis.records import RunManifest, Task, Trajectory, stable_hash, utc_now
from ecdysis.rollouts import RolloutPool, RolloutSettings


class EvalPlan(BaseModel):
    """What to evaluate: the harnesses and models, the benchmark's tasks, and how many trials of each."""

    model_config = ConfigDict(extra="forbid")

    harnesses: list[str] = Field(default_factory=lambda: ["human"])
    """The benchmark's seed names (noop, direct, human), bundle folders, or harness hashes in the store."""
    models: list[str]
    """Task models (litellm model strings); several give the cross-LLM matrix."""
    user_model: str | None = None
    """The simulated user's model, for benchmarks that have one (τ²)."""
    benchmark: BenchmarkConfig = Field(default_factory=default_config)
    """Which benchmark (and its options, e.g. τ²'s domain)."""
    split: str = "test"
    n_tasks: int | None = 20
    """How many tasks to draw from the split (None: all of them)."""
    task_ids: list[str] | None = None
    """An explicit task list; overrides the split draw."""
    trials: int = 3
    seed: int = 0
    """Seed of the task draw and of each episode."""


def new_run_id(kind: str) -> str:
    """A sortable, unique run id."""
    return f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def select_tasks(plan: EvalPlan) -> list[Task]:
    """The plan's tasks: the explicit list, or a seeded draw from the benchmark's split. A bad id or split is a
    ValueError naming the known ones."""
    return build(plan.benchmark).tasks(plan.split, plan.n_tasks, seed=plan.seed, ids=plan.task_ids or None)


def episode_requests(tasks: Sequence[Task], *, harness_dir: Path, harness_hash: str, model: str,
                     user_model: str | None, trials: int, run_id: str, round: int, phase: str,
                     settings: RolloutSettings, seed: int = 0) -> list[EpisodeRequest]:
    """One request per task and trial."""
    return [
        EpisodeRequest(
            task=task, harness_dir=harness_dir, harness_hash=harness_hash, model=model, user_model=user_model,
            trial=trial, seed=seed + trial, run_id=run_id, round=round, phase=phase,
            max_steps=settings.max_steps, wall_clock_s=settings.wall_clock_s,
        )
        for task in tasks
        for trial in range(trials)
    ]


def run_eval(plan: EvalPlan, *, store: Any, settings: RolloutSettings, run_id: str | None = None,
             on_result: Callable[[Trajectory], None] | None = None) -> tuple[str, list[EvalSummary]]:
    """Evaluate every (harness, model) pair; every trajectory is stored; returns the run id and table rows."""
    from ecdysis.harness import resolve_harness

    run_id = run_id or new_run_id("eval")
    tasks = select_tasks(plan)
    seeds = build(plan.benchmark).seed_harnesses()
    harnesses = [(spec, *resolve_harness(spec, seeds=seeds, store=store)) for spec in plan.harnesses]
    manifest = RunManifest(
        run_id=run_id, kind="eval", config=plan.model_dump(mode="json"), config_hash=stable_hash(plan.model_dump()),
        settings=settings.model_dump(mode="json", exclude={"store_uri", "benchmarks"}),
        package_versions=package_versions(), seed=plan.seed, models=plan.models, tasks=tasks,
    )
    store.write_manifest(manifest)
    settings = settings.model_copy(update={"benchmarks": [plan.benchmark]})
    pool = RolloutPool(settings, store=store)
    summaries: list[EvalSummary] = []
    try:
        requests = []
        for _, path, digest in harnesses:
            for model in plan.models:
                requests += episode_requests(tasks, harness_dir=path, harness_hash=digest, model=model,
                                             user_model=plan.user_model, trials=plan.trials, run_id=run_id,
                                             round=0, phase="eval", settings=settings, seed=plan.seed)
        trajectories = pool.evaluate(requests, on_result=on_result)
        for spec, _, digest in harnesses:
            for model in plan.models:
                cell = [t for t in trajectories if t.harness_hash == digest and t.model == model]
                summaries.append(summarize(cell, harness=spec, model=model, k=plan.trials))
        store.write_manifest(manifest.model_copy(update={"status": "finished", "finished_at": utc_now()}))
    except BaseException:
        store.write_manifest(manifest.model_copy(update={"status": "failed", "finished_at": utc_now()}))
        raise
    finally:
        pool.close()
    return run_id, summaries


def package_versions() -> dict[str, str]:
    """Versions of Ecdysis and of every package it depends on (the benchmarks' own among them)."""
    import re
    from importlib.metadata import PackageNotFoundError, requires, version

    try:
        wanted = {re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0] for requirement in requires("ecdysis") or []
                  if "extra ==" not in requirement}
    except PackageNotFoundError:
        wanted = set()
    out = {}
    for name in ["ecdysis", *sorted(wanted)]:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out
