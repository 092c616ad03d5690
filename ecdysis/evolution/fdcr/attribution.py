"""Failure attribution across tasks and models, computed before any LLM call.

Failure records of one round are clustered by their deterministic ``signature``. Each cluster says how far the
evidence reaches:

- across tasks: seen in two or more tasks it is a *systematic* candidate; confined to one task it is *auxiliary*
  (it may be that task's quirk, so a change built only on it risks over-fitting);
- across models: recurring under two or more task models it points at the *harness* (every model hits it);
  confined to one model while several models were trained together it is *model-specific* (fixing it for that
  model may cost the others); with a single model in the round the question is *undetermined*.

Example::

    attribution = attribute(failures)
    print(attribution.to_markdown())
    patterns = attribution.failure_patterns()
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.records import FailurePattern, FailureRecord

MIN_SYSTEMATIC_TASKS = 2
MIN_HARNESS_MODELS = 2


class TaskScope(StrEnum):
    """How many tasks a pattern spans."""

    SYSTEMATIC = "systematic"
    AUXILIARY = "auxiliary"


class ModelScope(StrEnum):
    """What the set of models showing a pattern says about its cause."""

    HARNESS = "harness"
    """Seen under two or more task models: evidence of a harness deficiency."""
    MODEL_SPECIFIC = "model_specific"
    """Seen under one model while several were trained together."""
    UNDETERMINED = "undetermined"
    """Only one task model in the round: the models cannot be compared."""


class PatternEvidence(BaseModel):
    """One failure signature and its support."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern_id: str
    """Short stable handle used in prompts (``P1``, ``P2``...), in the attribution's order."""
    signature: str
    task_ids: list[str]
    models: list[str]
    failure_ids: list[str]
    termination_reasons: list[str]
    failing_components: list[str]
    task_scope: TaskScope
    model_scope: ModelScope

    @property
    def systematic(self) -> bool:
        return self.task_scope is TaskScope.SYSTEMATIC

    def describe(self) -> str:
        """One deterministic sentence summarising the support of this pattern."""
        reach = {
            ModelScope.HARNESS: "recurs across models: harness deficiency",
            ModelScope.MODEL_SPECIFIC: f"confined to model {self.models[0]}: model-specific",
            ModelScope.UNDETERMINED: "single task model in the round: model attribution undetermined",
        }[self.model_scope]
        return (
            f"{len(self.failure_ids)} failure(s) in {len(self.task_ids)} task(s) under {len(self.models)} model(s); "
            f"{self.task_scope.value}; {reach}; termination {'/'.join(self.termination_reasons)}; "
            f"component {'/'.join(self.failing_components)}"
        )


class Attribution(BaseModel):
    """The clustered evidence of one round."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    patterns: list[PatternEvidence] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)
    """Task models considered in the round (those given, plus any seen in the failures)."""
    excluded_failure_ids: list[str] = Field(default_factory=list)
    """Infrastructure failures, which are never evidence about the harness or the model."""

    @property
    def failure_ids(self) -> set[str]:
        return {fid for pattern in self.patterns for fid in pattern.failure_ids}

    def pattern_of(self, failure_id: str) -> PatternEvidence | None:
        """The pattern holding ``failure_id``, if any."""
        for pattern in self.patterns:
            if failure_id in pattern.failure_ids:
                return pattern
        return None

    def failure_patterns(self) -> list[FailurePattern]:
        """The patterns as :class:`FailurePattern` records, in attribution order."""
        return [
            FailurePattern(
                signature=p.signature, description=p.describe(), task_ids=list(p.task_ids), models=list(p.models),
                failure_ids=list(p.failure_ids), systematic=p.systematic,
            )
            for p in self.patterns
        ]

    def to_markdown(self, max_ids: int = 6, max_rows: int = 60) -> str:
        """A compact markdown table for prompts; long id lists are cut to ``max_ids`` and the table to ``max_rows``
        patterns (the strongest, by the attribution's order), each with a count of the rest."""
        lines = [
            f"Task models in this round: {', '.join(self.models) or '(none)'}",
            "",
            "| id | signature | failures | tasks | models | task scope | model scope | failure ids |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for p in self.patterns[:max_rows]:
            lines.append(
                f"| {p.pattern_id} | `{_cell(p.signature)}` | {len(p.failure_ids)} | {_ids(p.task_ids, max_ids)} "
                f"| {_ids(p.models, max_ids)} | {p.task_scope.value} | {p.model_scope.value} "
                f"| {_ids(p.failure_ids, max_ids)} |"
            )
        if not self.patterns:
            lines.append("| - | (no failures) | 0 | | | | | |")
        hidden = self.patterns[max_rows:]
        if hidden:
            lines += ["", f"(+{len(hidden)} more pattern(s) with {sum(len(p.failure_ids) for p in hidden)} "
                          "failure(s) not shown)"]
        if self.excluded_failure_ids:
            lines += ["", f"Excluded (infrastructure, not evidence): {_ids(self.excluded_failure_ids, max_ids)}"]
        return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _ids(values: Sequence[str], limit: int) -> str:
    shown = ", ".join(_cell(v) for v in values[:limit])
    rest = len(values) - limit
    return f"{shown} (+{rest} more)" if rest > 0 else shown


def attribute(failures: Iterable[FailureRecord], models: Sequence[str] | None = None) -> Attribution:
    """Cluster ``failures`` by signature and attribute each cluster across tasks and models.

    ``models`` names every task model trained in the round (a model with no failures still counts when deciding
    whether a pattern is confined to one model); models seen in the failures are always included. Duplicate failure
    ids are an error. Patterns are ordered systematic first, then by tasks, models and failures (descending), then
    by signature, so equal inputs always give the same table.
    """
    seen: set[str] = set()
    excluded: list[str] = []
    groups: dict[str, list[FailureRecord]] = {}
    for failure in failures:
        if failure.failure_id in seen:
            raise ValueError(f"duplicate failure_id {failure.failure_id!r} in the round's failure records")
        seen.add(failure.failure_id)
        if failure.termination_reason.is_infrastructure:
            excluded.append(failure.failure_id)
            continue
        groups.setdefault(failure.signature, []).append(failure)
    all_models = sorted(set(models or ()) | {f.model for group in groups.values() for f in group})

    def sort_key(item: tuple[str, list[FailureRecord]]) -> tuple[int, int, int, int, str]:
        signature, group = item
        n_tasks = len({f.task_id for f in group})
        n_models = len({f.model for f in group})
        return (0 if n_tasks >= MIN_SYSTEMATIC_TASKS else 1, -n_tasks, -n_models, -len(group), signature)

    patterns = []
    for index, (signature, group) in enumerate(sorted(groups.items(), key=sort_key), start=1):
        task_ids = sorted({f.task_id for f in group})
        pattern_models = sorted({f.model for f in group})
        if len(pattern_models) >= MIN_HARNESS_MODELS:
            model_scope = ModelScope.HARNESS
        elif len(all_models) >= MIN_HARNESS_MODELS:
            model_scope = ModelScope.MODEL_SPECIFIC
        else:
            model_scope = ModelScope.UNDETERMINED
        patterns.append(PatternEvidence(
            pattern_id=f"P{index}",
            signature=signature,
            task_ids=task_ids,
            models=pattern_models,
            failure_ids=sorted(f.failure_id for f in group),
            termination_reasons=_by_frequency(f.termination_reason.value for f in group),
            failing_components=_by_frequency(f.failing_component for f in group),
            task_scope=TaskScope.SYSTEMATIC if len(task_ids) >= MIN_SYSTEMATIC_TASKS else TaskScope.AUXILIARY,
            model_scope=model_scope,
        ))
    return Attribution(patterns=patterns, models=all_models, excluded_failure_ids=sorted(excluded))


def _by_frequency(values: Iterable[str]) -> list[str]:
    counts = Counter(values)
    return sorted(counts, key=lambda v: (-counts[v], v))
