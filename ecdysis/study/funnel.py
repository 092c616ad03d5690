"""What each trained configuration's rounds did, as a funnel: rounds with failures, rounds whose diagnosis produced a
specification proposing a change, candidates the coder made (a harness that differs from the base), candidates that
validated and were evaluated, candidates that scored higher than their base on the training tasks, and candidates
accepted. Where a study's target is missed, this says at which step the loop stopped learning."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ecdysis.records import ModificationSpec, RoundResult


@dataclass(frozen=True)
class Funnel:
    """One training run's rounds, counted step by step (each count is of rounds)."""

    rounds: int
    """Rounds that had failures to diagnose."""
    specified: int
    """Rounds whose diagnosis produced a modification specification that proposes at least one change."""
    changed: int
    """Rounds whose coder left a harness that differs from the base."""
    validated: int
    """Rounds whose candidate validated and was evaluated on the training tasks."""
    improved: int
    """Rounds whose candidate's training score was above its base's."""
    accepted: int
    """Rounds whose candidate the acceptance policy kept."""
    notes: tuple[str, ...]
    """A line per round: scores, the decision and its reason."""


def training_funnel(store: Any, run_id: str, rounds: list[RoundResult]) -> Funnel:
    """The funnel of run ``run_id`` over its (deduplicated) ``rounds``."""
    specified = {s.round for s in store.read("specs", run_id=run_id)
                 if isinstance(s, ModificationSpec) and s.proposed_changes}
    worked = [r for r in rounds if r.n_failures > 0]
    changed = [r for r in worked if r.candidate_hash is not None and r.candidate_hash != r.base_hash]
    validated = [r for r in worked if r.candidate_score is not None]
    improved = [r for r in validated if r.candidate_score is not None and r.candidate_score > r.base_score]
    notes = []
    for r in rounds:
        candidate = "no candidate" if r.candidate_score is None else f"candidate {r.candidate_score:.2f}"
        verdict = "accepted" if r.accepted else "rolled back"
        why = " ".join(r.note.split())[:160]
        notes.append(f"round {r.round}: {r.n_failures} failures, base {r.base_score:.2f} → {candidate}, {verdict}"
                     + (f" ({why})" if why else ""))
    return Funnel(rounds=len(worked), specified=sum(1 for r in worked if r.round in specified), changed=len(changed),
                  validated=len(validated), improved=len(improved), accepted=sum(1 for r in worked if r.accepted),
                  notes=tuple(notes))
