"""The statistics of the ``paired`` policy, pure functions over per-task differences (candidate − base).

>>> sign_test([1.0, 1.0, 0.0, -0.5])   # 2 of 3 informative tasks improved: P(X >= 2 | Bin(3, 1/2))
0.5
>>> bootstrap([1.0, 1.0, 1.0], confidence=0.95, resamples=100, seed=0)
Bootstrap(lower=1.0, upper=1.0, p_value=0.0)
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import NamedTuple

TIE = 1e-9
"""Differences (and resampled means) within this of zero are zero: floating-point noise of averaged rewards."""


def paired_differences(base: Mapping[str, float], candidate: Mapping[str, float]) -> dict[str, float]:
    """Per task on both sides, in task order: the candidate's mean reward minus the base's (near-zero made zero)."""
    shared = sorted(set(base) & set(candidate))
    return {key: _snap(candidate[key] - base[key]) for key in shared}


def sign_test(differences: Sequence[float]) -> float | None:
    """One-sided exact sign test of "the candidate is no better": the chance of at least this many improved tasks
    among the informative ones (ties dropped) if each were a fair coin; None when no task differs."""
    improved = sum(1 for d in differences if d > 0)
    informative = improved + sum(1 for d in differences if d < 0)
    if informative == 0:
        return None
    return sum(math.comb(informative, k) for k in range(improved, informative + 1)) / 2 ** informative


class Bootstrap(NamedTuple):
    """A percentile bootstrap of the mean difference."""

    lower: float
    """Lower bound at the confidence (one-sided)."""
    upper: float
    """Upper bound at the confidence (one-sided)."""
    p_value: float
    """The share of resampled means at or below zero (one-sided, "no improvement")."""


def bootstrap(differences: Sequence[float], *, confidence: float, resamples: int, seed: int) -> Bootstrap:
    """Resample the tasks with replacement ``resamples`` times (a ``random.Random(seed)``, so the same differences
    always give the same answer) and take the mean of each resample.

    With ``k = floor((1 - confidence) * resamples)``, ``lower`` is the ``k``-th smallest mean (from 0) and ``upper``
    the ``k``-th largest, so ``lower > 0`` exactly when ``p_value <= 1 - confidence``."""
    if not differences:
        raise ValueError("a bootstrap needs at least one task")
    rng = random.Random(seed)
    values, n = list(differences), len(differences)
    means = sorted(_snap(fmean(rng.choices(values, k=n))) for _ in range(resamples))
    k = min(resamples - 1, math.floor((1 - confidence) * resamples + TIE))
    return Bootstrap(means[k], means[resamples - 1 - k], sum(1 for m in means if m <= 0) / resamples)


def _snap(value: float) -> float:
    return 0.0 if abs(value) <= TIE else value
