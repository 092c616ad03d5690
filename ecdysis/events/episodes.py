"""Evaluation progress as events: phase start/end, one event per finished episode, retries, budget warnings."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ecdysis.records import EventKind, Phase, Trajectory

BUDGET_WARNING_AT = 0.8
"""Share of ``max_tokens`` / ``max_usd`` at which one budget warning is published."""


class EvaluationReporter:
    """Runs an evaluation on a rollout pool and publishes its progress to an event sink.

    ``spent()`` gives the run's (tokens, USD) so far; ``max_tokens`` / ``max_usd`` are the run budget (None: no
    budget). An episode counts as a failure when it scores below ``threshold`` (infrastructure endings excluded).

    Example::

        reporter = EvaluationReporter(log, threshold=1.0)
        trajectories = reporter.evaluate(pool, requests, round_=0, phase=Phase.EVALUATION)
    """

    def __init__(self, events: Any, *, threshold: float, spent: Callable[[], tuple[float, float]] | None = None,
                 max_tokens: int | None = None, max_usd: float | None = None) -> None:
        self.events = events
        self.threshold = threshold
        self.spent = spent
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self._warned = False

    def evaluate(self, pool: Any, requests: Sequence[Any], *, round_: int, phase: Phase) -> list[Trajectory]:
        """``pool.evaluate(requests)`` with phase_started, episode, retry and phase_ended events."""
        total = len(requests)
        counts = {"done": 0, "failures": 0, "tokens": 0}
        cost = [0.0]
        started = time.monotonic()
        self.events.emit(EventKind.PHASE_STARTED, round=round_, phase=phase, total=total)

        def on_result(t: Trajectory) -> None:
            counts["done"] += 1
            failed = not t.termination_reason.is_infrastructure and t.reward < self.threshold
            counts["failures"] += int(failed)
            counts["tokens"] += t.tokens.total
            cost[0] += t.cost_usd or 0.0
            self.events.emit(EventKind.EPISODE, round=round_, phase=phase, done=counts["done"], total=total,
                             failures=counts["failures"], tokens=t.tokens.total, cost_usd=t.cost_usd or 0.0,
                             payload={"task_id": t.task.task_id, "model": t.model, "reward": t.reward,
                                      "termination": t.termination_reason.value})
            self._check_budget(round_)

        def on_retry(t: Trajectory) -> None:
            self.events.emit(EventKind.RETRY, round=round_, phase=phase, done=counts["done"], total=total,
                             payload={"task_id": t.task.task_id, "attempt": t.attempt,
                                      "termination": t.termination_reason.value, "error": (t.error or "")[:300]})

        trajectories: list[Trajectory] = pool.evaluate(requests, on_result=on_result, on_retry=on_retry)
        self.events.emit(EventKind.PHASE_ENDED, round=round_, phase=phase, done=counts["done"], total=total,
                         failures=counts["failures"], tokens=counts["tokens"], cost_usd=cost[0],
                         payload={"wall_time_s": round(time.monotonic() - started, 3)})
        return trajectories

    def _check_budget(self, round_: int) -> None:
        if self._warned or self.spent is None or (self.max_tokens is None and self.max_usd is None):
            return
        tokens, usd = self.spent()
        for used, limit, name in ((tokens, self.max_tokens, "max_tokens"), (usd, self.max_usd, "max_usd")):
            if limit is not None and used >= BUDGET_WARNING_AT * limit:
                self._warned = True
                self.events.emit(EventKind.BUDGET_WARNING, round=round_, tokens=int(tokens), cost_usd=usd,
                                 payload={"budget": name, "used": float(used), "limit": float(limit)})
                return
