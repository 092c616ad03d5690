"""Evolution methods: failure records, diagnosis, coding agents, validation, acceptance and the training loop.

>>> from ecdysis.evolution import TrainingConfig, TrainingLoop, BatchDiagnoser, BuiltinCodingAgent   # doctest: +SKIP
"""

from ecdysis.evolution.acceptance import AcceptancePolicy, Decision, StrictImprovement
from ecdysis.evolution.checkpoints import Checkpoints
from ecdysis.evolution.coding import BuiltinCodingAgent, BundleWorkspace
from ecdysis.evolution.diagnosis import BatchDiagnoser, SequentialDiagnoser, diagnoser_for
from ecdysis.evolution.external import ExternalCLICodingAgent, ExternalCLIConfig
from ecdysis.evolution.failures import failures_from, trim_for_context
from ecdysis.evolution.gateway_proxy import GatewayProxy
from ecdysis.evolution.loop import TrainingConfig, TrainingLoop, TrainingResult, score
from ecdysis.evolution.validation import ValidationResult, check_bundle, run_selftest, validate_bundle

__all__ = [
    "AcceptancePolicy",
    "BatchDiagnoser",
    "BuiltinCodingAgent",
    "BundleWorkspace",
    "Checkpoints",
    "Decision",
    "ExternalCLICodingAgent",
    "ExternalCLIConfig",
    "GatewayProxy",
    "SequentialDiagnoser",
    "StrictImprovement",
    "TrainingConfig",
    "TrainingLoop",
    "TrainingResult",
    "ValidationResult",
    "check_bundle",
    "diagnoser_for",
    "failures_from",
    "run_selftest",
    "score",
    "trim_for_context",
    "validate_bundle",
]
