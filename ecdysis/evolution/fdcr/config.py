"""Configuration of the FDCR diagnoser (pydantic, unknown fields rejected)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ecdysis.records import Role

FDCR_ROLES = (Role.ANALYST, Role.CRITIC, Role.ENGINEER, Role.MODERATOR)


class FDCRConfig(BaseModel):
    """How :class:`ecdysis.evolution.fdcr.FDCRDiagnoser` runs its roles."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["fdcr"] = "fdcr"
    """Discriminator in the union of diagnoser configs."""
    models: dict[Role, str]
    """The litellm model string of each role: analyst, critic, engineer and moderator (all four required)."""
    passes: int = Field(default=2, ge=1)
    """Analyst → Critic → Engineer passes before the Moderator; each pass sees the previous pass's outputs."""
    max_attempts: int = Field(default=3, ge=1)
    """Calls per role turn before an invalid structured reply becomes an ``FDCRError`` (re-asks included)."""
    harness_budget_chars: int = Field(default=24_000, ge=1_000)
    """Characters of harness source quoted in the Analyst, Critic and Engineer prompts (a quarter for the
    Moderator)."""
    evidence_budget_chars: int = Field(default=16_000, ge=1_000)
    """Characters of failure evidence quoted in the Analyst, Critic and Engineer prompts (half for the Moderator)."""
    aggregator_model: str | None = None
    """Model that summarises each systematic pattern when the round's failures exceed ``evidence_budget_chars``
    (:mod:`ecdysis.evolution.fdcr.summaries`); None: no summaries, the evidence is cut to the budget as it is."""
    task_models: list[str] | None = None
    """Every task model trained in the round, so a pattern confined to one of them is known to be model-specific
    even when the other models had no failures; None uses the models seen in the failures."""

    @field_validator("models")
    @classmethod
    def _all_roles(cls, models: dict[Role, str]) -> dict[Role, str]:
        missing = [role.value for role in FDCR_ROLES if not models.get(role)]
        if missing:
            raise ValueError(f"no model for role(s) {', '.join(missing)} (set models.{missing[0]})")
        extra = [role.value for role in models if role not in FDCR_ROLES]
        if extra:
            raise ValueError(f"models.{extra[0]}: not an FDCR role (expected {', '.join(r.value for r in FDCR_ROLES)})")
        return models
