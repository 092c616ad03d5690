"""Attribution of a round's failures across tasks and models (no LLM involved)."""

from __future__ import annotations

import pytest
from fdcr_support import MODEL_A, MODEL_B, SIG_ANNOT, SIG_BLOCKED, SIG_LOOP, SIG_REFUND, make_failures

from ecdysis.evolution.fdcr import ModelScope, TaskScope, attribute
from ecdysis.records import FailureRecord


def test_patterns_are_clustered_and_attributed(failures: list[FailureRecord]) -> None:
    attribution = attribute(failures)
    rows = {p.signature: p for p in attribution.patterns}
    assert [p.signature for p in attribution.patterns] == [SIG_LOOP, SIG_BLOCKED, SIG_ANNOT, SIG_REFUND]
    assert [p.pattern_id for p in attribution.patterns] == ["P1", "P2", "P3", "P4"]

    loop = rows[SIG_LOOP]
    assert loop.task_ids == ["air-1", "air-2", "air-3"]
    assert loop.models == [MODEL_A, MODEL_B]
    assert loop.failure_ids == ["f-01", "f-02", "f-03"]
    assert (loop.task_scope, loop.model_scope) == (TaskScope.SYSTEMATIC, ModelScope.HARNESS)
    assert loop.termination_reasons == ["max_steps"]

    blocked = rows[SIG_BLOCKED]
    assert (blocked.task_ids, blocked.models) == (["air-4", "air-5"], [MODEL_A])
    assert (blocked.task_scope, blocked.model_scope) == (TaskScope.SYSTEMATIC, ModelScope.MODEL_SPECIFIC)

    refund = rows[SIG_REFUND]
    assert (refund.task_ids, refund.failure_ids) == (["air-6"], ["f-06", "f-07"])
    assert (refund.task_scope, refund.model_scope) == (TaskScope.AUXILIARY, ModelScope.MODEL_SPECIFIC)

    annot = rows[SIG_ANNOT]
    assert (annot.task_scope, annot.model_scope) == (TaskScope.AUXILIARY, ModelScope.HARNESS)

    assert attribution.models == [MODEL_A, MODEL_B]
    assert attribution.excluded_failure_ids == ["f-10"]
    assert "f-10" not in attribution.failure_ids


def test_order_does_not_depend_on_input_order(failures: list[FailureRecord]) -> None:
    assert attribute(failures) == attribute(list(reversed(failures)))
    assert attribute(failures).to_markdown() == attribute(list(reversed(failures))).to_markdown()


def test_single_model_round_leaves_model_scope_undetermined() -> None:
    only_a = [f for f in make_failures() if f.model == MODEL_A and not f.termination_reason.is_infrastructure]
    attribution = attribute(only_a)
    assert {p.model_scope for p in attribution.patterns} == {ModelScope.UNDETERMINED}
    # Naming the trained models makes a pattern seen under one of them model-specific.
    named = attribute(only_a, models=[MODEL_A, MODEL_B])
    assert {p.model_scope for p in named.patterns} == {ModelScope.MODEL_SPECIFIC}


def test_markdown_table_and_failure_patterns(failures: list[FailureRecord]) -> None:
    attribution = attribute(failures)
    table = attribution.to_markdown(max_ids=2)
    lines = table.splitlines()
    assert lines[0] == f"Task models in this round: {MODEL_A}, {MODEL_B}"
    escaped = SIG_LOOP.replace("|", "\\|")  # a pipe inside a cell is escaped, so the row keeps its 8 cells
    assert lines[4] == (f"| P1 | `{escaped}` | 3 | air-1, air-2 (+1 more) | {MODEL_A}, {MODEL_B} | systematic "
                        "| harness | f-01, f-02 (+1 more) |")
    assert "Excluded (infrastructure, not evidence): f-10" in table

    patterns = attribution.failure_patterns()
    assert [p.signature for p in patterns] == [SIG_LOOP, SIG_BLOCKED, SIG_ANNOT, SIG_REFUND]
    assert [p.systematic for p in patterns] == [True, True, False, False]
    assert patterns[1].models == [MODEL_A] and "model-specific" in patterns[1].description
    assert "harness deficiency" in patterns[0].description


def test_duplicate_failure_ids_are_rejected(failures: list[FailureRecord]) -> None:
    with pytest.raises(ValueError, match="duplicate failure_id 'f-01'"):
        attribute([*failures, failures[0]])
