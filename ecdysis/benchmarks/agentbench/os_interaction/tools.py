"""The agent's tools, as upstream's function-calling variant defines them, and how a command's output is shown.

Upstream shows ``The output of the OS:\\n\\n<output>`` (or ``The output of the OS is empty.``) after stripping
terminal control sequences; output longer than 800 characters is cut to its first 780 followed by
``\\n[truncated because the output is too long]``; output that is not valid UTF-8 is replaced by a fixed message.
``finish_action``'s one argument, its ``thought``, is what upstream then grades as the answer.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

BASH, ANSWER, FINISH = "bash_action", "answer_action", "finish_action"

_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": BASH,
        "description": "Execute bash code to perform an operation in the Linux environment.",
        "parameters": {"type": "object",
                       "properties": {"script": {"type": "string", "description": "The bash script to be executed."}},
                       "required": ["script"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": FINISH,
        "description": "Indicate that the task has been finished or need some additional information to be finished.",
        "parameters": {"type": "object",
                       "properties": {"thought": {"type": "string",
                                                  "description": "The thought or reason indicating the task is "
                                                                 "finished."}},
                       "required": ["thought"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": ANSWER,
        "description": "Provide the answer to the question.",
        "parameters": {"type": "object",
                       "properties": {"answer": {"type": "string", "description": "The answer to the question."}},
                       "required": ["answer"], "additionalProperties": False}}},
]

TRUNCATE_ABOVE = 800
TRUNCATE_TO = 780
TRUNCATED_NOTE = "\n[truncated because the output is too long]"
INVALID_CALL = "Invalid function call. Please call a tool instead"

_CONTROL = [
    re.compile(rb"\x1b\[[0-9;]*[a-zA-Z]"),  # colours, cursor movement
    re.compile(rb"\x1b\][0-9]*;[^\x07]*\x07"),  # window titles
    re.compile(rb"\x1b\[\?2004[hl]"),  # bracketed paste
    re.compile(rb"\x07"),  # bell
]


def tool_schemas() -> list[dict[str, Any]]:
    """The OpenAI function schemas of the three tools (a fresh copy)."""
    return copy.deepcopy(_TOOLS)


def format_output(output: bytes, *, cut: bool = False) -> str:
    """What the agent sees for a command's output (``cut``: only its beginning was kept, so a character split at
    the end is dropped rather than making the whole output undecodable)."""
    for pattern in _CONTROL:
        output = pattern.sub(b"", output)
    try:
        text = output.decode("utf-8")
    except UnicodeDecodeError as exc:
        if cut and exc.reason == "unexpected end of data":
            text = output[:exc.start].decode("utf-8", "replace")
        else:
            text = "OS Environment output cannot be decoded as UTF-8"
    if len(text) > TRUNCATE_ABOVE:
        text = text[:TRUNCATE_TO] + TRUNCATED_NOTE
    return f"The output of the OS:\n\n{text}" if text else "The output of the OS is empty."


def parse_arguments(arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """A tool call's arguments as a dict (JSON text is decoded); raises ValueError with the reason."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments are not valid JSON: {exc}") from exc
    if not isinstance(arguments, Mapping):
        raise ValueError("the arguments must be a JSON object")
    return dict(arguments)


def argument(arguments: dict[str, Any], name: str) -> Any:
    """``arguments[name]``, or as upstream does (it takes the first value whatever its key) the first value."""
    if name in arguments:
        return arguments[name]
    return next(iter(arguments.values()), None)


def as_text(value: Any) -> str | None:
    """An answer as text: strings as they are, other JSON values as JSON, nothing as None."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)
