"""Acceptance policies, when a candidate harness replaces the current one, as ``acceptance`` extensions
(``training.acceptance: strict``): the seam (:mod:`.seam`), ``strict`` (:mod:`.strict`, the paper's rule and the
default) and ``paired`` (:mod:`.paired`, a one-sided test of the per-task improvement)."""

from ecdysis.evolution.acceptance.seam import (
    DEFAULT,
    AcceptanceConfig,
    AcceptancePolicy,
    AcceptanceSection,
    Decision,
    TrainingResults,
    task_key,
)
from ecdysis.evolution.acceptance.strict import StrictAcceptance, StrictImprovement

__all__ = [
    "DEFAULT",
    "AcceptanceConfig",
    "AcceptancePolicy",
    "AcceptanceSection",
    "Decision",
    "StrictAcceptance",
    "StrictImprovement",
    "TrainingResults",
    "task_key",
]
