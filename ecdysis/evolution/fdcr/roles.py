"""What each FDCR role must return (pydantic schemas the gateway validates replies against)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.records import ProposedChange

Concern = Literal[
    "model_specific", "overfits_one_task", "thin_evidence", "shrinks_action_space", "hard_coded_answer", "other"
]
"""Why the Critic doubts a cause: a model-specific accommodation, over-fitting one task, evidence too thin, a fix
that shrinks the valid action space of other models, an answer hard-coded from one task's evidence, or another."""


class RoleOutput(BaseModel):
    """Base of every role's reply: unknown fields are rejected, so a sloppy reply is re-asked."""

    model_config = ConfigDict(extra="forbid")


class Cause(RoleOutput):
    """A failure cause the Analyst proposes."""

    cause_id: str = Field(description="Short unique handle, e.g. 'C1'.")
    description: str = Field(description="What in the harness lets these failures happen.")
    failure_ids: list[str] = Field(description="Failure record ids that show this cause (at least one).")
    patterns: list[str] = Field(default_factory=list, description="Attribution pattern ids (P1, P2...) involved.")


class AnalystOutput(RoleOutput):
    """The Analyst's proposed causes."""

    causes: list[Cause]


class CriticVerdict(RoleOutput):
    """The Critic's judgement of one cause."""

    cause_id: str
    keep: bool
    concerns: list[Concern] = Field(default_factory=list)
    reason: str


class CriticOutput(RoleOutput):
    """The Critic's verdict on every cause of the pass."""

    verdicts: list[CriticVerdict]


class EngineeredChange(RoleOutput):
    """One concrete harness change, tied to the surviving cause it addresses."""

    cause_id: str
    change: ProposedChange


class EngineerOutput(RoleOutput):
    """The Engineer's changes for the surviving causes."""

    changes: list[EngineeredChange]


class LiteralVerdict(RoleOutput):
    """The Critic's judgement of a change flagged as hard-coding one task's answer."""

    change_ref: str = Field(description="The flagged change's reference, e.g. 'E2'.")
    acceptable: bool = Field(description="True only if the literal is a general rule, not one task's answer.")
    reason: str


class LiteralReview(RoleOutput):
    """The Critic's verdicts on the flagged changes of a pass."""

    verdicts: list[LiteralVerdict]
