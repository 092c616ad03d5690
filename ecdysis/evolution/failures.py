"""Failure records: the evidence a training round hands to diagnosis.

Every trajectory that scored below the threshold becomes one :class:`FailureRecord`, except infrastructure endings
(they say nothing about the harness or the model). Each record carries a deterministic ``signature`` —
termination reason + failing component — so equal failures on different tasks, trials or models group together.

>>> records = failures_from(trajectories, threshold=1.0)     # doctest: +SKIP
>>> batch = trim_for_context(records, max_chars=40_000)      # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ecdysis.records import FailureRecord, TerminationReason, ToolCall, Trajectory, stable_hash

EXCERPT_MESSAGES = 8
EXCERPT_CHARS = 4_000
RESULT_CHARS = 400
REPLY_CHARS = 600
"""The most of the model's last reply a record keeps: its head (where a reply states what it does) and its tail."""
ARGUMENT_CHARS = 300
MIN_REPLY_CHARS = 160
"""What :func:`shrink_record` leaves at least of the last reply and of the failing call's result."""


def failures_from(trajectories: Iterable[Trajectory], threshold: float = 1.0) -> list[FailureRecord]:
    """One failure record per trajectory with ``reward < threshold``; infrastructure endings are skipped."""
    records = []
    for trajectory in trajectories:
        if trajectory.termination_reason.is_infrastructure or trajectory.reward >= threshold:
            continue
        records.append(failure_record(trajectory))
    return records


def failure_record(trajectory: Trajectory) -> FailureRecord:
    """The failure record of one trajectory (whatever its reward)."""
    component, decision = failing_component(trajectory)
    return FailureRecord(
        failure_id=stable_hash(["failure", trajectory.run_id, trajectory.round, trajectory.trajectory_id])[:16],
        run_id=trajectory.run_id,
        round=trajectory.round,
        trajectory_id=trajectory.trajectory_id,
        task_id=trajectory.task.task_id,
        domain=trajectory.task.domain,
        model=trajectory.model,
        reward=trajectory.reward,
        failure_decision=decision,
        termination_reason=trajectory.termination_reason,
        tool_call_history=[_short_call(call) for call in trajectory.tool_calls],
        context_excerpt=context_excerpt(trajectory.messages),
        signature=f"{trajectory.termination_reason.value}:{component}",
        failing_component=component,
        last_reply=last_reply(trajectory.messages),
        failing_call=_short_call(call) if (call := failing_call(trajectory)) else None,
        tool_error=_clip_middle(call.result or "", RESULT_CHARS) if call is not None and call.error else None,
        reward_breakdown=dict(trajectory.reward_breakdown),
    )


def failing_call(trajectory: Trajectory) -> ToolCall | None:
    """The tool call a diagnoser looks at first: the first blocked call, else the first erroring one, else the last
    call made; None when the episode made no tool call."""
    calls = trajectory.tool_calls
    blocked = next((c for c in calls if not c.executed and c.blocked_reason is not None), None)
    return blocked or next((c for c in calls if c.error), None) or (calls[-1] if calls else None)


def last_reply(messages: Sequence[dict[str, Any]], max_chars: int = REPLY_CHARS) -> str | None:
    """The model's last text reply in the transcript (its head and tail when longer than ``max_chars``); None when
    the model wrote no text."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and content.strip():
            return _clip_middle(content.strip(), max_chars)
    return None


def failing_component(trajectory: Trajectory) -> tuple[str, str]:
    """``(component, decisive step in words)`` of a failed trajectory; deterministic in its content.

    Precedence: an abnormal ending names itself; then a blocked tool call, an erroring tool call, the weakest
    component of the reward breakdown, a missing final answer; else ``unknown``.
    """
    reason = trajectory.termination_reason
    if not reason.is_normal_stop:
        detail = _error_kind(trajectory.error) if reason in _ERROR_REASONS else ""
        component = f"{reason.value}:{detail}" if detail else reason.value
        last = trajectory.tool_calls[-1] if trajectory.tool_calls else None
        after = f" after {_describe(last)}" if last else " before any tool call"
        note = f": {_first_line(trajectory.error)}" if trajectory.error else ""
        return component, f"episode ended with {reason.value}{after}{note}"
    for call in trajectory.tool_calls:
        if not call.executed and call.blocked_reason is not None:
            return f"blocked:{call.name}", f"step {call.step}: {_describe(call)} was blocked ({call.blocked_reason})"
    for call in trajectory.tool_calls:
        if call.error:
            result = _first_line(call.result)
            return f"tool_error:{call.name}", f"step {call.step}: {_describe(call)} returned an error: {result}"
    weak = sorted((value, key) for key, value in trajectory.reward_breakdown.items() if value < 1.0)
    if weak:
        value, key = weak[0]
        last_write = _last_executed(trajectory.tool_calls)
        context = f"; last executed call: {_describe(last_write)}" if last_write else "; no tool call was executed"
        if _has_final_answer(trajectory.messages):
            context += "; the model's last reply was text with no tool call"
        return f"reward:{key}", f"reward component {key} scored {value:g}{context}"
    if not _has_final_answer(trajectory.messages):
        return "no_final_answer", "the agent stopped without a final answer to the user"
    return "unknown", f"reward {trajectory.reward:g} with no failing component in the breakdown"


def context_excerpt(messages: Sequence[dict[str, Any]], n_messages: int = EXCERPT_MESSAGES,
                    max_chars: int = EXCERPT_CHARS) -> str:
    """The last ``n_messages`` messages as ``role: text`` lines, cut from the front to ``max_chars``."""
    lines = []
    for message in messages[-n_messages:]:
        role = message.get("role", "?")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, sort_keys=True) if content else ""
        for call in message.get("tool_calls") or []:
            text += f" [calls {_call_text(call)}]"
        lines.append(f"{role}: {text.strip()}")
    excerpt = "\n".join(lines)
    return excerpt if len(excerpt) <= max_chars else "…" + excerpt[-(max_chars - 1):]


def trim_for_context(records: Sequence[FailureRecord], max_chars: int) -> list[FailureRecord]:
    """Shrink every record evenly so the JSON of the whole batch fits in about ``max_chars``.

    Each record gets the same share; an oversize record loses, in order, its oldest tool calls (down to half its
    share), the front of its context excerpt, more tool calls, the middle of its last reply and of its failing call's
    result (down to :data:`MIN_REPLY_CHARS`), then the tail of its failure decision. Records under
    their share are left as they are.
    """
    if max_chars <= 0:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    if not records or sum(_size(r) for r in records) <= max_chars:
        return list(records)
    share = max(max_chars // len(records), 200)
    return [_shrink(record, share) for record in records]


def shrink_record(record: FailureRecord, budget: int) -> FailureRecord:
    """``record`` cut to about ``budget`` characters of JSON, as :func:`trim_for_context` cuts each record."""
    return _shrink(record, budget)


def _shrink(record: FailureRecord, budget: int) -> FailureRecord:
    if _size(record) <= budget:
        return record
    calls = list(record.tool_call_history)
    while calls and sum(len(call.model_dump_json()) for call in calls) > budget // 2:
        calls = calls[1:]  # the oldest calls go first, until they take at most half the share
    record = record.model_copy(update={"tool_call_history": calls})
    over = _size(record) - budget
    if over > 0:
        excerpt = record.context_excerpt
        keep = max(len(excerpt) - over - 1, 0)
        record = record.model_copy(update={"context_excerpt": ("…" + excerpt[-keep:]) if keep else ""})
    while calls and _size(record) > budget:
        calls = calls[1:]
        record = record.model_copy(update={"tool_call_history": calls})
    over = _size(record) - budget
    if over > 0 and record.last_reply and len(record.last_reply) > MIN_REPLY_CHARS:
        keep = max(len(record.last_reply) - over, MIN_REPLY_CHARS)
        record = record.model_copy(update={"last_reply": _clip_middle(record.last_reply, keep)})
    call = record.failing_call
    if _size(record) > budget and call is not None and call.result and len(call.result) > MIN_REPLY_CHARS:
        short = call.model_copy(update={"result": _clip_middle(call.result, MIN_REPLY_CHARS)})
        record = record.model_copy(update={"failing_call": short})
    if _size(record) > budget:
        room = max(len(record.failure_decision) - (_size(record) - budget) - 1, 40)
        record = record.model_copy(update={"failure_decision": record.failure_decision[:room] + "…"})
    return record


def _size(record: FailureRecord) -> int:
    return len(record.model_dump_json())


_ERROR_REASONS = {TerminationReason.HARNESS_ERROR, TerminationReason.LLM_ERROR, TerminationReason.PROTOCOL_ERROR}


def _error_kind(error: str | None) -> str:
    """The exception class of a traceback's last line (``KeyError: 'x'`` → ``KeyError``), else ''."""
    if not error:
        return ""
    last = error.strip().splitlines()[-1]
    head = last.split(":", 1)[0].strip()
    return head if head.replace(".", "").replace("_", "").isalnum() and " " not in head else ""


def _first_line(text: str | None, limit: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line[:limit]


def _call_text(call: dict[str, Any]) -> str:
    """``name(arguments)`` of a transcript's tool call: the host's shape ``{"id", "name", "arguments"}`` (arguments as
    the harness sent them) or the OpenAI shape ``{"function": {"name", "arguments": "<JSON text>"}}``."""
    function = call.get("function")
    entry = function if isinstance(function, dict) else call
    arguments = entry.get("arguments")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True, default=str)
    return f"{entry.get('name') or '?'}({_clip_middle(text, ARGUMENT_CHARS)})"


def _clip_middle(text: str, limit: int) -> str:
    """``text`` whole when it fits in ``limit`` characters, else its head and tail around a note of the cut."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    head = max(limit - tail - 40, 0)
    return f"{text[:head]} …[{len(text) - head - tail} characters cut]… {text[len(text) - tail:]}"


def _describe(call: ToolCall) -> str:
    arguments = json.dumps(call.sent_arguments, sort_keys=True)
    if len(arguments) > 200:
        arguments = arguments[:199] + "…"
    return f"{call.name}({arguments})"


def _last_executed(calls: Sequence[ToolCall]) -> ToolCall | None:
    executed = [call for call in calls if call.executed]
    return executed[-1] if executed else None


def _has_final_answer(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether the model's last turn in the transcript was text rather than a tool call."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return bool(message.get("content")) and not message.get("tool_calls")
    return False


def _short_call(call: ToolCall) -> ToolCall:
    if call.result is None or len(call.result) <= RESULT_CHARS:
        return call
    return call.model_copy(update={"result": call.result[: RESULT_CHARS - 1] + "…"})
