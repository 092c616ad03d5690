"""Test doubles for hierarchical aggregation: planted failure rounds and scripted ``aggregator`` models.

:func:`planted_failures` builds a round of failure records with a known number of recurring patterns (each over
several tasks and task models) plus one-off noise. The scripted aggregators read the group's records from the
prompt (``GROUP_RECORDS_JSON_BEGIN`` … ``END``): :func:`aggregator` answers a valid summary; the others answer the
bad inputs the aggregation must survive.

>>> records, patterns = planted_failures(200, patterns=5)       # doctest: +SKIP
>>> model = "scripted/ecdysis.testing.aggregation:aggregator"   # doctest: +SKIP
"""

from __future__ import annotations

import json
import random
from typing import Any

from ecdysis.records import FailureRecord, TerminationReason, ToolCall
from ecdysis.testing.evolution import between, scripted_diagnoser

MODELS = ("model-a", "model-b")


def planted_failures(n: int, *, patterns: int = 5, noise: float = 0.2, models: tuple[str, ...] = MODELS,
                     run_id: str = "planted", seed: int = 0) -> tuple[list[FailureRecord], list[str]]:
    """``n`` failure records: ``noise`` of them one-off (a unique signature on a task of their own), the rest
    spread over ``patterns`` recurring patterns, each on at least two tasks and, when it can, every model.
    Returns the records (shuffled) and the planted patterns' signatures."""
    if n < 2 * patterns:
        raise ValueError(f"{patterns} recurring patterns need at least {2 * patterns} failures, got {n}")
    rng = random.Random(seed)
    n_noise = min(int(n * noise), n - 2 * patterns)
    n_tasks = max(4, (n - n_noise) // 3)
    signatures = [f"agent_stop:blocked:tool_{p}" for p in range(patterns)]
    records = []
    for i in range(n - n_noise):
        p = i % patterns
        task = f"task-{(i // patterns) % n_tasks}"
        records.append(_record(run_id, i, task, models[(i // patterns) % len(models)], p, rng))
    for j in range(n_noise):
        records.append(_record(run_id, n - n_noise + j, f"noise-task-{j}", models[j % len(models)], None, rng))
    rng.shuffle(records)
    return records, signatures


def _record(run_id: str, i: int, task: str, model: str, pattern: int | None, rng: random.Random) -> FailureRecord:
    words = " ".join(rng.choice(("order", "flight", "refund", "seat", "date", "fare", "card")) for _ in range(30))
    calls = [ToolCall(call_id=f"c{k}", name=f"lookup_{k}", arguments={"id": f"{task}-{k}"}, executed=True,
                      result=f"record {k}: {words[:100]}", step=k) for k in range(2)]
    if pattern is None:
        tool, signature = f"noise_tool_{i}", f"agent_stop:reward:noise_{i}"
        decision = f"reward component db_{i} scored 0; the agent left out a write unique to {task}"
    else:
        tool, signature = f"tool_{pattern}", f"agent_stop:blocked:tool_{pattern}"
        decision = (f"step 2: tool_{pattern}({{\"id\": \"{task}\"}}) was blocked (rule_{pattern}: the call breaks "
                    f"policy {pattern} of the domain)")
    calls.append(ToolCall(call_id="c2", name=tool, arguments={"id": task}, executed=pattern is None,
                          blocked_reason=f"rule_{pattern}: the call breaks policy {pattern}" if pattern is not None
                          else None, result=None if pattern is not None else "ok", step=2))
    return FailureRecord(
        failure_id=f"f{i:05d}", run_id=run_id, round=0, trajectory_id=f"t{i:05d}", task_id=task, domain="airline",
        model=model, reward=0.0, failure_decision=decision, termination_reason=TerminationReason.AGENT_STOP,
        tool_call_history=calls, context_excerpt=f"user: please help with {task}. {words}\nassistant: {words[:300]}",
        signature=signature, failing_component=signature.split(":", 1)[1])


def _group_records(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    text = between(messages, "GROUP_RECORDS_JSON_BEGIN", "GROUP_RECORDS_JSON_END")
    records: list[dict[str, Any]] = json.loads(text) if text else []
    return records


def summary_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    """A valid summary of ``records``: their common signature, three ids, the first two decisions quoted."""
    if not records:
        raise ValueError("no GROUP_RECORDS_JSON in the prompt")
    return {"pattern": f"{records[0]['signature']}: {records[0]['failure_decision'][:160]}",
            "failure_ids": [r["failure_id"] for r in records[:3]],
            "evidence": [{"failure_id": r["failure_id"], "quote": r["failure_decision"][:120]} for r in records[:2]]}


def aggregator(messages: list[dict[str, Any]], tools: Any, context: dict[str, Any]) -> str:
    """A well-behaved aggregator."""
    return json.dumps(summary_of(_group_records(messages)))


def garbled_aggregator(messages: list[dict[str, Any]], tools: Any, context: dict[str, Any]) -> str:
    """Never answers JSON."""
    return "Here is my summary: the agent keeps failing {"


def unknown_ids_aggregator(messages: list[dict[str, Any]], tools: Any, context: dict[str, Any]) -> str:
    """Cites a failure_id that is not in the group."""
    summary = summary_of(_group_records(messages))
    summary["failure_ids"] = ["f-not-in-group", *summary["failure_ids"]]
    return json.dumps(summary)


def unquoted_aggregator(messages: list[dict[str, Any]], tools: Any, context: dict[str, Any]) -> str:
    """Quotes text found in no record (all evidence dropped)."""
    summary = summary_of(_group_records(messages))
    summary["evidence"] = [{"failure_id": q["failure_id"], "quote": "a passage nobody wrote"}
                           for q in summary["evidence"]]
    return json.dumps(summary)


def second_try_aggregator(messages: list[dict[str, Any]], tools: Any, context: dict[str, Any]) -> str:
    """Garbled until it is told its reply was not usable, then valid."""
    retried = any("not usable" in str(m.get("content") or "") for m in messages if m.get("role") == "user")
    return aggregator(messages, tools, context) if retried else garbled_aggregator(messages, tools, context)


def inventing_diagnoser(messages: list[dict[str, Any]], tools: Any, context: dict[str, Any]) -> str:
    """A diagnoser (one change per signature, as :func:`ecdysis.testing.evolution.scripted_diagnoser`) that always
    adds a failure_id found in no record to its first change's evidence."""
    spec = json.loads(str(scripted_diagnoser(())(messages, tools, context)))
    spec["proposed_changes"][0]["evidence"].append("f-invented")
    return json.dumps(spec)
