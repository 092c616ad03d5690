"""Held-out evaluation: harnesses × models × tasks × trials on Ray, then the paper's comparison table."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.benchmarks import BenchmarkConfig, build, default_config
from ecdysis.events.episodes import EvaluationReporter
from ecdysis.evolution.evaluator import EvaluationBatch, HarnessRef, batch_of
from ecdysis.harness import resolve_harness
from ecdysis.metrics import EvalSummary, summarize
from ecdysis.protocols import EpisodeRequest
from ecdysis.records import Phase, RunManifest, Task, Trajectory, stable_hash, utc_now
from ecdysis.rollouts import RolloutSettings
from ecdysis.rollouts.run import RunParts

PHASES = {"base": Phase.EVALUATION, "candidate": Phase.CANDIDATE_EVALUATION, "eval": Phase.HELDOUT}
"""The event phase of each evaluation phase (``phase`` of the episode requests and trajectories)."""


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
            max_wall_clock_s=settings.max_wall_clock_s,
        )
        for task in tasks
        for trial in range(trials)
    ]


@dataclass
class RolloutEvaluator:
    """An `~ecdysis.evolution.evaluator.Evaluator` on a rollout pool: every task × model × trial of a harness, with
    progress events through ``reporter``; returns the batch the pool produced (nothing is read back).

    Example::

        evaluator = RolloutEvaluator(pool, reporter, tasks, models=["openai/gpt-4.1"], user_model=None, trials=1,
                                     run_id="r1", settings=settings)
        batch = evaluator.evaluate(HarnessRef(bundle_dir, digest), "base", 0)
    """

    pool: Any
    reporter: EvaluationReporter
    tasks: list[Task]
    models: list[str]
    user_model: str | None
    trials: int
    run_id: str
    settings: RolloutSettings
    seed: int = 0

    def evaluate(self, harness: HarnessRef, phase: str, round: int) -> EvaluationBatch:
        """Run the harness's episodes for ``round`` (``phase``: base, candidate or eval)."""
        started = time.monotonic()
        requests = [request for model in self.models for request in episode_requests(
            self.tasks, harness_dir=harness.path, harness_hash=harness.hash, model=model, user_model=self.user_model,
            trials=self.trials, run_id=self.run_id, round=round, phase=phase, settings=self.settings, seed=self.seed)]
        trajectories = self.reporter.evaluate(self.pool, requests, round_=round, phase=PHASES[phase])
        return batch_of(trajectories, time.monotonic() - started)


def run_eval(plan: EvalPlan, *, store: Any, settings: RolloutSettings, run_id: str | None = None,
             on_result: Callable[[Trajectory], None] | None = None,
             threshold: float = 1.0) -> tuple[str, list[EvalSummary]]:
    """Evaluate every (harness, model) pair as a run: its events (run started, episodes, run finished or failed)
    go to the store's event log, so ``ecdysis runs watch`` follows it; an episode below ``threshold`` counts as a
    failure there. Every trajectory is stored; returns the run id and table rows."""

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
    summaries: list[EvalSummary] = []
    try:
        parts = RunParts(store, settings, run_id, kind="eval", threshold=threshold)
    except BaseException:
        store.write_manifest(manifest.model_copy(update={"status": "failed", "finished_at": utc_now()}))
        raise
    with parts as run:
        requests = [request for _, path, digest in harnesses for model in plan.models for request in episode_requests(
            tasks, harness_dir=path, harness_hash=digest, model=model, user_model=plan.user_model, trials=plan.trials,
            run_id=run_id, round=0, phase="eval", settings=settings, seed=plan.seed)]
        try:
            run.started(total=len(requests), kind="eval", harnesses=len(harnesses), models=len(plan.models),
                        tasks=len(tasks), trials=plan.trials)
            trajectories = run.reporter.evaluate(run.pool, requests, round_=0, phase=Phase.HELDOUT,
                                                 on_result=on_result)
        except BaseException as exc:
            run.failed(manifest, exc)
            raise
        for spec, _, digest in harnesses:
            for model in plan.models:
                cell = [t for t in trajectories if t.harness_hash == digest and t.model == model]
                summaries.append(summarize(cell, harness=spec, model=model, k=plan.trials))
        run.finished(manifest, kind="eval", episodes=len(trajectories),
                     failures=sum(run.reporter.failed(t) for t in trajectories))
    return run_id, summaries


def package_versions() -> dict[str, str]:
    """Versions of Ecdysis and of every package it depends on (the benchmarks' own among them)."""
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
