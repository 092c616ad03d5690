"""Diagnosis: failure records + harness source → one :class:`ModificationSpec`, through one structured LLM call.

``BatchDiagnoser`` (method ``ecdysis``) sees every failure record of a round at once; ``SequentialDiagnoser`` is
the building block of the ``se`` baseline, called once per failure record. Both implement
:class:`ecdysis.protocols.Diagnoser`; :mod:`ecdysis.evolution.methods` says which method uses which.

>>> diagnoser = BatchDiagnoser(gateway, "scripted/ecdysis.benchmarks.tau2.scripted:diagnoser")   # doctest: +SKIP
>>> spec = diagnoser.diagnose(records, Path("bundle"), run_id="r1", round=0)            # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ecdysis.evolution.failures import trim_for_context
from ecdysis.evolution.prompts import render
from ecdysis.harness import harness_source
from ecdysis.protocols import LLMClient
from ecdysis.records import FailureRecord, ModificationSpec, Role, stable_hash


class PromptDiagnoser:
    """One ``llm.structured(..., ModificationSpec, role=DIAGNOSER)`` call over the records it is given."""

    template = "diagnose_batch"
    method = "ecdysis"

    def __init__(self, llm: LLMClient, model: str, *, max_failure_chars: int = 40_000,
                 max_source_chars: int = 30_000, max_attempts: int = 3) -> None:
        self.llm = llm
        self.model = model
        self.max_failure_chars = max_failure_chars
        self.max_source_chars = max_source_chars
        self.max_attempts = max_attempts

    def messages(self, failures: Sequence[FailureRecord], harness_dir: Path, *, round: int) -> list[dict[str, str]]:
        """The conversation sent to the model (one user message)."""
        batch = trim_for_context(failures, self.max_failure_chars)
        failures_json = json.dumps([record.model_dump(mode="json") for record in batch], indent=1, sort_keys=True)
        prompt = render(self.template, round=round, n_failures=len(batch), failures_json=failures_json,
                        harness_source=harness_source(harness_dir, self.max_source_chars))
        return [{"role": "user", "content": prompt}]

    def diagnose(self, failures: Sequence[FailureRecord], harness_dir: Path, *, run_id: str,
                 round: int) -> ModificationSpec:
        """The specification for ``failures``, with ``spec_id``/``run_id``/``round`` filled in."""
        if not failures:
            raise ValueError("diagnose needs at least one failure record")
        context = {"run_id": run_id, "round": round, "method": self.method,
                   "failure_ids": [record.failure_id for record in failures]}
        spec = self.llm.structured(self.model, self.messages(failures, harness_dir, round=round), ModificationSpec,
                                   role=Role.DIAGNOSER, max_attempts=self.max_attempts, context=context)
        content = spec.model_dump(mode="json", exclude={"spec_id", "run_id", "round"})
        key = [run_id, round, sorted(record.failure_id for record in failures), content]
        return spec.model_copy(update={"spec_id": stable_hash(key)[:16], "run_id": run_id, "round": round})


class BatchDiagnoser(PromptDiagnoser):
    """Method ``ecdysis``: all failure records of the round, aggregated into one specification."""


class SequentialDiagnoser(PromptDiagnoser):
    """Building block of ``se``: the training loop calls it with one failure record at a time."""

    template = "diagnose_single"
    method = "se"
