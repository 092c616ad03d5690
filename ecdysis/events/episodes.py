"""Evaluation progress as events: phase start/end, one event per finished episode, retries, budget warnings.

An episode event's payload carries the episode's steps by kind (:meth:`~ecdysis.records.Trajectory.step_counts`):
``tool_calls`` (the agent's, blocked included), ``blocked``, and ``user_actions`` (a dual-control user's own tool
calls); the phase's end sums them."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ecdysis.llm.budget import Budget
from ecdysis.records import EventKind, Phase, Trajectory

STEP_KINDS = ("tool_calls", "blocked", "user_actions")
"""Payload keys of an episode's steps by kind, on its episode event and summed on its phase's end."""
BUDGET_WARNING_AT = 0.8
"""Share of ``max_tokens`` / ``max_usd`` at which one budget warning is published."""


def counts_as_failure(trajectory: Trajectory, threshold: float) -> bool:
    """Whether an episode counts as a failure, as training counts it (``training.failure_threshold``): below the
    threshold and not an infrastructure ending."""
    return not trajectory.termination_reason.is_infrastructure and trajectory.reward < threshold


class EvaluationReporter:
    """Runs an evaluation on a rollout pool and publishes its progress to an event sink.

    ``budget`` is the run's account (None: no budget warning). An episode counts as a failure when it scores below
    ``threshold`` (infrastructure endings excluded).

    Example::

        reporter = EvaluationReporter(log, threshold=1.0)
        trajectories = reporter.evaluate(pool, requests, round_=0, phase=Phase.EVALUATION)
    """

    def __init__(self, events: Any, *, threshold: float, budget: Budget | None = None) -> None:
        self.events = events
        self.threshold = threshold
        self.budget = budget
        self._warned = False

    def evaluate(self, pool: Any, requests: Sequence[Any], *, round_: int, phase: Phase,
                 on_result: Callable[[Trajectory], None] | None = None) -> list[Trajectory]:
        """``pool.evaluate(requests)`` with phase_started, episode, retry and phase_ended events; ``on_result`` also
        gets each finished trajectory."""
        total = len(requests)
        counts = {"done": 0, "failures": 0, "tokens": 0}
        steps = dict.fromkeys(STEP_KINDS, 0)
        cost = [0.0]
        started = time.monotonic()
        self.events.emit(EventKind.PHASE_STARTED, round=round_, phase=phase, total=total)

        def finished(t: Trajectory) -> None:
            counts["done"] += 1
            counts["failures"] += int(self.failed(t))
            counts["tokens"] += t.tokens.total
            cost[0] += t.cost_usd or 0.0
            episode_steps = t.step_counts()
            for kind in STEP_KINDS:
                steps[kind] += episode_steps[kind]
            self.events.emit(EventKind.EPISODE, round=round_, phase=phase, done=counts["done"], total=total,
                             failures=counts["failures"], tokens=t.tokens.total, cost_usd=t.cost_usd or 0.0,
                             payload={"task_id": t.task.task_id, "model": t.model, "reward": t.reward,
                                      "termination": t.termination_reason.value, **episode_steps})
            self._check_budget(round_)
            if on_result is not None:
                on_result(t)

        def on_retry(t: Trajectory) -> None:
            self.events.emit(EventKind.RETRY, round=round_, phase=phase, done=counts["done"], total=total,
                             payload={"task_id": t.task.task_id, "attempt": t.attempt,
                                      "termination": t.termination_reason.value, "error": (t.error or "")[:300]})

        trajectories: list[Trajectory] = pool.evaluate(requests, on_result=finished, on_retry=on_retry)
        self.events.emit(EventKind.PHASE_ENDED, round=round_, phase=phase, done=counts["done"], total=total,
                         failures=counts["failures"], tokens=counts["tokens"], cost_usd=cost[0],
                         payload={"wall_time_s": round(time.monotonic() - started, 3), **steps})
        return trajectories

    def failed(self, trajectory: Trajectory) -> bool:
        """Whether ``trajectory`` counts as a failure: below the threshold, not an infrastructure ending."""
        return counts_as_failure(trajectory, self.threshold)

    def _check_budget(self, round_: int) -> None:
        if self._warned or self.budget is None or not self.budget.limited:
            return
        nearing = self.budget.nearing(BUDGET_WARNING_AT)
        if nearing is not None:
            self._warned = True
            name, used, limit = nearing
            tokens, usd = self.budget.spent()
            self.events.emit(EventKind.BUDGET_WARNING, round=round_, tokens=int(tokens), cost_usd=usd,
                             payload={"budget": name, "used": used, "limit": limit})
