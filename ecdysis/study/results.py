"""A study's rows, read back from the store: per (configuration, eval model), the held-out scores with their 95%
intervals, and the training run's time, modification calls, tokens, cache hit rate and cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ecdysis.records import LLMCallRecord, RoundResult, Trajectory
from ecdysis.study.config import StudyConfig
from ecdysis.study.intervals import Interval, bootstrap_interval, task_scores
from ecdysis.study.manifest import StudyManifest, eval_key, train_key


@dataclass(frozen=True)
class StudyRow:
    """One (configuration, eval model) cell of the study; None where a run is not finished or has no such score."""

    configuration: str
    model: str
    eval_run: str | None
    train_run: str | None
    harness: str | None
    n_tasks: int
    accuracy: Interval | None
    pass_at_k: Interval | None
    pass_hat_k: Interval | None
    training_time_s: float | None
    modification_calls: int | None
    tokens: int
    """Prompt plus completion tokens of the training run and of this evaluation."""
    cache_hit: float | None
    """The provider's prompt caching over those calls: cached prompt tokens / prompt tokens."""
    response_cache_hits: int
    """Calls answered by our own response cache (a rerun's are all of them)."""
    cost_usd: float | None
    """USD of those calls; None when none of them was priced (local and scripted models)."""


def study_rows(study: StudyConfig, manifest: StudyManifest, store: Any) -> list[StudyRow]:
    """Every configuration on every eval model, in the study's order (training model first)."""
    return [_row(study, manifest, store, configuration, model)
            for model in study.eval_models for configuration in study.table_order]


def _row(study: StudyConfig, manifest: StudyManifest, store: Any, configuration: str, model: str) -> StudyRow:
    evaluation = manifest.finished(eval_key(configuration, model))
    training = manifest.finished(train_key(configuration))
    trajectories: list[Trajectory] = store.read("trajectories", run_id=evaluation.run_id) if evaluation else []
    scores = task_scores(trajectories, study.k)
    seed = study.seed

    def interval(values: list[float]) -> Interval | None:
        return bootstrap_interval(values, resamples=study.bootstrap, seed=seed)

    rounds = rounds_of(store, training.run_id) if training else []
    calls = [c for run in (training, evaluation) if run is not None
             for c in store.read("llm_calls", run_id=run.run_id) if isinstance(c, LLMCallRecord)]
    prompt = sum(c.tokens.prompt_tokens for c in calls)
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    return StudyRow(
        configuration=configuration, model=model, eval_run=evaluation.run_id if evaluation else None,
        train_run=training.run_id if training else None, harness=evaluation.harness if evaluation else None,
        n_tasks=len(scores.accuracy), accuracy=interval(scores.accuracy), pass_at_k=interval(scores.pass_at_k),
        pass_hat_k=interval(scores.pass_hat_k),
        training_time_s=sum(p.wall_time_s for r in rounds for p in r.phases.values()) if training else None,
        modification_calls=sum(r.modification_calls for r in rounds) if training else None,
        tokens=prompt + sum(c.tokens.completion_tokens for c in calls),
        cache_hit=sum(c.tokens.cached_prompt_tokens for c in calls) / prompt if prompt else None,
        response_cache_hits=sum(c.cache_hit for c in calls), cost_usd=sum(costs) if costs else None)


def rounds_of(store: Any, run_id: str) -> list[RoundResult]:
    """The run's rounds, the last record of each (a resumed run may have written a round twice)."""
    latest: dict[int, RoundResult] = {}
    for r in sorted((r for r in store.read("rounds", run_id=run_id) if isinstance(r, RoundResult)),
                    key=lambda r: r.created_at):
        latest[r.round] = r
    return [latest[n] for n in sorted(latest)]
