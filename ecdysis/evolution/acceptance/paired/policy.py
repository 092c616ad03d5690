"""``paired``: keep a candidate only when its per-task improvement over the base clears a one-sided test.

With a real model one trial per task is mostly noise, and a mean can rise on the strength of one lucky task. This
policy compares base and candidate task by task (both evaluated on the same tasks and trials): each task's
difference of mean reward over its trials (candidate − base) is one observation; a one-sided test of "no
improvement" (``sign``: exact sign test, ties dropped; ``bootstrap``: percentile bootstrap of the mean difference)
must clear ``confidence``, and the mean difference must be positive. The interval is always the seeded bootstrap's,
and is recorded on the round whatever the decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean
from typing import Literal

from pydantic import Field

from ecdysis.evolution.acceptance.paired.statistics import bootstrap, paired_differences, sign_test
from ecdysis.evolution.acceptance.seam import AcceptancePolicy, AcceptanceSection, Decision, TrainingResults
from ecdysis.records import ImprovementEstimate

Test = Literal["sign", "bootstrap"]


@dataclass(frozen=True)
class PairedImprovement:
    """Accept iff the one-sided ``test`` of the per-task differences clears ``confidence`` and their mean is > 0.

    >>> policy = PairedImprovement(test="sign", confidence=0.9)
    >>> base = TrainingResults(0.0, {f"t{i}": (0.0,) for i in range(4)})
    >>> policy.decide(base, TrainingResults(1.0, {f"t{i}": (1.0,) for i in range(4)})).accepted  # p = 1/16
    True
    >>> policy.decide(base, TrainingResults(0.25, {"t0": (1.0,), "t1": (0.0,), "t2": (0.0,), "t3": (0.0,)})).accepted
    False
    """

    test: Test = "sign"
    confidence: float = 0.95
    resamples: int = 10_000
    seed: int = 0

    def decide(self, base: TrainingResults, candidate: TrainingResults) -> Decision:
        """Decide, and estimate the improvement (None only when no task has counted trials on both sides)."""
        scores = f"training score {base.score:.4f} -> {candidate.score:.4f}"
        differences = paired_differences(base.task_means(), candidate.task_means())
        if not differences:
            return Decision(False, f"{scores}; no task has counted trials on both sides: nothing to compare")
        values = list(differences.values())
        interval = bootstrap(values, confidence=self.confidence, resamples=self.resamples, seed=self.seed)
        p_value = sign_test(values) if self.test == "sign" else interval.p_value
        trials = min(min(len(base.rewards[key]), len(candidate.rewards[key])) for key in differences)
        estimate = ImprovementEstimate(
            test=self.test, confidence=self.confidence, mean_difference=fmean(values), lower=interval.lower,
            upper=interval.upper, p_value=p_value, n_tasks=len(values), n_trials=trials)
        cleared = p_value is not None and p_value <= 1 - self.confidence + 1e-12
        accepted = cleared and estimate.mean_difference > 0
        verdict = "accepted" if accepted else ("mean did not improve" if cleared else "not significant")
        p_text = "undefined (no task differs)" if p_value is None else f"{p_value:.4g}"
        return Decision(accepted, f"{scores}; paired {self.test} test over {estimate.n_tasks} tasks x {trials} "
                                  f"trials: mean improvement {estimate.mean_difference:+.4f}, {self.confidence:.0%} "
                                  f"bounds [{interval.lower:+.4f}, {interval.upper:+.4f}], p = {p_text}: {verdict}",
                        estimate)


class PairedAcceptance(AcceptanceSection):
    """``paired``: keep a candidate iff its per-task improvement clears a one-sided test at ``confidence``.

    Example: ``training.acceptance: {type: paired, test: bootstrap, confidence: 0.9}``, with
    ``rollouts.train_trials`` trials of each task on both sides."""

    type: Literal["paired"] = "paired"
    """Selects the paired test."""
    test: Test = "sign"
    """``sign``: exact one-sided sign test over the tasks that differ (ties dropped) — assumption-free, but it needs
    at least five differing tasks to clear 0.95; ``bootstrap``: the share of resampled mean differences at or below
    zero, from the same resamples as the interval."""
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    """The test's one-sided confidence: accepted only when its p-value is at most ``1 - confidence``."""
    resamples: int = Field(default=10_000, ge=100, le=1_000_000)
    """Bootstrap resamples of the tasks (the interval, and the ``bootstrap`` test)."""
    seed: int = 0
    """Seed of the bootstrap: the same per-task results always give the same interval and decision (a resumed round
    decides as the uninterrupted one did)."""

    def build(self) -> AcceptancePolicy:
        return PairedImprovement(test=self.test, confidence=self.confidence, resamples=self.resamples,
                                 seed=self.seed)
