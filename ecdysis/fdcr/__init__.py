"""Failure-Driven Collaborative Refinement (FDCR): attribution of a round's failures across tasks and models, then
Analyst → Critic → Engineer passes and a Moderator that writes the modification specification."""

from ecdysis.fdcr.attribution import Attribution, ModelScope, PatternEvidence, TaskScope, attribute
from ecdysis.fdcr.checks import CheckOutcome, check_engineer_changes, check_spec
from ecdysis.fdcr.config import FDCRConfig
from ecdysis.fdcr.journal import TurnJournal
from ecdysis.fdcr.literals import LiteralHit, LiteralIndex
from ecdysis.fdcr.pipeline import FDCRDiagnoser, FDCRError
from ecdysis.fdcr.report import FDCRReport, Turn

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
