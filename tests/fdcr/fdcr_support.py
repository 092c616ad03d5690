"""Data and helpers of the FDCR tests: a round of failures over several tasks and two task models, scripted role
model strings, and call counting from the gateway's ``llm_calls`` records."""

from __future__ import annotations

from collections import Counter

from ecdysis.llm import Gateway
from ecdysis.records import FailureRecord, LLMCallRecord, TerminationReason, ToolCall
from ecdysis.store import ArtifactStore

RUN_ID = "fdcr-test"
ROUND = 1
MODEL_A = "task-model-a"
MODEL_B = "task-model-b"
SIG_LOOP = "max_steps|loop_control"
SIG_BLOCKED = "agent_stop|validation_rules"
SIG_REFUND = "agent_stop|refund_amount"
SIG_ANNOT = "user_stop|annotations"


def scripted(name: str) -> str:
    """The model string of a scripted FDCR role."""
    return f"scripted/ecdysis.testing.fdcr:{name}"


def role_models(**overrides: str) -> dict[str, str]:
    """Role → model string; defaults ``analyst``, ``critic``, ``engineer``, ``moderator``; overrides by role."""
    names = {"analyst": "analyst", "critic": "critic", "engineer": "engineer", "moderator": "moderator", **overrides}
    return {role: scripted(name) for role, name in names.items()}


def _failure(fid: str, task: str, model: str, signature: str, *,
             reason: TerminationReason = TerminationReason.AGENT_STOP, calls: list[ToolCall] | None = None,
             excerpt: str = "") -> FailureRecord:
    return FailureRecord(
        failure_id=fid, run_id=RUN_ID, round=ROUND, trajectory_id=f"traj-{fid}", task_id=task, domain="airline",
        model=model, reward=0.0, failure_decision=f"{signature} on {task}", termination_reason=reason,
        tool_call_history=calls or [], context_excerpt=excerpt, signature=signature,
        failing_component=signature.split("|")[1],
    )


def _call(name: str, step: int = 0, executed: bool = True, **arguments: object) -> ToolCall:
    return ToolCall(call_id=f"c{step}", name=name, arguments=dict(arguments), executed=executed, step=step)


def make_failures() -> list[FailureRecord]:
    """Four signatures over seven tasks and two models, plus one infrastructure failure.

    - ``SIG_LOOP``: tasks 1, 2, 3 under both models → systematic, harness;
    - ``SIG_BLOCKED``: tasks 4, 5 under model A only → systematic, model-specific;
    - ``SIG_REFUND``: task 6 twice under model B → auxiliary, model-specific;
    - ``SIG_ANNOT``: task 7 under both models → auxiliary, harness.
    """
    max_steps = TerminationReason.MAX_STEPS
    return [
        _failure("f-01", "air-1", MODEL_A, SIG_LOOP, reason=max_steps,
                 calls=[_call("get_reservation_details", 0, reservation_id="ZFA04Y")]),
        _failure("f-02", "air-2", MODEL_B, SIG_LOOP, reason=max_steps,
                 calls=[_call("get_user_details", 0, user_id="mia_li_3668")]),
        _failure("f-03", "air-3", MODEL_A, SIG_LOOP, reason=max_steps,
                 calls=[_call("search_direct_flight", 0, origin="JFK", destination="SFO", date="2024-05-16")]),
        _failure("f-04", "air-4", MODEL_A, SIG_BLOCKED,
                 calls=[_call("cancel_reservation", 0, executed=False, reservation_id="H9ZU1C")]),
        _failure("f-05", "air-5", MODEL_A, SIG_BLOCKED,
                 calls=[_call("cancel_reservation", 0, executed=False, reservation_id="4WQ150")]),
        _failure("f-06", "air-6", MODEL_B, SIG_REFUND, calls=[_call("send_certificate", 0, amount=1234.5)],
                 excerpt="user asked for a refund of $1,234.50 on order #W2378156"),
        _failure("f-07", "air-6", MODEL_B, SIG_REFUND, calls=[_call("send_certificate", 0, amount=1234.5)]),
        _failure("f-08", "air-7", MODEL_A, SIG_ANNOT),
        _failure("f-09", "air-7", MODEL_B, SIG_ANNOT),
        _failure("f-10", "air-1", MODEL_B, "sandbox_error|infrastructure", reason=TerminationReason.SANDBOX_ERROR),
    ]


def calls_by_role(gateway: Gateway, store: ArtifactStore) -> Counter[str]:
    """Gateway calls of the test run by role, from the ``llm_calls`` records the gateway wrote to the store."""
    gateway.flush()
    records: list[LLMCallRecord] = store.read("llm_calls", run_id=RUN_ID)
    return Counter(record.role.value for record in records)
