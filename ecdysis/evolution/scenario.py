"""A tiny refund-desk scenario with real sandboxed episodes, for training-loop tests and demos without τ²-bench.

Each task is one customer asking for the refund of one order. Policy: refund the item price, never the shipping.
The scripted task model (:func:`ecdysis.evolution.scripted.task_model`) has a systematic, harness-fixable flaw: it
refunds price + shipping, and only corrects itself when the harness blocks the call with a message naming the item
price. So orders with shipping fail under the seed harness and pass once a validation rule blocks over-refunds.

The episode runs the harness bundle in a real sandbox (any :class:`SandboxBackend`) through
:func:`ecdysis.sandbox.run_protocol`; the model is called through the real gateway; the grade is computed on the
trusted side from the tool calls the host executed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecdysis.protocols import LLMClient, SandboxBackend
from ecdysis.records import Role, Task, TerminationReason, TokenUsage, ToolCall, Trajectory, stable_hash

ORDERS: dict[str, dict[str, float]] = {
    "order-1": {"price": 40.0, "shipping": 5.0},
    "order-2": {"price": 25.0, "shipping": 0.0},
    "order-3": {"price": 60.0, "shipping": 8.0},
    "order-4": {"price": 15.0, "shipping": 3.0},
}
TASK_IDS = sorted(ORDERS)
DOMAIN = "refund_desk"
POLICY = "You are a refund agent. Refund the item price of the customer's order. Shipping is never refunded."
READ_TOOLS = {"get_order"}
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_order", "description": "Look up an order: its item price and shipping fee.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {
        "name": "refund", "description": "Refund an amount on an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
                       "required": ["order_id", "amount"]}}},
]

SEED_HARNESS = '''"""Refund-desk harness: a plain tool loop with a list of validation rules."""

import json

RULES = []  # (tool name, check(session, arguments) -> reason or None); a reason blocks the call

# RULES-END


def check(session, name, arguments):
    for tool, rule in RULES:
        if tool == name:
            reason = rule(session, arguments)
            if reason:
                return reason
    return None


def run(session):
    greeting = "Hello, how can I help you?"
    reply = session.respond_to_user(greeting)
    messages = [{"role": "system", "content": session.policy}, {"role": "assistant", "content": greeting},
                {"role": "user", "content": reply.text}]
    for _ in range(session.max_steps):
        message = session.complete(messages, tools=session.tools)
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            reply = session.respond_to_user(message.get("content") or "")
            if reply.stop:
                return "agent_stop"
            messages.append({"role": "user", "content": reply.text})
            continue
        for call in calls:
            name = call["function"]["name"]
            arguments = json.loads(call["function"].get("arguments") or "{}")
            reason = check(session, name, arguments)
            if reason:
                session.block(call["id"], name, arguments, reason)
                content = "BLOCKED: " + reason
            else:
                content = session.call_tool(call["id"], name, arguments).content
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return "max_steps"


def selftest():
    assert callable(run)
    for tool, rule in RULES:
        assert isinstance(tool, str) and callable(rule)
'''


def write_seed_harness(target: Path) -> Path:
    """Write the seed harness bundle of this scenario into ``target``; returns it."""
    target.mkdir(parents=True, exist_ok=True)
    (target / "harness.py").write_text(SEED_HARNESS, encoding="utf-8")
    return target


class RefundDesk:
    """The trusted environment of one episode: executes tool calls and remembers the refunds."""

    def __init__(self) -> None:
        self.refunds: list[tuple[str, float]] = []

    def execute(self, name: str, arguments: dict[str, Any], *, read_only: bool = False) -> dict[str, Any]:
        """``{"content", "error"}`` of one tool call."""
        order = ORDERS.get(str(arguments.get("order_id")))
        if name not in {"get_order", "refund"}:
            return {"content": f"unknown tool {name}", "error": True}
        if order is None:
            return {"content": f"no order {arguments.get('order_id')!r}", "error": True}
        if name == "get_order":
            return {"content": json.dumps({"order_id": arguments["order_id"], **order}), "error": False}
        if read_only:
            return {"content": "refund is a write tool; it cannot be peeked", "error": True}
        try:
            amount = float(arguments.get("amount", 0))
        except (TypeError, ValueError):
            return {"content": f"invalid amount {arguments.get('amount')!r}", "error": True}
        self.refunds.append((str(arguments["order_id"]), amount))
        return {"content": f"refunded {amount:g} on {arguments['order_id']}", "error": False}

    def grade(self, task_id: str) -> float:
        """1.0 iff exactly the item price of the task's order was refunded, once."""
        return 1.0 if self.refunds == [(task_id, ORDERS[task_id]["price"])] else 0.0


def run_episode(backend: SandboxBackend, bundle_dir: Path, harness_hash: str, task_id: str, *, llm: LLMClient,
                model: str, run_id: str, round: int = 0, phase: str = "eval", trial: int = 0, max_steps: int = 12,
                wall_clock_s: float = 60.0) -> Trajectory:
    """One sandboxed episode of ``task_id``; always returns a trajectory (failures are data)."""
    from ecdysis.sandbox import EndEpisode, HandlerError, run_protocol

    env = RefundDesk()
    messages: list[dict[str, Any]] = []
    calls: dict[str, ToolCall] = {}
    tokens = TokenUsage()
    counters = {"llm": 0, "steps": 0, "user": 0, "cache_hits": 0}
    context = {"run_id": run_id, "round": round, "task_id": task_id, "domain": DOMAIN, "trial": trial,
               "phase": phase}

    def complete(params: dict[str, Any]) -> dict[str, Any]:
        nonlocal tokens
        counters["steps"] += 1
        if counters["steps"] > max_steps:
            raise EndEpisode(TerminationReason.MAX_STEPS, f"more than {max_steps} model calls")
        try:
            completion = llm.complete(model, params.get("messages") or [], role=Role.TASK,
                                      tools=params.get("tools"), context=context)
        except Exception as exc:
            raise EndEpisode(TerminationReason.LLM_ERROR, f"{type(exc).__name__}: {exc}") from exc
        counters["llm"] += 1
        counters["cache_hits"] += int(completion.cache_hit)
        tokens = tokens + completion.tokens
        message = completion.as_message()
        messages.append(message)
        return message

    def respond(params: dict[str, Any]) -> dict[str, Any]:
        counters["user"] += 1
        text = str(params.get("text", ""))
        messages.append({"role": "assistant", "content": text})
        if counters["user"] == 1:
            reply = {"text": f"Please refund my order {task_id}.", "stop": False}
        else:
            reply = {"text": "Thank you, goodbye.", "stop": True}
        messages.append({"role": "user", "content": reply["text"]})
        if reply["stop"]:
            raise EndEpisode(TerminationReason.USER_STOP, "the user ended the conversation")
        return reply

    def tool_call(params: dict[str, Any]) -> dict[str, Any]:
        name, arguments = str(params.get("name", "")), params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise HandlerError("invalid_arguments", "arguments must be an object")
        result = env.execute(name, arguments)
        call_id = str(params.get("call_id", f"call-{len(calls)}"))
        calls[call_id] = ToolCall(call_id=call_id, name=name, arguments=arguments, executed=True,
                                  result=result["content"], error=result["error"], step=counters["steps"])
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result["content"]})
        return result

    def peek(params: dict[str, Any]) -> dict[str, Any]:
        name = str(params.get("name", ""))
        if name not in READ_TOOLS:
            raise HandlerError("not_read_only", f"{name} is not a read-only tool")
        return env.execute(name, params.get("arguments") or {}, read_only=True)

    started = time.monotonic()
    start = {"mode": "episode", "session": {"episode_id": f"{run_id}-{task_id}-{trial}", "policy": POLICY,
                                            "tools": TOOLS, "max_steps": max_steps, "config": {}}}
    error = None
    try:
        sandbox = backend.acquire(bundle_dir, harness_hash)
        outcome = run_protocol(sandbox, start, {"llm.complete": complete, "user.respond": respond,
                                                "tool.call": tool_call, "tool.peek": peek},
                               wall_clock_s=wall_clock_s, max_requests=8 * max_steps)
        reason = outcome.finish_reason
        error = None if reason.is_normal_stop else outcome.note or outcome.stderr_tail[-2000:] or None
        for event in outcome.events:
            if event["kind"] == "blocked":
                p = event["params"]
                call_id = str(p.get("call_id", f"blocked-{len(calls)}"))
                calls[call_id] = ToolCall(call_id=call_id, name=str(p.get("name", "")),
                                          arguments=dict(p.get("arguments") or {}), executed=False,
                                          blocked_reason=str(p.get("reason", "")))
    except Exception as exc:  # the sandbox did not start: infrastructure, retried by callers, never evidence
        reason, error = TerminationReason.SANDBOX_ERROR, f"{type(exc).__name__}: {exc}"
    reward = env.grade(task_id) if reason.is_normal_stop else 0.0
    return Trajectory(
        trajectory_id=stable_hash([run_id, round, phase, harness_hash, task_id, trial])[:24],
        run_id=run_id, round=round, phase=phase, task=Task(domain=DOMAIN, task_id=task_id), model=model,
        trial=trial, harness_hash=harness_hash, messages=messages, tool_calls=_ordered(calls, messages),
        termination_reason=reason, error=error, reward=reward, reward_breakdown={"DB": reward}, tokens=tokens,
        llm_calls=counters["llm"], cache_hits=counters["cache_hits"], wall_time_s=time.monotonic() - started)


def _ordered(calls: dict[str, ToolCall], messages: list[dict[str, Any]]) -> list[ToolCall]:
    """Tool calls in the order the model asked for them (blocked ones included)."""
    order = [c["id"] for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    known = [calls[i] for i in order if i in calls]
    return known + [c for i, c in calls.items() if i not in order]


def make_evaluate(backend: SandboxBackend, llm: LLMClient, model: str, run_id: str,
                  task_ids: list[str] | None = None) -> Callable[[Path, str, int, str], list[Trajectory]]:
    """An ``evaluate(bundle_dir, harness_hash, round, phase)`` for the training loop: one episode per task."""
    tasks = list(task_ids or TASK_IDS)

    def evaluate(bundle_dir: Path, harness_hash: str, round: int, phase: str) -> list[Trajectory]:
        return [run_episode(backend, bundle_dir, harness_hash, task_id, llm=llm, model=model, run_id=run_id,
                            round=round, phase=phase) for task_id in tasks]

    return evaluate
