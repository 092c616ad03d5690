"""Diagnosis through the real gateway with the scripted diagnoser."""

from __future__ import annotations

from pathlib import Path

import pytest

from ecdysis.evolution import DiagnoserParts, method
from ecdysis.evolution.diagnosis import BatchDiagnoser, SequentialDiagnoser
from ecdysis.evolution.failures import failures_from
from ecdysis.llm import Gateway
from ecdysis.records import FailureRecord, Role, Task, TerminationReason, ToolCall, Trajectory
from ecdysis.store import ArtifactStore

DIAGNOSER = "scripted/ecdysis.benchmarks.refund_desk.scripted:diagnoser"


def failures(n: int) -> list[FailureRecord]:
    trajectories = [Trajectory(
        trajectory_id=f"t{i}", run_id="diag", task=Task(domain="refund_desk", task_id=f"order-{i}"), model="m",
        harness_hash="h", termination_reason=TerminationReason.USER_STOP, reward=0.0, reward_breakdown={"DB": 0.0},
        tool_calls=[ToolCall(call_id="c", name="refund", arguments={"order_id": f"order-{i}", "amount": 45},
                             executed=True)]) for i in range(n)]
    return failures_from(trajectories)


def test_batch_diagnoser_makes_one_call_over_all_failures(gateway: Gateway, store: ArtifactStore,
                                                          seed: Path) -> None:
    records = failures(3)
    diagnoser = BatchDiagnoser(gateway, DIAGNOSER)
    spec = diagnoser.diagnose(records, seed, run_id="diag", round=2)
    assert gateway.usage("diag").calls == 1
    assert (spec.run_id, spec.round) == ("diag", 2) and len(spec.spec_id) == 16
    (pattern,) = spec.failure_patterns
    assert pattern.signature == "user_stop:reward:DB" and pattern.systematic
    assert sorted(pattern.failure_ids) == sorted(r.failure_id for r in records)
    assert spec.proposed_changes[0].component == "validation_rules"
    assert "item price" in spec.proposed_changes[0].description
    # deterministic: the same evidence gives the same spec id
    assert diagnoser.diagnose(records, seed, run_id="diag", round=2).spec_id == spec.spec_id
    gateway.flush()
    calls = store.read("llm_calls", run_id="diag")
    assert {c.role for c in calls} == {Role.DIAGNOSER}


def test_prompt_carries_every_record_and_the_harness_source(gateway: Gateway, seed: Path) -> None:
    records = failures(4)
    (message,) = BatchDiagnoser(gateway, DIAGNOSER).messages(records, seed, round=0)
    assert all(r.failure_id in message["content"] for r in records)
    assert "### harness.py" in message["content"] and "def run(session)" in message["content"]
    (single,) = SequentialDiagnoser(gateway, DIAGNOSER).messages(records[:1], seed, round=0)
    assert "ONE failure record" in single["content"]


def test_each_method_names_its_diagnoser_and_its_requests(gateway: Gateway) -> None:
    from ecdysis.evolution.fdcr import FDCRDiagnoser

    parts = DiagnoserParts(llm=gateway, model=DIAGNOSER)
    assert isinstance(method("se").diagnoser(parts), SequentialDiagnoser)
    assert isinstance(method("ecdysis").diagnoser(parts), BatchDiagnoser)
    assert isinstance(method("ecdysis-fdcr").diagnoser(parts), FDCRDiagnoser)
    records = failures(3)
    assert method("se").requests(records) == [[r] for r in records]
    assert method("ecdysis").requests(records) == method("ecdysis-fdcr").requests(records) == [records]
    with pytest.raises(ValueError, match="unknown evolution method 'human'; known: se, ecdysis, ecdysis-fdcr"):
        method("human")


def test_diagnosis_needs_failures(gateway: Gateway, seed: Path) -> None:
    with pytest.raises(ValueError, match="at least one failure"):
        SequentialDiagnoser(gateway, DIAGNOSER).diagnose([], seed, run_id="diag", round=0)
