"""Failure-Driven Collaborative Refinement (FDCR): attribution of a round's failures across tasks and models, then
Analyst → Critic → Engineer passes and a Moderator that writes the modification specification."""

from ecdysis.evolution.fdcr.attribution import Attribution, ModelScope, PatternEvidence, TaskScope, attribute
from ecdysis.evolution.fdcr.checks import CheckOutcome, check_engineer_changes, check_spec
from ecdysis.evolution.fdcr.config import FDCRConfig
from ecdysis.evolution.fdcr.journal import TurnJournal
from ecdysis.evolution.fdcr.literals import LiteralHit, LiteralIndex
from ecdysis.evolution.fdcr.pipeline import FDCRDiagnoser, FDCRError
from ecdysis.evolution.fdcr.report import FDCRReport, Turn

__all__ = [
    "Attribution",
    "CheckOutcome",
    "FDCRConfig",
    "FDCRDiagnoser",
    "FDCRError",
    "FDCRReport",
    "LiteralHit",
    "LiteralIndex",
    "ModelScope",
    "PatternEvidence",
    "TaskScope",
    "Turn",
    "TurnJournal",
    "attribute",
    "check_engineer_changes",
    "check_spec",
]
