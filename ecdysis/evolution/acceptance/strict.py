"""``strict`` (the paper's rule): keep the candidate iff its training score is strictly above the base's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ecdysis.evolution.acceptance.seam import AcceptancePolicy, AcceptanceSection, Decision, TrainingResults
from ecdysis.extensions import register


@dataclass(frozen=True)
class StrictImprovement:
    """Accept iff the candidate's training score is strictly higher (by more than ``epsilon``, which absorbs
    floating-point noise in averaged rewards). Only the two scores count, not how the tasks moved."""

    epsilon: float = 1e-9

    def decide(self, base: TrainingResults, candidate: TrainingResults) -> Decision:
        """Accepted iff ``candidate.score > base.score + epsilon``."""
        before, after = base.score, candidate.score
        if after > before + self.epsilon:
            return Decision(True, f"training score improved {before:.4f} -> {after:.4f}")
        return Decision(False, f"training score did not improve ({before:.4f} -> {after:.4f})")


class StrictAcceptance(AcceptanceSection):
    """``strict`` (the paper's rule): keep the candidate iff its training score is strictly above the base's."""

    type: Literal["strict"] = "strict"
    """Selects strict improvement."""

    def build(self) -> AcceptancePolicy:
        return StrictImprovement()


def register_extensions() -> None:
    """Register ``strict``."""
    register("acceptance", "strict", "keep a candidate iff its training score is strictly above the base's",
             config=StrictAcceptance)
