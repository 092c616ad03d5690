"""A τ² episode's transcript (the shape is :mod:`ecdysis.benchmarks.episode`'s) as the grader and τ² read it: the
executed calls, and τ²'s own ``SimulationRun``.

In a dual-control domain (telecom) the transcript also holds the simulated user's own tool calls: a ``user`` message
with ``tool_calls`` followed by their ``tool`` results (``"requestor": "user"``), placed before the user's reply."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ecdysis.benchmarks.episode import transcript_calls
from ecdysis.benchmarks.tau2.domain import tau2_arguments
from ecdysis.benchmarks.tau2.grading import WriteCall
from ecdysis.records import TerminationReason


def executed_calls(messages: list[dict[str, Any]]) -> list[WriteCall]:
    """Every executed tool call, in order, with the arguments τ²'s tool got (the grader keeps only the writes).

    Where the user made tool calls too (dual control), those carry requestor ``user``, and every call carries the
    result recorded for it (τ²'s replay checks it)."""
    if not any(m.get("role") == "user" and m.get("tool_calls") for m in messages):
        return [WriteCall(call["name"], tau2_arguments(call["arguments"])) for call in transcript_calls(messages)]
    calls: list[WriteCall] = []
    pending: list[int] = []  # results pair with calls in order, as τ²'s replay pairs them (ids may repeat)
    for message in messages:
        if message.get("role") in ("assistant", "user"):
            for call in message.get("tool_calls") or []:
                pending.append(len(calls))
                calls.append(WriteCall(call["name"], tau2_arguments(call["arguments"]), requestor=message["role"]))
        elif message.get("role") == "tool" and pending:
            content = message.get("content")
            index = pending.pop(0)
            calls[index] = replace(calls[index], content=content if isinstance(content, str) else None)
    return calls


def to_simulation_run(messages: list[dict[str, Any]], task_id: str, termination: TerminationReason | str,
                      run_id: str = "ecdysis") -> Any:
    """τ²'s ``SimulationRun`` for a transcript, so τ²'s own evaluator can grade it (used to check our grader).

    Arguments that are not a JSON object travel as :func:`~ecdysis.benchmarks.tau2.domain.tau2_arguments` passed
    them to the tool, so τ²'s replay gives the outputs the agent saw."""
    from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage
    from tau2.data_model.simulation import SimulationRun
    from tau2.data_model.simulation import TerminationReason as TauReason

    reason = TerminationReason(termination)
    tau_reason = TauReason(reason.value) if reason.value in {r.value for r in TauReason} else TauReason.AGENT_ERROR
    out: list[Any] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            calls = [ToolCall(id=c["id"], name=c["name"], arguments=tau2_arguments(c["arguments"]))
                     for c in message["tool_calls"]]
            out.append(AssistantMessage(role="assistant", content=message.get("content"), tool_calls=calls))
        elif role == "assistant":
            out.append(AssistantMessage(role="assistant", content=message.get("content")))
        elif role == "user" and message.get("tool_calls"):
            calls = [ToolCall(id=c["id"], name=c["name"], arguments=tau2_arguments(c["arguments"]), requestor="user")
                     for c in message["tool_calls"]]
            out.append(UserMessage(role="user", content=message.get("content"), tool_calls=calls))
        elif role == "user":
            out.append(UserMessage(role="user", content=message.get("content")))
        elif role == "tool":
            out.append(ToolMessage(id=message["tool_call_id"], role="tool", content=message.get("content"),
                                   error=bool(message.get("error")), requestor=message.get("requestor", "assistant")))
    return SimulationRun(id=run_id, task_id=task_id, start_time="", end_time="", duration=0.0,
                         termination_reason=tau_reason, messages=out)
