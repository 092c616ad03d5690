"""Failure records: which trajectories become evidence, deterministic signatures, even trimming."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import refund_desk_episodes

from ecdysis.evolution import HarnessRef
from ecdysis.evolution.failures import failures_from, trim_for_context
from ecdysis.llm import Gateway
from ecdysis.protocols import SandboxBackend
from ecdysis.records import Task, TerminationReason, ToolCall, Trajectory
from ecdysis.sandbox import bundle_hash

TASK_MODEL = "scripted/ecdysis.benchmarks.refund_desk.scripted:task_model"


def trajectory(reason: TerminationReason = TerminationReason.USER_STOP, reward: float = 0.0,
               **fields: Any) -> Trajectory:
    return Trajectory(trajectory_id=fields.pop("trajectory_id", "t1"), run_id="r", task=Task(domain="d", task_id="x"),
                      model="m", harness_hash="h", termination_reason=reason, reward=reward, **fields)


def test_signatures_of_real_episodes_are_deterministic(backend: SandboxBackend, gateway: Gateway,
                                                       seed: Path) -> None:
    def failures_of(run_id: str, trial: int) -> list[tuple[str, str, str, str]]:
        run = refund_desk_episodes(backend, gateway, TASK_MODEL, run_id)
        trajectories = run(HarnessRef(seed, bundle_hash(seed)), "eval", 0)
        records = failures_from(trajectories)
        assert len({r.failure_id for r in records}) == len(records)
        return sorted((r.task_id, r.signature, r.failing_component, r.failure_decision) for r in records)

    first, second = failures_of("run-a", 0), failures_of("run-b", 1)
    assert first == second
    assert [task for task, *_ in first] == ["order-1", "order-3", "order-4"]  # order-2 has no shipping: passes
    assert {signature for _, signature, _, _ in first} == {"user_stop:reward:DB"}
    assert all("refund(" in decision for *_, decision in first)


@pytest.mark.parametrize(("fields", "signature"), [
    ({"tool_calls": [ToolCall(call_id="c", name="refund", executed=False, blocked_reason="too much", step=3)]},
     "user_stop:blocked:refund"),
    ({"tool_calls": [ToolCall(call_id="c", name="get_order", executed=True, error=True, result="no order")]},
     "user_stop:tool_error:get_order"),
    ({"reward_breakdown": {"DB": 1.0, "COMMUNICATE": 0.0}}, "user_stop:reward:COMMUNICATE"),
    ({"messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}]},
     "user_stop:no_final_answer"),
    ({"reason": TerminationReason.HARNESS_ERROR, "error": "Traceback ...\n  File x\nKeyError: 'tools'"},
     "harness_error:harness_error:KeyError"),
    ({"reason": TerminationReason.MAX_STEPS}, "max_steps:max_steps"),
])
def test_signature_names_the_failing_component(fields: dict[str, Any], signature: str) -> None:
    reason = fields.pop("reason", TerminationReason.USER_STOP)
    (record,) = failures_from([trajectory(reason, **fields)])
    assert record.signature == signature
    assert record.failure_decision


def test_only_sub_threshold_non_infrastructure_trajectories_count() -> None:
    trajectories = [
        trajectory(reward=1.0, trajectory_id="pass"),
        trajectory(reward=0.5, trajectory_id="half"),
        trajectory(TerminationReason.SANDBOX_ERROR, trajectory_id="infra"),
        trajectory(TerminationReason.INFRASTRUCTURE_ERROR, trajectory_id="infra2"),
        trajectory(TerminationReason.TIMEOUT, trajectory_id="timeout"),
    ]
    assert sorted(r.trajectory_id for r in failures_from(trajectories)) == ["half", "timeout"]
    assert sorted(r.trajectory_id for r in failures_from(trajectories, threshold=0.5)) == ["timeout"]


def test_trim_for_context_shrinks_every_record_evenly() -> None:
    long_excerpt = [{"role": "user", "content": "word " * 2000}, {"role": "assistant", "content": "final words"}]
    calls = [ToolCall(call_id=f"c{i}", name="get_order", executed=True, result="r" * 300) for i in range(30)]
    small = failures_from([trajectory(trajectory_id="small")])
    big = failures_from([trajectory(trajectory_id=f"big{i}", messages=long_excerpt, tool_calls=calls)
                         for i in range(3)])
    records = small + big
    total = sum(len(r.model_dump_json()) for r in records)
    trimmed = trim_for_context(records, max_chars=total // 3)
    assert trimmed[0] == small[0]  # under its share: untouched
    sizes = [len(r.model_dump_json()) for r in trimmed]
    assert sum(sizes) <= total // 3
    assert max(sizes[1:]) - min(sizes[1:]) <= 2  # evenly
    assert all(r.context_excerpt.endswith("final words") for r in trimmed[1:])  # the end is kept
    assert trim_for_context(records, max_chars=10 * total) == records
    with pytest.raises(ValueError, match="max_chars"):
        trim_for_context(records, 0)
