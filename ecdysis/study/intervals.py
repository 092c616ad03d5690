"""95% intervals of the study's scores: a percentile bootstrap over tasks, seeded.

Tasks are the unit of resampling (trials of one task are not independent draws of the benchmark): each resample
draws as many tasks as there are, with replacement, and takes the mean of their per-task scores (a task's accuracy
is its mean reward over its trials; its Pass@k and Pass^k are the unbiased estimators of :mod:`ecdysis.metrics`).
The interval is the 2.5th and 97.5th percentile of the resampled means. Example::

    >>> bootstrap_interval([1.0, 0.0, 1.0, 1.0], resamples=1000, seed=0)
    Interval(mean=0.75, low=0.25, high=1.0)
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ecdysis.metrics import is_success, pass_at_k, pass_hat_k
from ecdysis.records import Trajectory

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A score over tasks and its bootstrap interval."""

    mean: float
    low: float
    high: float

    def describe(self) -> str:
        """``0.750 [0.250, 1.000]``."""
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap_interval(values: Sequence[float], *, resamples: int, seed: int) -> Interval | None:
    """The mean of ``values`` (one per task) with its percentile-bootstrap 95% interval; None without values."""
    if not values:
        return None
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1.0 - LEVEL) / 2
    low = means[int(tail * (resamples - 1))]
    high = means[round((1.0 - tail) * (resamples - 1))]
    return Interval(mean=sum(values) / n, low=low, high=high)


@dataclass(frozen=True)
class TaskScores:
    """Per-task scores of one evaluation (infrastructure endings excluded, as in :func:`ecdysis.metrics.summarize`)."""

    accuracy: list[float]
    pass_at_k: list[float]
    pass_hat_k: list[float]


def task_scores(trajectories: Sequence[Trajectory], k: int) -> TaskScores:
    """Each task's accuracy, and its Pass@k and Pass^k where it has at least ``k`` trials."""
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        if not t.termination_reason.is_infrastructure:
            by_task[t.task.task_id].append(t)
    rows = [by_task[task] for task in sorted(by_task)]
    eligible = [(len(r), sum(is_success(t.reward) for t in r)) for r in rows if len(r) >= k]
    return TaskScores(accuracy=[sum(t.reward for t in r) / len(r) for r in rows],
                      pass_at_k=[pass_at_k(n, c, k) for n, c in eligible],
                      pass_hat_k=[pass_hat_k(n, c, k) for n, c in eligible])
