"""The paper's evaluation metrics over trajectories: accuracy, Pass@k, Pass^k, tokens, cache hit rate, cost, time.

Pass^k and Pass@k use the unbiased estimators of τ²-bench (Yao et al., 2024): for a task with ``n`` trials of which
``c`` succeeded, pass^k = C(c, k) / C(n, k) and pass@k = 1 - C(n - c, k) / C(n, k); both averaged over tasks.
Infrastructure endings are excluded: they say nothing about the harness or the model. The cache hit rate is the
provider's prompt caching (cached prompt tokens over prompt tokens); hits of our own response cache are counted apart.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from ecdysis.records import Trajectory

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
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
