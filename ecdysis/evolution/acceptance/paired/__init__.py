"""The ``paired`` acceptance policy (:mod:`.policy`) and its statistics (:mod:`.statistics`):
``training.acceptance: {type: paired, test: sign, confidence: 0.95}``."""

from ecdysis.evolution.acceptance.paired.policy import PairedAcceptance, PairedImprovement
from ecdysis.evolution.acceptance.paired.statistics import Bootstrap, bootstrap, paired_differences, sign_test
from ecdysis.extensions import register

__all__ = ["Bootstrap", "PairedAcceptance", "PairedImprovement", "bootstrap", "paired_differences",
           "register_extensions", "sign_test"]


def register_extensions() -> None:
    """Register ``paired``."""
    register("acceptance", "paired", "keep a candidate iff its per-task improvement clears a one-sided sign or "
             "bootstrap test", config=PairedAcceptance)
