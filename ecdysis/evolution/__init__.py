"""Evolution methods: failure records, the method registry, diagnosis (FDCR included), coding agents, validation,
acceptance and the checkpointed training loop.

>>> from ecdysis.evolution import LoopSettings, TrainingLoop, method, BuiltinCodingAgent   # doctest: +SKIP
"""

from ecdysis.coders.builtin_agent import BuiltinCodingAgent, BundleWorkspace
from ecdysis.coders.gateway_proxy import GatewayProxy
from ecdysis.evolution.acceptance import (
    AcceptancePolicy,
    AcceptanceSection,
    Decision,
    StrictImprovement,
    TrainingResults,
)
from ecdysis.evolution.checkpoints import CheckpointError, Checkpoints, LoopSettings
from ecdysis.evolution.diagnosis import BatchDiagnoser, SequentialDiagnoser
from ecdysis.evolution.evaluator import EvaluationBatch, Evaluator, FunctionEvaluator, HarnessRef, score
from ecdysis.evolution.failures import failures_from, trim_for_context
from ecdysis.evolution.loop import TrainingLoop, TrainingResult
from ecdysis.evolution.methods import DiagnoserParts, MethodSection, method
from ecdysis.sandbox.validation import ValidationResult, check_bundle, run_selftest, validate_bundle

__all__ = [
    "AcceptancePolicy",
    "AcceptanceSection",
    "BatchDiagnoser",
    "BuiltinCodingAgent",
    "BundleWorkspace",
    "CheckpointError",
    "Checkpoints",
    "Decision",
    "DiagnoserParts",
    "EvaluationBatch",
    "Evaluator",
    "FunctionEvaluator",
    "GatewayProxy",
    "HarnessRef",
    "LoopSettings",
    "MethodSection",
    "SequentialDiagnoser",
    "StrictImprovement",
    "TrainingLoop",
    "TrainingResult",
    "TrainingResults",
    "ValidationResult",
    "check_bundle",
    "failures_from",
    "method",
    "run_selftest",
    "score",
    "trim_for_context",
    "validate_bundle",
]
