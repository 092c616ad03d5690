"""The evaluation seam of the training loop: an `Evaluator` scores a harness and hands back the whole batch.

The loop keeps the batch it got (its trajectories become the round's failure records) instead of reading them back
from the store; only a resumed run reads stored trajectories.

>>> evaluator = FunctionEvaluator(lambda harness, phase, round_: run_episodes(harness.path))   # doctest: +SKIP
>>> batch = evaluator.evaluate(HarnessRef(path, digest), "base", 0)                          # doctest: +SKIP
>>> batch.score, len(batch.trajectories)                                                     # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ecdysis.evolution.accounting import rollout_stats
from ecdysis.records import PhaseStats, Trajectory


@dataclass(frozen=True)
class HarnessRef:
    """A harness bundle on this machine and its content hash."""

    path: Path
    hash: str


@dataclass(frozen=True)
class EvaluationBatch:
    """What one evaluation produced: its trajectories (unique ids, the run's ``run_id`` and the given round), their
    score and the phase's accounting."""

    trajectories: list[Trajectory]
    score: float
    stats: PhaseStats


class Evaluator(Protocol):
    """Evaluates a harness on the run's training tasks (``phase``: ``base`` or ``candidate``; held-out: ``eval``).
    Infrastructure endings are already retried; those left are excluded from the score."""

    def evaluate(self, harness: HarnessRef, phase: str, round: int) -> EvaluationBatch:
        """Run the episodes of ``harness`` for ``round`` and return the batch."""
        ...


def score(trajectories: Sequence[Trajectory]) -> float:
    """Mean reward over trajectories that did not end for infrastructure reasons (0.0 when none did)."""
    counted = [t.reward for t in trajectories if not t.termination_reason.is_infrastructure]
    return sum(counted) / len(counted) if counted else 0.0


def batch_of(trajectories: list[Trajectory], wall_time_s: float) -> EvaluationBatch:
    """The batch of ``trajectories`` that took ``wall_time_s`` to produce."""
    return EvaluationBatch(trajectories, score(trajectories), rollout_stats(trajectories, wall_time_s))


class FunctionEvaluator:
    """An `Evaluator` over a function ``(harness, phase, round) -> trajectories`` (tests, in-process runs)."""

    def __init__(self, run: Callable[[HarnessRef, str, int], list[Trajectory]]) -> None:
        self.run = run

    def evaluate(self, harness: HarnessRef, phase: str, round: int) -> EvaluationBatch:
        """Time ``run`` and score what it returns."""
        started = time.monotonic()
        trajectories = self.run(harness, phase, round)
        return batch_of(trajectories, time.monotonic() - started)
