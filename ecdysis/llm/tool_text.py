"""Tool calls written as text: the lenient parser for models whose chat template makes them answer with JSON in the
message content instead of the server's structured ``tool_calls`` (``ModelConfig.tool_call_parsing="lenient"``).

Recognised: a bare JSON object or list, a fenced ```` ```json ```` block, ``<tool_call>…</tool_call>`` tags; each
call is ``{"name": ..., "arguments": {...}}`` (``"parameters"`` is accepted for ``"arguments"``, and arguments may
be a JSON string holding an object); several calls may follow each other. Only names among the offered tools
count. Anything else, malformed JSON included, stays plain content: this never raises.

>>> calls, rest = parse_tool_calls('<tool_call>{"name": "ls", "arguments": {"path": "/"}}</tool_call>', {"ls"})
>>> calls[0]["function"]["name"], calls[0]["function"]["arguments"], rest
('ls', '{"path": "/"}', None)
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Sequence
from typing import Any

_DECODER = json.JSONDecoder()
_EMPTY_WRAPPER = re.compile(r"<tool_call>\s*</tool_call>|```[a-zA-Z]*\s*```")


def offered_names(tools: Sequence[dict[str, Any]] | None) -> set[str]:
    """The function names of an OpenAI-style ``tools`` list (entries without one are ignored)."""
    names = set()
    for tool in tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def _as_call(value: Any, names: Collection[str]) -> tuple[str, str] | None:
    """``(name, arguments JSON)`` when ``value`` is a call of an offered tool, else None."""
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return str(value["name"]), json.dumps(arguments, ensure_ascii=False)


def _calls_in(value: Any, names: Collection[str]) -> list[tuple[str, str]] | None:
    """The calls one decoded JSON value holds (an object, or a list of objects that are all calls), else None."""
    if isinstance(value, list):
        calls = [_as_call(item, names) for item in value]
        return [c for c in calls if c is not None] if calls and all(calls) else None
    call = _as_call(value, names)
    return [call] if call else None


def parse_tool_calls(content: str | None, names: Collection[str]) -> tuple[list[dict[str, Any]], str | None]:
    """The tool calls written in ``content`` (OpenAI ``tool_calls`` entries with deterministic ids) and the content
    left once they are taken out (None when nothing is left). With no call found, ``content`` comes back as is."""
    if not content or not names:
        return [], content
    found: list[tuple[str, str]] = []
    kept: list[str] = []
    position = 0
    index = _next_start(content, 0)
    while 0 <= index < len(content):
        try:
            value, end = _DECODER.raw_decode(content, index)
        except json.JSONDecodeError:
            value, end = None, index + 1
        calls = _calls_in(value, names) if value is not None else None
        if calls:
            found += calls
            kept.append(content[position:index])
            position = end
        index = _next_start(content, end)  # past a whole JSON value that is no call: calls nested in it don't count
    if not found:
        return [], content
    kept.append(content[position:])
    rest = _EMPTY_WRAPPER.sub("", "".join(kept)).strip()
    digest = hashlib.sha256(content.encode()).hexdigest()[:12]
    tool_calls = [{"id": f"call_{digest}_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                  for i, (name, args) in enumerate(found)]
    return tool_calls, rest or None


def _next_start(content: str, start: int) -> int:
    """The next ``{`` or ``[`` at or after ``start``, or -1."""
    candidates = [i for i in (content.find("{", start), content.find("[", start)) if i >= 0]
    return min(candidates) if candidates else -1
