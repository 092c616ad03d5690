"""Acceptance policy: when a candidate harness replaces the current one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Decision:
    """Keep the candidate or not, and why."""

    accepted: bool
    reason: str


class AcceptancePolicy(Protocol):
    """Decides between the current harness and a candidate from their training scores."""

    def decide(self, base_score: float, candidate_score: float) -> Decision: ...


@dataclass(frozen=True)
class StrictImprovement:
    """Accept iff the candidate's training score is strictly higher (by more than ``epsilon``, which absorbs
    floating-point noise in averaged rewards)."""

    epsilon: float = 1e-9

    def decide(self, base_score: float, candidate_score: float) -> Decision:
        """Accepted iff ``candidate_score > base_score + epsilon``."""
        if candidate_score > base_score + self.epsilon:
            return Decision(True, f"training score improved {base_score:.4f} -> {candidate_score:.4f}")
        return Decision(False, f"training score did not improve ({base_score:.4f} -> {candidate_score:.4f})")
