"""The host-side transcript of an episode, and its conversion to τ²'s own ``SimulationRun``.

Transcript messages (``Trajectory.messages``) are plain dicts, in the order the host saw them:

- ``{"role": "assistant", "content": text}``: something the agent said to the user (greeting included);
- ``{"role": "user", "content": text, "stop": bool}``: the simulated user's reply;
- ``{"role": "assistant", "content": None, "tool_calls": [{"id", "name", "arguments"}]}`` followed by
  ``{"role": "tool", "tool_call_id", "name", "content", "error"}``: one executed tool call and its result.

Blocked calls, annotations and peeks are not part of the conversation; they are in ``Trajectory.tool_calls``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ecdysis.records import TerminationReason
from ecdysis.tau.grading import WriteCall


def agent_text(text: str) -> dict[str, Any]:
    """A transcript entry for text the agent sent to the user."""
    return {"role": "assistant", "content": text}


def user_text(text: str, stop: bool) -> dict[str, Any]:
    """A transcript entry for the user's reply."""
    return {"role": "user", "content": text, "stop": stop}


def tool_exchange(call_id: str, name: str, arguments: dict[str, Any], content: str,
                  error: bool) -> list[dict[str, Any]]:
    """The two transcript entries of one executed tool call."""
    return [
        {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]},
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": content, "error": error},
    ]


def agent_texts(messages: list[dict[str, Any]]) -> list[str]:
    """Every text the agent sent to the user."""
    return [m["content"] for m in messages if m.get("role") == "assistant" and m.get("content")]


def executed_calls(messages: list[dict[str, Any]]) -> list[WriteCall]:
    """Every executed tool call, in order (the grader keeps only the writes)."""
    return [WriteCall(call["name"], call["arguments"]) for call in _tool_calls(messages)]


def _tool_calls(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for message in messages:
        if message.get("role") == "assistant":
            yield from message.get("tool_calls") or []


def to_simulation_run(messages: list[dict[str, Any]], task_id: str, termination: TerminationReason | str,
                      run_id: str = "ecdysis") -> Any:
    """τ²'s ``SimulationRun`` for a transcript, so τ²'s own evaluator can grade it (used to check our grader)."""
    from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage
    from tau2.data_model.simulation import SimulationRun
    from tau2.data_model.simulation import TerminationReason as TauReason

    reason = TerminationReason(termination)
    tau_reason = TauReason(reason.value) if reason.value in {r.value for r in TauReason} else TauReason.AGENT_ERROR
    out: list[Any] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            calls = [ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in message["tool_calls"]]
            out.append(AssistantMessage(role="assistant", content=message.get("content"), tool_calls=calls))
        elif role == "assistant":
            out.append(AssistantMessage(role="assistant", content=message.get("content")))
        elif role == "user":
            out.append(UserMessage(role="user", content=message.get("content")))
        elif role == "tool":
            out.append(ToolMessage(id=message["tool_call_id"], role="tool", content=message.get("content"),
                                   error=bool(message.get("error"))))
    return SimulationRun(id=run_id, task_id=task_id, start_time="", end_time="", duration=0.0,
                         termination_reason=tau_reason, messages=out)
