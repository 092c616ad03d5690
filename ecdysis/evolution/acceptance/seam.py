"""The acceptance seam: what a policy sees (each side's training results, task by task), what it answers (a
`Decision`), and the ``training.acceptance`` config section every policy's own section derives from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import fmean
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict

from ecdysis.extensions import section
from ecdysis.records import ImprovementEstimate, Trajectory


@dataclass(frozen=True)
class Decision:
    """Keep the candidate or not, and why."""

    accepted: bool
    reason: str
    improvement: ImprovementEstimate | None = None
    """The paired improvement and its interval, for policies that estimate one (recorded on the round)."""


def task_key(trajectory: Trajectory) -> str:
    """What pairs a base trajectory with the candidate's: the task (domain and id) and, as a task is evaluated once per
    task model, the model (``model | domain/task_id``)."""
    return f"{trajectory.model} | {trajectory.task.domain}/{trajectory.task.task_id}"


@dataclass(frozen=True)
class TrainingResults:
    """One harness's training evaluation as a policy sees it: its score and its rewards task by task.

    >>> TrainingResults(0.5, {"m | d/t1": (1.0, 0.0)}).task_means()
    {'m | d/t1': 0.5}
    """

    score: float
    """The evaluation's training score (the mean reward over counted trajectories, as the evaluator scored it)."""
    rewards: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Task key (:func:`task_key`) -> the rewards of its counted trials, in trial order; trajectories that ended for
    infrastructure reasons are not counted, as in the score."""

    @classmethod
    def of(cls, score: float, trajectories: Iterable[Trajectory]) -> TrainingResults:
        """The results of an evaluation that scored ``score`` from ``trajectories``."""
        trials: dict[str, list[tuple[int, float]]] = {}
        for trajectory in trajectories:
            if not trajectory.termination_reason.is_infrastructure:
                trials.setdefault(task_key(trajectory), []).append((trajectory.trial, trajectory.reward))
        return cls(score, {key: tuple(reward for _, reward in sorted(kept)) for key, kept in sorted(trials.items())})

    def task_means(self) -> dict[str, float]:
        """Task key -> mean reward over its counted trials."""
        return {key: fmean(rewards) for key, rewards in self.rewards.items() if rewards}


class AcceptancePolicy(Protocol):
    """Decides between the current harness and a candidate from their training results (both evaluated on the same
    tasks, with the same trials and seeds)."""

    def decide(self, base: TrainingResults, candidate: TrainingResults) -> Decision: ...


class AcceptanceSection(BaseModel):
    """Base of an acceptance policy's ``training.acceptance`` section; each subclass narrows ``type`` to its registry
    name and builds its policy."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    type: str
    """Which acceptance policy."""

    def build(self) -> AcceptancePolicy:
        """The policy this section describes."""
        raise NotImplementedError


DEFAULT = "strict"

if TYPE_CHECKING:
    AcceptanceConfig = AcceptanceSection
else:
    AcceptanceConfig = section("acceptance", AcceptanceSection, default=DEFAULT)
    """The ``training.acceptance`` section (a bare name stands for ``{type: name}``)."""
