"""What one FDCR round did: attribution, every role's output per pass, removals, check outcomes, tokens by role."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.evolution.fdcr.attribution import Attribution
from ecdysis.evolution.fdcr.checks import CheckOutcome
from ecdysis.evolution.fdcr.roles import Cause, Concern
from ecdysis.records import Role, TokenUsage


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Turn(_Model):
    """One role's turn: what it was asked (by digest) and what it answered. Persisted as soon as it finishes."""

    key: str
    """``p<pass>-<role>`` (``p1-analyst``, ``p2-critic-literals``...) or ``moderator``."""
    role: Role
    pass_index: int | None = None
    model: str
    input_digest: str
    """sha256 of the messages sent (the model string is not part of it); a stored turn is reused only if equal."""
    output: dict[str, Any]
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    """Tokens of the gateway calls this turn made (re-asks included), metered from the gateway's usage."""
    calls: int = 0
    resumed: bool = False
    """True when this run loaded the turn from the store instead of asking the model."""


class CriticRemoval(_Model):
    """A cause the Critic rejected."""

    pass_index: int
    cause: Cause
    concerns: list[Concern] = Field(default_factory=list)
    reason: str


class CauseDrop(_Model):
    """A cause dropped before the Critic saw it (no existing failure id cited, or a repeated cause id)."""

    pass_index: int
    cause: Cause
    reason: str


class FDCRReport(_Model):
    """The report of one FDCR round, stored as the keyed object ``fdcr/<run_id>/<round>/report``."""

    run_id: str
    round: int
    passes: int
    models: dict[str, str]
    attribution: Attribution
    attribution_table: str
    turns: list[Turn] = Field(default_factory=list)
    cause_drops: list[CauseDrop] = Field(default_factory=list)
    critic_removed: list[CriticRemoval] = Field(default_factory=list)
    critic_unfounded: list[CriticRemoval] = Field(default_factory=list)
    """Verdicts that would have removed a cause without naming a concern: the cause was kept."""
    checks: list[CheckOutcome] = Field(default_factory=list)
    """Every check outcome: dropped, trimmed (unknown ids removed), flagged, kept with the Moderator's reason."""
    tokens_by_role: dict[str, TokenUsage] = Field(default_factory=dict)
    calls_by_role: dict[str, int] = Field(default_factory=dict)
    """Gateway calls by role made by this run (resumed turns count zero)."""
    spec_id: str | None = None
    error: str | None = None

    def turn(self, key: str) -> Turn | None:
        """The turn stored under ``key``, if it ran."""
        return next((t for t in self.turns if t.key == key), None)

    def dropped(self, stage: str | None = None) -> list[CheckOutcome]:
        """Check outcomes that removed a change (optionally only at ``stage``: engineer or spec)."""
        return [c for c in self.checks if c.action == "dropped" and (stage is None or c.stage == stage)]

    def add_turn(self, turn: Turn) -> None:
        """Record ``turn`` and fold its tokens and calls into the per-role totals."""
        self.turns.append(turn)
        role = turn.role.value
        self.tokens_by_role[role] = self.tokens_by_role.get(role, TokenUsage()) + turn.tokens
        self.calls_by_role.setdefault(role, 0)
        if not turn.resumed:
            self.calls_by_role[role] += turn.calls
