"""Generic scripted models (see :class:`ecdysis.protocols.ScriptedModelFn`) and helpers to build more.

Use them through the gateway with their model string, e.g. ``scripted/ecdysis.testing.models:echo``. A script is
a module-level :class:`ScriptedModel`, so any process (a Ray worker included) can import it by name::

    # mypkg/agents.py
    from ecdysis.testing.models import ScriptedModel, call
    lookup = ScriptedModel([call("get_user", user_id="u1"), "The user is Ada."])
    # model string: "scripted/mypkg.agents:lookup"
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

Reply = str | dict[str, Any]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """An assistant message asking for one tool call (OpenAI shape; the id is filled in by the script)."""
    return {"content": None, "tool_calls": [{"type": "function",
                                             "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _with_ids(reply: Reply, step: int) -> Reply:
    if isinstance(reply, str):
        return reply
    calls = [{**c, "id": c.get("id") or f"call_{step}_{j}"} for j, c in enumerate(reply.get("tool_calls") or [])]
    return {**reply, "tool_calls": calls}


class ScriptedModel:
    """Plays ``steps`` in order: the reply to a conversation holding *n* assistant messages is ``steps[n]``.

    Stateless (the position comes from the conversation), so it behaves the same across processes, retries and
    the response cache. Past the end of the script it answers ``after``.
    """

    def __init__(self, steps: Sequence[Reply], *, after: Reply = "done") -> None:
        self.steps = list(steps)
        self.after = after

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 context: dict[str, Any]) -> Reply:
        step = sum(1 for m in messages if m.get("role") == "assistant")
        reply = self.steps[step] if step < len(self.steps) else self.after
        return _with_ids(reply, step)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def echo(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    """Repeats the last user message: ``"echo: <text>"``."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    return f"echo: {_text(last) if last else ''}"


SLOW_ECHO_S = 0.3
"""How long :func:`slow_echo` takes to answer."""


def slow_echo(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    """:func:`echo` after :data:`SLOW_ECHO_S` seconds: a model whose calls take visible time (cache-hit timing)."""
    time.sleep(SLOW_ECHO_S)
    return echo(messages, tools, context)


def echo_context(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 context: dict[str, Any]) -> str:
    """Replies with the gateway context it was called with, as canonical JSON (checks what reaches a model)."""
    return json.dumps(context, sort_keys=True, default=str)


_PLACEHOLDERS: dict[str, Any] = {"string": "x", "integer": 1, "number": 1, "boolean": True, "array": [],
                                 "object": {}}


def _placeholder_arguments(tool: dict[str, Any]) -> dict[str, Any]:
    parameters = tool.get("function", {}).get("parameters") or {}
    properties = parameters.get("properties") or {}
    return {name: _PLACEHOLDERS.get(properties.get(name, {}).get("type", "string"), "x")
            for name in parameters.get("required") or []}


def tool_then_answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                     context: dict[str, Any]) -> Reply:
    """Calls the first offered tool (placeholder values for required arguments) unless the conversation already
    holds a tool result; then answers ``"result: <last tool output>"``. Without tools it echoes."""
    results = [m for m in messages if m.get("role") == "tool"]
    if results:
        return f"result: {_text(results[-1])}"
    if not tools:
        return echo(messages, tools, context)
    first = tools[0]
    name = first.get("function", {}).get("name", "")
    return _with_ids(call(name, **_placeholder_arguments(first)), 0)


def model_string(target: Callable[..., Any] | str, name: str | None = None) -> str:
    """The gateway model string of a module-level scripted model.

    ``model_string(echo)`` → ``"scripted/ecdysis.testing.models:echo"``; for a :class:`ScriptedModel` instance
    pass its module-level ``name`` (instances do not know it), or pass ``"module:attr"`` directly.
    """
    if isinstance(target, str):
        return target if target.startswith("scripted/") else f"scripted/{target}"
    if isinstance(target, ScriptedModel):
        if name is None:
            raise ValueError("model_string(ScriptedModel) needs the module-level name: model_string(m, 'module:m')")
        return model_string(name)
    return f"scripted/{target.__module__}:{name or target.__qualname__}"
