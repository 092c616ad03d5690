"""Deterministic checks on proposed changes, at the Engineer's output and on the Moderator's final spec.

- **citation**: a change cites at least one failure record id of the round; unknown ids are removed (``trimmed``),
  a change left with none is ``dropped``.
- **unknown_cause / rejected_cause**: an Engineer change must address a cause that survived the Critic; in the final
  spec, a change whose evidence lies only in failures cited by causes the Critic rejected is dropped, so a rejected
  cause cannot come back through the Moderator.
- **hard_coded**: a change whose text holds a literal of one task's evidence (see
  :mod:`ecdysis.evolution.fdcr.literals`) is ``flagged`` at the Engineer stage (the Critic is asked about it), and in
  the final spec it is ``dropped`` unless the Moderator set ``literal_justification`` (then ``kept_with_reason``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.evolution.fdcr.literals import LiteralHit, LiteralIndex
from ecdysis.evolution.fdcr.roles import EngineeredChange, LiteralVerdict
from ecdysis.records import ProposedChange

CheckName = Literal["citation", "hard_coded", "rejected_cause", "unknown_cause"]
CheckAction = Literal["dropped", "trimmed", "flagged", "kept_with_reason"]


class CheckOutcome(BaseModel):
    """What a check did to one change, and why."""

    model_config = ConfigDict(extra="forbid")

    check: CheckName
    action: CheckAction
    stage: Literal["engineer", "spec"]
    pass_index: int | None = None
    change_ref: str
    """``E<n>`` for the n-th Engineer change of the pass, ``M<n>`` for the n-th change of the Moderator's spec."""
    change: ProposedChange
    reason: str
    hits: list[LiteralHit] = Field(default_factory=list)
    critic_verdict: LiteralVerdict | None = None
    """For a hard-coding flag: the Critic's view of the literals (the decision itself does not depend on it)."""

    def prompt_view(self) -> dict[str, Any]:
        """How the Critic sees a flagged change of the final spec."""
        return {"ref": self.change_ref, "change": self.change.model_dump(mode="json"),
                "flagged_literals": [hit.model_dump(mode="json") for hit in self.hits]}


@dataclass
class Candidate:
    """An Engineer change that passed the Engineer-stage checks, with its literal flags and the Critic's view."""

    ref: str
    cause_id: str
    change: ProposedChange
    hits: list[LiteralHit] = field(default_factory=list)
    critic_verdict: LiteralVerdict | None = None

    def prompt_view(self) -> dict[str, Any]:
        """How later roles see this change."""
        return {
            "ref": self.ref, "cause_id": self.cause_id, "change": self.change.model_dump(mode="json"),
            "flagged_literals": [hit.model_dump(mode="json") for hit in self.hits],
            "critic_on_literals": None if self.critic_verdict is None else self.critic_verdict.model_dump(mode="json"),
        }


def change_text(change: ProposedChange) -> str:
    """The free text of a change that could carry a hard-coded value."""
    return f"{change.description}\n{change.rationale}"


def cite_existing(change: ProposedChange, known_ids: set[str]) -> tuple[ProposedChange | None, list[str]]:
    """``change`` with its evidence limited to ``known_ids`` (None when nothing is left), and the unknown ids."""
    cited = list(dict.fromkeys(change.evidence))
    kept = [fid for fid in cited if fid in known_ids]
    unknown = [fid for fid in cited if fid not in known_ids]
    if not kept:
        return None, unknown
    return change.model_copy(update={"evidence": kept}), unknown


@dataclass(frozen=True)
class _Where:
    stage: Literal["engineer", "spec"]
    pass_index: int | None
    ref: str

    def outcome(self, check: CheckName, action: CheckAction, change: ProposedChange, reason: str,
                hits: Sequence[LiteralHit] = ()) -> CheckOutcome:
        return CheckOutcome(check=check, action=action, stage=self.stage, pass_index=self.pass_index,
                            change_ref=self.ref, change=change, reason=reason, hits=list(hits))


def _citation(change: ProposedChange, known_ids: set[str], where: _Where,
              outcomes: list[CheckOutcome]) -> ProposedChange | None:
    cited, unknown = cite_existing(change, known_ids)
    if cited is None:
        reason = f"cites no failure record of this round (cited {change.evidence or 'nothing'})"
        outcomes.append(where.outcome("citation", "dropped", change, reason))
    elif unknown:
        outcomes.append(where.outcome("citation", "trimmed", cited, f"removed unknown failure ids {unknown}"))
    return cited


def _literal_reason(hits: Sequence[LiteralHit]) -> str:
    found = ", ".join(f"{h.literal!r} ({h.source} of task {h.task_id})" for h in hits)
    return f"hard-codes literal(s) of a single task's evidence: {found}"


def check_engineer_changes(changes: Sequence[EngineeredChange], pass_index: int, surviving: set[str],
                           rejected: set[str], known_ids: set[str],
                           literals: LiteralIndex) -> tuple[list[Candidate], list[CheckOutcome]]:
    """The Engineer's changes that address a surviving cause and cite real failures; literal hits flagged."""
    candidates: list[Candidate] = []
    outcomes: list[CheckOutcome] = []
    for number, engineered in enumerate(changes, start=1):
        ref = f"E{number}"
        where = _Where("engineer", pass_index, ref)
        if engineered.cause_id not in surviving:
            check: CheckName = "rejected_cause" if engineered.cause_id in rejected else "unknown_cause"
            reason = (f"addresses cause {engineered.cause_id!r}, which the Critic rejected" if check == "rejected_cause"
                      else f"addresses {engineered.cause_id!r}, which is not a surviving cause of this pass")
            outcomes.append(where.outcome(check, "dropped", engineered.change, reason))
            continue
        change = _citation(engineered.change, known_ids, where, outcomes)
        if change is None:
            continue
        hits = literals.hits(change_text(change))
        if hits:
            reason = _literal_reason(hits) + "; the Critic is asked"
            outcomes.append(where.outcome("hard_coded", "flagged", change, reason, hits))
        candidates.append(Candidate(ref=ref, cause_id=engineered.cause_id, change=change, hits=hits))
    return candidates, outcomes


def check_spec(changes: Sequence[ProposedChange], rejected_only_ids: set[str], known_ids: set[str],
               literals: LiteralIndex) -> tuple[list[ProposedChange], list[CheckOutcome]]:
    """The Moderator's changes that survive every check, and what each check did."""
    kept: list[ProposedChange] = []
    outcomes: list[CheckOutcome] = []
    for number, proposed in enumerate(changes, start=1):
        where = _Where("spec", None, f"M{number}")
        change = _citation(proposed, known_ids, where, outcomes)
        if change is None:
            continue
        if set(change.evidence) <= rejected_only_ids:
            reason = f"rests only on failures {change.evidence} cited by causes the Critic rejected"
            outcomes.append(where.outcome("rejected_cause", "dropped", change, reason))
            continue
        hits = literals.hits(change_text(change))
        if hits:
            justification = (change.literal_justification or "").strip()
            if not justification:
                outcomes.append(where.outcome("hard_coded", "dropped", change,
                                              _literal_reason(hits) + "; no literal_justification given", hits))
                continue
            outcomes.append(where.outcome("hard_coded", "kept_with_reason", change,
                                          f"{_literal_reason(hits)}; Moderator's reason: {justification}", hits))
        kept.append(change)
    return kept, outcomes
