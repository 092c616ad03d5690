"""The paper's evaluation metrics over trajectories: accuracy, Pass@k, Pass^k, tokens, cache hit rate, cost, time.

Pass^k and Pass@k use the unbiased estimators of τ²-bench (Yao et al., 2024): for a task with ``n`` trials of which
``c`` succeeded, pass^k = C(c, k) / C(n, k) and pass@k = 1 - C(n - c, k) / C(n, k); both averaged over tasks.
Infrastructure endings are excluded: they say nothing about the harness or the model. The cache hit rate is the
provider's prompt caching (cached prompt tokens over prompt tokens); hits of our own response cache are counted apart.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field

from ecdysis.records import ModelErrorKind, Trajectory

SUCCESS_TOLERANCE = 1e-6


def is_success(reward: float) -> bool:
    """A trajectory succeeds when its reward is 1 (τ²-bench's tolerance)."""
    return abs(reward - 1.0) <= SUCCESS_TOLERANCE


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that k trials drawn without replacement from n all succeed."""
    if n < k:
        raise ValueError(f"pass^{k} needs at least {k} trials, got {n}")
    return math.comb(c, k) / math.comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k trials drawn without replacement from n succeeds."""
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} trials, got {n}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


class EvalSummary(BaseModel):
    """One row of the comparison table."""

    harness: str
    model: str
    n_tasks: int
    n_trajectories: int
    n_excluded: int
    accuracy: float
    k: int
    pass_at_k: float | None
    pass_hat_k: float | None
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    cache_hit_rate: float
    response_cache_hits: int
    cost_usd: float | None
    mean_wall_time_s: float
    exclusion_causes: dict[str, int] = Field(default_factory=dict)
    """Why the excluded episodes were excluded (:attr:`~ecdysis.records.Trajectory.exclusion_cause`), with counts."""
    model_errors: dict[str, int] = Field(default_factory=dict)
    """Scored episodes that a failed model call ended, by cause, with counts; a conversation the provider refused
    (too long for the context, its content policy) is the harness's outcome and not counted here."""

    @property
    def scored(self) -> bool:
        """Whether any episode counted: with none, accuracy and the rest say nothing (shown ``n/a``)."""
        return self.n_trajectories > 0

    @property
    def measured_nothing(self) -> bool:
        """Whether every episode was excluded or ended on a failed model call: the row says nothing about the
        harness, and a command that produced it must not exit 0."""
        total = self.n_trajectories + self.n_excluded
        return total > 0 and self.n_excluded + sum(self.model_errors.values()) == total

    def describe_exclusions(self) -> str:
        """``3 of 3 episodes excluded: APIConnectionError to openai/gpt-4.1-mini``, and the scored episodes that a
        failed model call ended, if any."""
        total = self.n_trajectories + self.n_excluded
        parts = [describe_exclusions(self.n_excluded, total, self.exclusion_causes)] if self.n_excluded else []
        if self.model_errors:
            failed = sum(self.model_errors.values())
            parts.append(describe_exclusions(failed, total, self.model_errors).replace(
                "episodes excluded", "episodes scored as failures after a failed model call"))
        return "; ".join(parts)


def summarize(trajectories: Iterable[Trajectory], *, harness: str, model: str, k: int) -> EvalSummary:
    """Aggregate one (harness, model) cell; infrastructure endings are counted as excluded."""
    all_rows = list(trajectories)
    kept = [t for t in all_rows if not t.termination_reason.is_infrastructure]
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in kept:
        by_task[t.task.task_id].append(t)
    eligible = [rows for rows in by_task.values() if len(rows) >= k]
    pass_at = _mean([pass_at_k(len(r), sum(is_success(t.reward) for t in r), k) for r in eligible])
    pass_hat = _mean([pass_hat_k(len(r), sum(is_success(t.reward) for t in r), k) for r in eligible])
    prompt_tokens = sum(t.tokens.prompt_tokens for t in kept)
    cached_tokens = sum(t.tokens.cached_prompt_tokens for t in kept)
    costs = [t.cost_usd for t in kept]
    return EvalSummary(
        harness=harness,
        model=model,
        n_tasks=len(by_task),
        n_trajectories=len(kept),
        n_excluded=len(all_rows) - len(kept),
        accuracy=_mean([t.reward for t in kept]) or 0.0,
        k=k,
        pass_at_k=pass_at,
        pass_hat_k=pass_hat,
        prompt_tokens=prompt_tokens,
        completion_tokens=sum(t.tokens.completion_tokens for t in kept),
        cached_prompt_tokens=cached_tokens,
        cache_hit_rate=(cached_tokens / prompt_tokens) if prompt_tokens else 0.0,
        response_cache_hits=sum(t.cache_hits for t in kept),
        cost_usd=None if any(c is None for c in costs) or not costs else sum(c for c in costs if c is not None),
        mean_wall_time_s=_mean([t.wall_time_s for t in kept]) or 0.0,
        exclusion_causes=exclusion_causes(all_rows),
        model_errors=dict(Counter(t.model_error.cause for t in kept if t.model_error is not None
                                  and t.model_error.kind is not ModelErrorKind.INPUT_REFUSED).most_common()),
    )


def final_attempts(trajectories: Iterable[Trajectory]) -> list[Trajectory]:
    """The last stored attempt of each episode (a store keeps every attempt of an episode retried after an
    infrastructure fault; an evaluation's result is its last), in their first order."""
    last: dict[tuple[object, ...], Trajectory] = {}
    for t in trajectories:
        key = (t.round, t.phase, t.task.benchmark, t.task.domain, t.task.task_id, t.harness_hash, t.model, t.trial,
               t.seed)
        if key not in last or t.attempt >= last[key].attempt:
            last[key] = t
    return list(last.values())


def exclusion_causes(trajectories: Iterable[Trajectory]) -> dict[str, int]:
    """How many excluded episodes each cause accounts for, the most frequent first."""
    counts = Counter(t.exclusion_cause for t in trajectories if t.exclusion_cause is not None)
    return dict(counts.most_common())


def describe_exclusions(excluded: int, total: int, causes: Mapping[str, int]) -> str:
    """One line: how many of ``total`` episodes were excluded and why.

    >>> describe_exclusions(3, 3, {"APIConnectionError to openai/gpt-4.1-mini": 3})
    '3 of 3 episodes excluded: APIConnectionError to openai/gpt-4.1-mini'
    >>> describe_exclusions(3, 4, {"APIConnectionError to m": 2, "sandbox_error": 1})
    '3 of 4 episodes excluded: APIConnectionError to m (2), sandbox_error (1)'
    """
    why = next(iter(causes)) if len(causes) == 1 else ", ".join(f"{cause} ({n})" for cause, n in causes.items())
    return f"{excluded} of {total} episodes excluded" + (f": {why}" if why else "")


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
