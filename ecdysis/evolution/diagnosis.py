"""Diagnosis: failure records + harness source → one :class:`ModificationSpec`, through one structured LLM call.

``BatchDiagnoser`` (method ``ecdysis``) sees every failure record of a round at once; ``SequentialDiagnoser`` is
the building block of the ``se`` baseline, called once per failure record. Both implement
:class:`ecdysis.protocols.Diagnoser`; :mod:`ecdysis.evolution.methods` says which method uses which.

When a round's records exceed the evidence budget by more than even trimming can absorb (each record cut to
:data:`MIN_TRIMMED_RECORD_CHARS`), ``BatchDiagnoser`` aggregates hierarchically: deterministic groups
(:mod:`~ecdysis.evolution.grouping`), ``aggregator`` summaries of the groups over their share
(:mod:`~ecdysis.evolution.aggregation`), packed strongest first under the budget (:mod:`~ecdysis.evolution.evidence`),
then the one diagnosis call. Otherwise the prompt is the plain one (records trimmed evenly where they must be), with
no aggregator call: a few records over a small model's budget cost one call, not a summary call per group more.

>>> diagnoser = BatchDiagnoser(gateway, "scripted/ecdysis.benchmarks.tau2.scripted:diagnoser")   # doctest: +SKIP
>>> spec = diagnoser.diagnose(records, Path("bundle"), run_id="r1", round=0)            # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ecdysis.evolution.aggregation import Aggregator
from ecdysis.evolution.evidence import Evidence, EvidenceOverBudget, entry_cap, needs_summary, pack
from ecdysis.evolution.failures import trim_for_context
from ecdysis.evolution.grouping import group_failures
from ecdysis.evolution.prompts import render
from ecdysis.evolution.support import with_checked_support
from ecdysis.harness import harness_source
from ecdysis.llm.errors import StructuredOutputError
from ecdysis.llm.structured import problem
from ecdysis.protocols import LLMClient
from ecdysis.records import FailureRecord, ModificationSpec, Role, SpecReply, stable_hash

MIN_TRIMMED_RECORD_CHARS = 1_000
"""The least a record is trimmed to on the plain path: its failure decision, the failing call and the ends of the
model's last reply and of the environment's answer still fit. Rounds with more records than the evidence budget holds
at this size are aggregated instead."""


class PromptDiagnoser:
    """One ``llm.structured(..., SpecReply, role=DIAGNOSER)`` call over the records it is given: a specification
    with at least one proposed change (re-asked until it has one, else ``StructuredOutputError``), whose patterns are
    systematic only when their support says so (:mod:`~ecdysis.evolution.support`)."""

    template = "diagnose_batch"
    method = "ecdysis"

    def __init__(self, llm: LLMClient, model: str, *, max_failure_chars: int = 40_000,
                 max_source_chars: int = 30_000, max_attempts: int = 3, aggregator_model: str | None = None,
                 aggregator_workers: int = 16) -> None:
        self.llm = llm
        self.model = model
        self.max_failure_chars = max_failure_chars
        self.max_source_chars = max_source_chars
        self.max_attempts = max_attempts
        self.aggregator_model = aggregator_model
        """None: records over the budget are trimmed evenly (:func:`trim_for_context`) instead of aggregated."""
        self.aggregator_workers = aggregator_workers

    def fits(self, failures: Sequence[FailureRecord]) -> bool:
        """Whether the records go into the prompt without aggregation (the plain path): they fit as they are, or
        trimmed evenly to no less than :data:`MIN_TRIMMED_RECORD_CHARS` each."""
        if len(failures) * MIN_TRIMMED_RECORD_CHARS <= self.max_failure_chars:
            return True
        return sum(len(record.model_dump_json()) for record in failures) <= self.max_failure_chars

    def messages(self, failures: Sequence[FailureRecord], harness_dir: Path, *, round: int,
                 run_id: str = "") -> list[dict[str, str]]:
        """The conversation sent to the model (one user message); over the budget with an aggregator model, this
        makes the round's ``aggregator`` calls."""
        source = harness_source(harness_dir, self.max_source_chars)
        if self.aggregator_model is None or self.fits(failures):
            batch = trim_for_context(failures, self.max_failure_chars)
            # compact, as trim_for_context measures it: indenting would add a third to what the budget allowed
            failures_json = json.dumps([record.model_dump(mode="json") for record in batch], sort_keys=True,
                                       separators=(",", ":"))
            prompt = render(self.template, round=round, n_failures=len(batch), failures_json=failures_json,
                            harness_source=source)
            return [{"role": "user", "content": prompt}]
        evidence = self.aggregate(failures, run_id=run_id, round=round)
        prompt = render("diagnose_aggregated", round=round, n_failures=len(failures),
                        n_groups=evidence.n_groups, n_recurring=len(evidence.recurring),
                        not_shown=evidence.not_shown, groups_json=evidence.groups_json,
                        failures_json=evidence.records_json, harness_source=source)
        return [{"role": "user", "content": prompt}]

    def aggregate(self, failures: Sequence[FailureRecord], *, run_id: str, round: int) -> Evidence:
        """Group, summarise the groups over their share (in parallel) and pack them under the budget. When the
        recurring groups are too many for the budget, the records are grouped a level up (signature and termination
        reason only); when even those are too many, :class:`EvidenceOverBudget`."""
        assert self.aggregator_model is not None
        groups = group_failures(failures)
        try:
            cap = entry_cap(groups, self.max_failure_chars)
        except EvidenceOverBudget:
            groups = group_failures(failures, coarse=True)
            cap = entry_cap(groups, self.max_failure_chars)
        aggregator = Aggregator(self.llm, self.aggregator_model, prompt_chars=self.max_failure_chars,
                                max_workers=self.aggregator_workers)
        outcomes = aggregator.summarise([g for g in groups if needs_summary(g, cap)], run_id=run_id, round=round)
        return pack(groups, {outcome.group.key: outcome for outcome in outcomes}, self.max_failure_chars)

    def diagnose(self, failures: Sequence[FailureRecord], harness_dir: Path, *, run_id: str,
                 round: int) -> ModificationSpec:
        """The specification for ``failures``, with ``spec_id``/``run_id``/``round`` filled in."""
        if not failures:
            raise ValueError("diagnose needs at least one failure record")
        context = {"run_id": run_id, "round": round, "method": self.method,
                   "failure_ids": [record.failure_id for record in failures]}
        messages = self.messages(failures, harness_dir, round=round, run_id=run_id)
        spec = self.llm.structured(self.model, messages, SpecReply, role=Role.DIAGNOSER,
                                   max_attempts=self.max_attempts, context=context).to_spec()
        known = {record.failure_id for record in failures}
        unknown = unknown_ids(spec, known)
        if unknown:  # re-asked once, then the unknown ids are dropped from the evidence
            messages = [*messages, {"role": "assistant", "content": spec.model_dump_json()},
                        {"role": "user", "content": f"Your specification cites failure_ids that are not in the "
                         f"evidence: {', '.join(unknown[:10])}. Answer again citing only failure_ids shown."}]
            spec = self.llm.structured(self.model, messages, SpecReply, role=Role.DIAGNOSER,
                                       max_attempts=self.max_attempts, context=context).to_spec()
            spec = without_unknown_ids(spec, known)
        spec = with_checked_support(spec, failures)
        content = spec.model_dump(mode="json", exclude={"spec_id", "run_id", "round"})
        key = [run_id, round, sorted(record.failure_id for record in failures), content]
        return spec.model_copy(update={"spec_id": stable_hash(key)[:16], "run_id": run_id, "round": round})


def unknown_ids(spec: ModificationSpec, known: set[str]) -> list[str]:
    """The failure_ids ``spec`` cites (in patterns and changes) that are not in ``known``, sorted."""
    cited = [fid for pattern in spec.failure_patterns for fid in pattern.failure_ids]
    cited += [fid for change in spec.proposed_changes for fid in change.evidence]
    return sorted({fid for fid in cited if fid not in known})


def without_unknown_ids(spec: ModificationSpec, known: set[str]) -> ModificationSpec:
    """``spec`` with every failure_id outside ``known`` dropped from its patterns and changes."""
    patterns = [p.model_copy(update={"failure_ids": [f for f in p.failure_ids if f in known]})
                for p in spec.failure_patterns]
    changes = [c.model_copy(update={"evidence": [f for f in c.evidence if f in known]})
               for c in spec.proposed_changes]
    return spec.model_copy(update={"failure_patterns": patterns, "proposed_changes": changes})


class BatchDiagnoser(PromptDiagnoser):
    """Method ``ecdysis``: all failure records of the round, aggregated into one specification. Over the evidence
    budget, groups are summarised by ``aggregator_model`` (default: the diagnosis model)."""

    def __init__(self, llm: LLMClient, model: str, *, aggregator_model: str | None = None, **budgets: Any) -> None:
        super().__init__(llm, model, aggregator_model=aggregator_model or model, **budgets)


class SequentialDiagnoser(PromptDiagnoser):
    """Building block of ``se``: the training loop calls it with one failure record at a time."""

    template = "diagnose_single"
    method = "se"


def diagnosis_problem(exc: Exception) -> str:
    """Why a diagnosis failed, in one plain sentence for the round's note: a model that never wrote a valid
    specification names the field and what was wrong with it; no pydantic report, traceback or link."""
    if isinstance(exc, StructuredOutputError):
        return " ".join(str(exc).split())
    if isinstance(exc, ValidationError):
        return f"the specification did not validate: {problem(exc)}"
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
