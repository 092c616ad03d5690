"""Failure evidence a diagnoser can act on: the model's own last reply, the failing call with its arguments, the
environment's error and the grader's components, never the gold answer; and a diagnosis held to what the evidence
supports (systematic only with support, at least one change)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import refund_desk_episodes

from ecdysis.benchmarks.tau2.benchmark import HARNESSES, Tau2Benchmark
from ecdysis.benchmarks.tau2.domain import TauDomain, select_tasks
from ecdysis.evolution import HarnessRef
from ecdysis.evolution.diagnosis import BatchDiagnoser, SequentialDiagnoser
from ecdysis.evolution.failures import REPLY_CHARS, failures_from, trim_for_context
from ecdysis.llm import Gateway
from ecdysis.llm.errors import StructuredOutputError
from ecdysis.protocols import EpisodeRequest, SandboxBackend
from ecdysis.records import FailureRecord, Task, TerminationReason, ToolCall, Trajectory
from ecdysis.sandbox import bundle_hash
from ecdysis.store import ArtifactStore
from ecdysis.testing.evidence import MARKDOWN_REPLY

EVIDENCE = "scripted/ecdysis.testing.evidence:"
REFUND_AGENT = "scripted/ecdysis.benchmarks.refund_desk.scripted:task_model"


def trajectory(task_id: str = "x", model: str = "m", **fields: Any) -> Trajectory:
    return Trajectory(trajectory_id=fields.pop("trajectory_id", f"t-{task_id}-{model}"), run_id="r",
                      task=Task(domain="d", task_id=task_id), model=model, harness_hash="h",
                      termination_reason=fields.pop("reason", TerminationReason.USER_STOP), reward=0.0, **fields)


def test_a_reply_written_instead_of_a_tool_call_reaches_the_record(backend: SandboxBackend, gateway: Gateway,
                                                                   seed: Path) -> None:
    run = refund_desk_episodes(backend, gateway, EVIDENCE + "answers_in_text", "text-run", task_ids=["order-1"])
    (record,) = failures_from(run(HarnessRef(seed, bundle_hash(seed)), "eval", 0))
    assert record.termination_reason is TerminationReason.USER_STOP
    assert record.failing_call is None and record.tool_error is None and record.tool_call_history == []
    assert record.last_reply == MARKDOWN_REPLY.format(name="get_order")  # the first tool the harness offered
    assert record.reward_breakdown == {"DB": 0.0}
    assert "no tool call was executed" in record.failure_decision
    assert "the model's last reply was text with no tool call" in record.failure_decision


def test_executed_calls_keep_their_arguments_in_the_record(backend: SandboxBackend, gateway: Gateway,
                                                          seed: Path) -> None:
    run = refund_desk_episodes(backend, gateway, REFUND_AGENT, "calls-run", task_ids=["order-1"])
    (record,) = failures_from(run(HarnessRef(seed, bundle_hash(seed)), "eval", 0))
    assert "None(" not in record.context_excerpt
    (refund,) = [c for c in record.tool_call_history if c.name == "refund"]
    assert f"[calls refund({json.dumps(refund.arguments, sort_keys=True)})]" in record.context_excerpt
    assert record.failing_call == refund  # no call was blocked or failed: the last one made
    assert record.failing_call.arguments["order_id"] == "order-1"
    assert record.reward_breakdown == {"DB": 0.0}


def test_openai_shaped_calls_render_with_their_arguments() -> None:
    messages = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "run_query", "arguments": '{"q": "x"}'}}]}]
    (record,) = failures_from([trajectory(messages=messages)])
    assert record.context_excerpt == 'assistant: [calls run_query({"q": "x"})]'


def test_the_erroring_call_and_the_environments_error_are_named() -> None:
    calls = [ToolCall(call_id="a", name="lookup", arguments={"id": "1"}, executed=True, result="{}"),
             ToolCall(call_id="b", name="update", arguments={"id": "2", "v": 3}, executed=True, error=True,
                      result="Error: no row with id 2\nmore detail"),
             ToolCall(call_id="c", name="lookup", arguments={"id": "3"}, executed=True, result="{}")]
    (record,) = failures_from([trajectory(tool_calls=calls)])
    assert record.failing_call is not None and record.failing_call.call_id == "b"
    assert record.tool_error == "Error: no row with id 2\nmore detail"
    blocked = ToolCall(call_id="d", name="update", arguments={}, executed=False, blocked_reason="rule: no id")
    (record,) = failures_from([trajectory(tool_calls=[*calls, blocked])])
    assert record.failing_call == blocked and record.tool_error is None


def test_a_long_reply_keeps_its_head_and_tail() -> None:
    reply = "HEAD " + "middle " * 500 + " TAIL"
    (record,) = failures_from([trajectory(messages=[{"role": "assistant", "content": reply}])])
    assert record.last_reply is not None and len(record.last_reply) <= REPLY_CHARS + 40
    assert record.last_reply.startswith("HEAD ") and record.last_reply.endswith(" TAIL")
    assert "characters cut" in record.last_reply


def test_a_shrunk_record_keeps_the_failing_call_and_the_ends_of_the_reply() -> None:
    calls = [ToolCall(call_id=f"c{i}", name="lookup", arguments={"i": i}, executed=True, result="r" * 300)
             for i in range(20)]
    failing = ToolCall(call_id="bad", name="update", arguments={"i": 99}, executed=True, error=True,
                       result="E" * 350)
    messages = [{"role": "user", "content": "word " * 500}, {"role": "assistant", "content": "A" + "x" * 800 + "Z"}]
    (record,) = failures_from([trajectory(messages=messages, tool_calls=[*calls, failing])])
    (short,) = trim_for_context([record, record.model_copy(update={"failure_id": "other"})], 2 * 1_500)[:1]
    assert len(short.model_dump_json()) <= 1_500
    assert short.failing_call is not None and short.failing_call.arguments == {"i": 99}
    assert short.last_reply is not None and short.last_reply.startswith("A") and short.last_reply.endswith("Z")
    assert short.tool_error == record.tool_error


def test_records_stored_before_the_evidence_fields_still_load(store: ArtifactStore) -> None:
    (record,) = failures_from([trajectory(messages=[{"role": "assistant", "content": "hi"}],
                                          reward_breakdown={"DB": 0.0})])
    store.append("failures", [record], run_id="r", round=0)
    (key,) = store.list_batches("failures", run_id="r")
    path = Path(store._backend.location(key))  # rewritten below as a writer before the evidence fields left it
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["last_reply", "failing_call", "tool_error", "reward_breakdown"]), path)
    (old,) = store.read("failures", run_id="r")
    assert (old.last_reply, old.failing_call, old.tool_error, old.reward_breakdown) == (None, None, None, {})
    assert old.model_copy(update={"last_reply": "hi", "reward_breakdown": {"DB": 0.0}}) == record


def scalars(value: Any) -> set[str]:
    """Every scalar inside ``value`` (nested lists and objects included), as text."""
    if isinstance(value, dict):
        return set().union(*(scalars(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(scalars(v) for v in value)) if value else set()
    return {str(value)}


def test_tau2_failure_records_hold_no_gold_the_agent_never_saw(backend: SandboxBackend,
                                                               shared_gateway: Gateway) -> None:
    """The grader's expected actions stay on the trusted side: a value of the gold actions is in a failure record
    only when the episode itself showed it (the agent or the user said it, a tool returned it)."""
    domain, task_id = "airline", "11"  # its skipped write's payment id and reservation id are never shown
    task = select_tasks(domain, task_ids=[task_id])[0]
    folder = HARNESSES / "human"
    request = EpisodeRequest(task=task, harness_dir=folder, harness_hash=bundle_hash(folder),
                             model="scripted/ecdysis.benchmarks.tau2.scripted:skip_one_write_agent",
                             user_model="scripted/ecdysis.benchmarks.tau2.scripted:scripted_user", run_id="gold")
    trajectory_ = Tau2Benchmark().run(request, backend, shared_gateway)
    (record,) = failures_from([trajectory_])
    criteria = TauDomain.load(domain).task(task_id).evaluation_criteria
    gold = {v for action in criteria.actions or [] for v in scalars(action.arguments) if len(v) >= 4}
    gold |= set(criteria.communicate_info or [])
    witnessed = json.dumps(trajectory_.messages) + json.dumps([c.model_dump() for c in trajectory_.tool_calls])
    unseen = {value for value in gold if value not in witnessed}
    assert unseen, "the task must have a gold value the episode never showed, or this test checks nothing"
    shown = record.model_dump_json()
    assert [value for value in unseen if value in shown] == []
    assert set(record.reward_breakdown) <= {"DB", "COMMUNICATE", "ENV_ASSERTION", "ACTION", "NL_ASSERTION"}


def failures_over(pairs: list[tuple[str, str]]) -> list[FailureRecord]:
    """One failure per (task, model), all with one signature."""
    return failures_from([trajectory(task_id, model, reward_breakdown={"DB": 0.0}) for task_id, model in pairs])


@pytest.mark.parametrize(("pairs", "systematic"), [
    ([("t1", "m1")], False),
    ([("t1", "m1"), ("t1", "m1")], False),  # two trials of one task under one model: one task's quirk
    ([("t1", "m1"), ("t2", "m1")], True),
    ([("t1", "m1"), ("t1", "m2")], True),
])
def test_a_pattern_is_systematic_only_when_its_support_says_so(gateway: Gateway, seed: Path,
                                                               pairs: list[tuple[str, str]], systematic: bool) -> None:
    records = failures_over(pairs) if len(set(pairs)) == len(pairs) else failures_from(
        [trajectory(t, m, trajectory_id=f"t{i}", reward_breakdown={"DB": 0.0}) for i, (t, m) in enumerate(pairs)])
    spec = BatchDiagnoser(gateway, EVIDENCE + "diagnoser_claims_systematic").diagnose(records, seed, run_id="s",
                                                                                   round=0)
    (pattern,) = spec.failure_patterns
    assert pattern.systematic is systematic  # the diagnoser called it systematic every time
    assert pattern.task_ids == sorted({t for t, _ in pairs}) and pattern.models == sorted({m for _, m in pairs})


def test_a_specification_without_a_change_is_asked_again(gateway: Gateway, seed: Path) -> None:
    records = failures_over([("t1", "m1"), ("t2", "m1")])
    spec = BatchDiagnoser(gateway, EVIDENCE + "diagnoser_no_change_then_one").diagnose(records, seed, run_id="c1",
                                                                                    round=0)
    assert len(spec.proposed_changes) == 1 and type(spec).__name__ == "ModificationSpec"
    assert gateway.usage("c1").calls == 2


@pytest.mark.parametrize("diagnoser_type", [BatchDiagnoser, SequentialDiagnoser])
def test_a_diagnoser_that_never_proposes_a_change_fails_clearly(gateway: Gateway, seed: Path,
                                                                diagnoser_type: type[BatchDiagnoser]) -> None:
    records = failures_over([("t1", "m1")])
    diagnoser = diagnoser_type(gateway, EVIDENCE + "diagnoser_no_change", max_attempts=2)
    with pytest.raises(StructuredOutputError, match=r"(?s)no valid ModificationSpec in 2 attempts.*no change proposed"):
        diagnoser.diagnose(records, seed, run_id="c2", round=0)
    assert gateway.usage("c2").calls == 2
