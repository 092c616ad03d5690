"""Tool calls written as text: the lenient parser for models whose chat template makes them answer with JSON in the
message content instead of the server's structured ``tool_calls`` (``ModelConfig.tool_call_parsing="lenient"``).

Recognised: a bare JSON object or list, a fenced ```` ```json ```` block, ``<tool_call>…</tool_call>`` tags; each
call is ``{"name": ..., "arguments": {...}}`` (``"parameters"`` is accepted for ``"arguments"``, and arguments may
be a JSON string holding an object) or the same in OpenAI's shape, ``{"type": "function", "function": {"name": ...,
"arguments": ...}}``; a list of calls, or an OpenAI message's ``{"tool_calls": [...]}`` (its ``content`` text is
kept), holds several; several calls may also follow each other. A list counts only when every entry is a call, and
only names among the offered tools count. Anything else, malformed JSON included, stays plain content: this never
raises.

>>> calls, rest = parse_tool_calls('<tool_call>{"name": "ls", "arguments": {"path": "/"}}</tool_call>', {"ls"})
>>> calls[0]["function"]["name"], calls[0]["function"]["arguments"], rest
('ls', '{"path": "/"}', None)
>>> text = '{"tool_calls": [{"type": "function", "function": {"name": "ls", "arguments": {"path": "/"}}}]}'
>>> parse_tool_calls(text, {"ls"})[0][0]["function"]["arguments"]
'{"path": "/"}'
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


def _function_of(value: Any) -> Any:
    """The ``function`` object of an OpenAI-shaped call (``{"type": "function", "function": {...}}``), else
    ``value`` itself."""
    if (isinstance(value, dict) and "name" not in value and isinstance(value.get("function"), dict)
            and value.get("type", "function") == "function"):
        return value["function"]
    return value


def _as_call(value: Any, names: Collection[str]) -> tuple[str, str] | None:
    """``(name, arguments JSON)`` when ``value`` is a call of an offered tool, in either shape, else None."""
    value = _function_of(value)
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


def _calls_in(value: Any, names: Collection[str]) -> tuple[list[tuple[str, str]], str] | None:
    """The calls one decoded JSON value holds (an object, a list of objects that are all calls, or a
    ``{"tool_calls": [...]}`` wrapper of such a list) and the wrapper's ``content`` text (``""`` without one); else
    None."""
    text = ""
    if _is_wrapper(value):
        content = value.get("content")
        text, value = (content if isinstance(content, str) else ""), value["tool_calls"]
    if isinstance(value, list):
        calls = [_as_call(item, names) for item in value]
        return ([c for c in calls if c is not None], text) if calls and all(calls) else None
    call = _as_call(value, names)
    return ([call], text) if call else None


def _is_wrapper(value: Any) -> bool:
    """Whether ``value`` is an OpenAI assistant message written out: ``{"tool_calls": [...]}``, maybe with a role
    and content."""
    return (isinstance(value, dict) and isinstance(value.get("tool_calls"), list) and "name" not in value
            and "function" not in value)


def parse_tool_calls(content: str | None, names: Collection[str]) -> tuple[list[dict[str, Any]], str | None]:
    """The tool calls written in ``content`` (OpenAI ``tool_calls`` entries with deterministic ids) and the content
    left once they are taken out (None when nothing is left). With no call found, ``content`` comes back as is."""
    if not content or not names:
        return [], content
    found: list[tuple[str, str]] = []
    kept: list[str] = []
    said: list[str] = []  # content texts of {"tool_calls": [...]} wrappers, kept after the rest
    position = 0
    index = _next_start(content, 0)
    while 0 <= index < len(content):
        try:
            value, end = _DECODER.raw_decode(content, index)
        except json.JSONDecodeError:
            value, end = None, index + 1
        taken = _calls_in(value, names) if value is not None else None
        if taken:
            found += taken[0]
            kept.append(content[position:index])
            said.append(taken[1])
            position = end
        index = _next_start(content, end)  # past a whole JSON value that is no call: calls nested in it don't count
    if not found:
        return [], content
    kept.append(content[position:])
    parts = [_EMPTY_WRAPPER.sub("", "".join(kept)), *said]
    rest = "\n".join(part.strip() for part in parts if part.strip())
    digest = hashlib.sha256(content.encode()).hexdigest()[:12]
    tool_calls = [{"id": f"call_{digest}_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                  for i, (name, args) in enumerate(found)]
    return tool_calls, rest or None


def _next_start(content: str, start: int) -> int:
    """The next ``{`` or ``[`` at or after ``start``, or -1."""
    candidates = [i for i in (content.find("{", start), content.find("[", start)) if i >= 0]
    return min(candidates) if candidates else -1
