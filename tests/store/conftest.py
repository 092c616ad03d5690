"""Store fixtures: the record factory. Every store test takes ``any_store`` (tests/conftest.py): a local folder, then
a real S3-compatible server (moto_server)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from ecdysis.records import (
    EventKind,
    FailureRecord,
    HarnessVersion,
    LLMCallRecord,
    ModificationSpec,
    Phase,
    ProposedChange,
    Record,
    Role,
    RoundResult,
    RunEvent,
    Task,
    TerminationReason,
    TokenUsage,
    ToolCall,
    Trajectory,
)

RecordFactory = Callable[[str, int, str, int, str], Record]


def make_record(dataset: str, i: int, run_id: str, round: int, model: str) -> Record:
    """A distinct, fully populated record of ``dataset`` (``i`` makes ids and values unique)."""
    when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i)
    task_id = f"task-{i % 3}"
    call = ToolCall(call_id=f"c{i}", name="get_user", arguments={"id": i}, executed=True, result="{}", step=1)
    tokens = TokenUsage(prompt_tokens=10 + i, completion_tokens=i, cached_prompt_tokens=1)
    if dataset == "trajectories":
        return Trajectory(
            trajectory_id=f"traj-{i}", run_id=run_id, round=round, task=Task(domain="mock", task_id=task_id),
            model=model, trial=i % 2, seed=i, harness_hash="h0",
            messages=[{"role": "user", "content": f"hello {i}"}], tool_calls=[call],
            termination_reason=TerminationReason.AGENT_STOP, reward=i / 10, reward_breakdown={"db": 1.0},
            tokens=tokens, llm_calls=2, wall_time_s=1.5, created_at=when,
        )
    if dataset == "failures":
        return FailureRecord(
            failure_id=f"f-{i}", run_id=run_id, round=round, trajectory_id=f"traj-{i}", task_id=task_id,
            domain="mock", model=model, reward=0.0, failure_decision="wrong tool",
            termination_reason=TerminationReason.MAX_STEPS, tool_call_history=[call], signature=f"max_steps:{i % 2}",
        )
    if dataset == "llm_calls":
        return LLMCallRecord(call_id=f"call-{i}", run_id=run_id, round=round, task_id=task_id, role=Role.TASK,
                             model=model, tokens=tokens, cost_usd=0.001 * i, latency_s=0.2, created_at=when)
    if dataset == "rounds":
        return RoundResult(run_id=run_id, round=round, method="ecdysis", base_hash="h0", candidate_hash=f"h{i}",
                           base_score=0.5, candidate_score=0.5 + i / 100, accepted=i % 2 == 0, n_failures=i,
                           note=model, created_at=when)
    if dataset == "specs":
        change = ProposedChange(component="system_prompt", description=f"change {i}", rationale="r",
                                evidence=[f"f-{i}"])
        return ModificationSpec(spec_id=f"spec-{i}", run_id=run_id, round=round, proposed_changes=[change],
                                implementation_notes=model, must_not_change=["tools"])
    if dataset == "harness_versions":
        return HarnessVersion(harness_hash=f"h{i}", parent_hash="h0", run_id=run_id, round=round, spec_id=f"spec-{i}",
                              train_score=i / 10, accepted=True, created_at=when)
    if dataset == "events":
        return RunEvent(event_id=f"e-{i}", run_id=run_id, round=round, seq=i, kind=EventKind.EPISODE,
                        phase=Phase.EVALUATION, time=when, done=i, total=12, failures=i % 2, tokens=10 * i,
                        cost_usd=0.001 * i, role=Role.TASK if model == "model-a" else None,
                        payload={"model": model, "reward": i / 10})
    raise KeyError(dataset)


@pytest.fixture
def records() -> RecordFactory:
    """The record factory :func:`make_record`."""
    return make_record
