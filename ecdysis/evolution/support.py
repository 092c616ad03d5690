"""A failure pattern's support, counted from the round's failure records, whatever the diagnoser wrote about it.

A pattern is *systematic* only when its support says so: two or more distinct tasks, or two or more distinct task
models. The support is what can be checked: the tasks and models of the failure records the pattern cites, plus the
tasks and models it names that really failed with its signature in this round. A pattern the diagnoser called
systematic on the strength of one task and one model is marked not systematic; one it called incidental stays so.

>>> spec = with_checked_support(spec, failures)        # doctest: +SKIP
>>> [(p.task_ids, p.systematic) for p in spec.failure_patterns]        # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

from ecdysis.records import FailurePattern, FailureRecord, ModificationSpec

MIN_SYSTEMATIC_TASKS = 2
MIN_SYSTEMATIC_MODELS = 2


def supports_systematic(task_ids: Sequence[str], models: Sequence[str]) -> bool:
    """Whether a support of these distinct tasks and models makes a pattern systematic."""
    return len(set(task_ids)) >= MIN_SYSTEMATIC_TASKS or len(set(models)) >= MIN_SYSTEMATIC_MODELS


def checked_pattern(pattern: FailurePattern, failures: Sequence[FailureRecord]) -> FailurePattern:
    """``pattern`` with its task ids and models cut to the support the records show, and ``systematic`` only when
    that support makes it so."""
    by_id = {record.failure_id: record for record in failures}
    cited = [by_id[fid] for fid in pattern.failure_ids if fid in by_id]
    same_signature = [record for record in failures if record.signature == pattern.signature]
    tasks = {record.task_id for record in cited}
    tasks |= {task for task in pattern.task_ids if any(r.task_id == task for r in same_signature)}
    models = {record.model for record in cited}
    models |= {model for model in pattern.models if any(r.model == model for r in same_signature)}
    systematic = pattern.systematic and supports_systematic(sorted(tasks), sorted(models))
    return pattern.model_copy(update={"task_ids": sorted(tasks), "models": sorted(models), "systematic": systematic})


def with_checked_support(spec: ModificationSpec, failures: Sequence[FailureRecord]) -> ModificationSpec:
    """``spec`` with every pattern's support checked against ``failures`` (see :func:`checked_pattern`)."""
    patterns = [checked_pattern(pattern, failures) for pattern in spec.failure_patterns]
    return spec.model_copy(update={"failure_patterns": patterns})
