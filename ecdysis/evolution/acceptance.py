"""Acceptance policies, when a candidate harness replaces the current one, as ``acceptance`` extensions
(``training.acceptance: strict``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from ecdysis.extensions import section


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


class AcceptanceSection(BaseModel):
    """Base of an acceptance policy's ``training.acceptance`` section; each subclass narrows ``type`` to its registry
    name and builds its policy."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    type: str
    """Which acceptance policy."""

    def build(self) -> AcceptancePolicy:
        """The policy this section describes."""
        raise NotImplementedError


class StrictAcceptance(AcceptanceSection):
    """``strict`` (the paper's rule): keep the candidate iff its training score is strictly above the base's."""

    type: Literal["strict"] = "strict"
    """Selects strict improvement."""

    def build(self) -> AcceptancePolicy:
        return StrictImprovement()


DEFAULT = "strict"

if TYPE_CHECKING:
    AcceptanceConfig = AcceptanceSection
else:
    AcceptanceConfig = section("acceptance", AcceptanceSection, default=DEFAULT)
    """The ``training.acceptance`` section (a bare name stands for ``{type: name}``)."""


def register_extensions() -> None:
    """Register ``strict``."""
    from ecdysis.extensions import register

    register("acceptance", "strict", "keep a candidate iff its training score is strictly above the base's",
             config=StrictAcceptance)
