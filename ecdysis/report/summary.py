"""Figures a report and ``runs compare`` show: usage by role, time by phase, held-out rows, outcomes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ecdysis.evolution.accommodation import AccommodationRate, accepted_changes, rate_by_round
from ecdysis.metrics import EvalSummary, final_attempts, is_success, summarize
from ecdysis.records import LLMCallRecord, RoundResult, Trajectory
from ecdysis.report.data import RunData

PHASE_ORDER = ("evaluation", "diagnosis", "coding", "validation", "candidate_evaluation")
HELDOUT_PHASE = "eval"
DEFAULT_K = 3


@dataclass(frozen=True)
class RoleUsage:
    """LLM calls of one role, summed over a run."""

    role: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    cache_hits: int
    cost_usd: float | None
    """None when some call has no known cost."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class HeldoutRow:
    """One row of the comparison table: a (run, harness, model) cell over ``eval``-phase trajectories."""

    run_id: str
    method: str
    summary: EvalSummary

    @property
    def label(self) -> str:
        return f"{self.method} · {self.summary.model} · {self.summary.harness[:8]}"


def usage_by_role(calls: Iterable[LLMCallRecord]) -> list[RoleUsage]:
    """Calls, tokens and cost per role, largest token users first."""
    groups: dict[str, list[LLMCallRecord]] = defaultdict(list)
    for call in calls:
        groups[call.role.value].append(call)
    rows = []
    for role, group in groups.items():
        costs = [c.cost_usd for c in group]
        rows.append(RoleUsage(
            role=role,
            calls=len(group),
            prompt_tokens=sum(c.tokens.prompt_tokens for c in group),
            completion_tokens=sum(c.tokens.completion_tokens for c in group),
            cached_prompt_tokens=sum(c.tokens.cached_prompt_tokens for c in group),
            cache_hits=sum(c.cache_hit for c in group),
            cost_usd=None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
        ))
    return sorted(rows, key=lambda r: (-r.total_tokens, r.role))


def phase_names(rounds: Iterable[RoundResult]) -> list[str]:
    """The phases recorded in ``rounds``: the loop's order first, then any others alphabetically."""
    seen = {name for r in rounds for name in r.phases}
    return [p for p in PHASE_ORDER if p in seen] + sorted(seen - set(PHASE_ORDER))


def phase_totals(rounds: Sequence[RoundResult]) -> dict[str, float]:
    """Wall-clock seconds per phase, summed over rounds."""
    return {name: sum(r.phases[name].wall_time_s for r in rounds if name in r.phases) for name in phase_names(rounds)}


def heldout_rows(runs: Iterable[RunData], k: int = DEFAULT_K) -> list[HeldoutRow]:
    """One row per (run, harness, model) of the runs' ``eval``-phase trajectories, in run then model order."""
    rows = []
    for run in runs:
        cells: dict[tuple[str, str], list[Trajectory]] = defaultdict(list)
        for t in final_attempts(run.trajectories):  # a retried episode counts once, as its last attempt
            if t.phase == HELDOUT_PHASE:
                cells[(t.harness_hash, t.model)].append(t)
        for (harness, model), group in sorted(cells.items(), key=lambda item: (item[0][1], item[0][0])):
            rows.append(HeldoutRow(run.run_id, run.method, summarize(group, harness=harness, model=model, k=k)))
    return rows


def outcome(trajectory: Trajectory) -> str:
    """``success``, ``failure`` or ``excluded`` (an infrastructure ending that never counts as evidence)."""
    if trajectory.termination_reason.is_infrastructure:
        return "excluded"
    return "success" if is_success(trajectory.reward) else "failure"


def total_cost(calls: Iterable[LLMCallRecord]) -> float | None:
    """The summed cost of ``calls``; None when any cost is unknown."""
    costs = [c.cost_usd for c in calls]
    return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)


def accommodation(run: RunData) -> tuple[AccommodationRate, dict[int, AccommodationRate]]:
    """The run's model-accommodation rate over its accepted changes, overall and per round that accepted some
    (:mod:`ecdysis.evolution.accommodation`)."""
    changes = accepted_changes(run.latest_rounds(), run.specs, run.failures)
    return AccommodationRate.of(changes), rate_by_round(changes)


def rate_text(rate: AccommodationRate) -> str:
    """``45.5% (5 of 11)`` (accommodations of attributed accepted changes), ``-`` when there are none."""
    if rate.rate is None:
        return "-" if not rate.unattributed else f"- ({rate.unattributed} unattributed)"
    text = f"{rate.rate:.1%} ({rate.accommodations} of {rate.repairs + rate.accommodations})"
    return text + (f", {rate.unattributed} unattributed" if rate.unattributed else "")
