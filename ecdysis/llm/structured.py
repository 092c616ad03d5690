"""Prompting for, extracting and validating JSON replies against a pydantic schema."""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def schema_name(schema: type[BaseModel]) -> str:
    """The name a schema goes by in prompts and errors: its title when it sets one, else its class name."""
    title = schema.model_config.get("title")
    return title if isinstance(title, str) and title else schema.__name__


def instruction(schema: type[BaseModel]) -> str:
    """The request appended to the conversation: reply with one JSON object matching the schema."""
    return (
        "Reply with a single JSON object, and nothing else, that validates against this JSON schema:\n"
        f"{json.dumps(schema.model_json_schema(), indent=1)}"
    )


def reask(error: str) -> str:
    """The follow-up sent after an invalid reply."""
    return (
        f"Your reply did not validate against the schema:\n{error}\n"
        "Reply again with only the corrected JSON object."
    )


def extract_json(text: str | None) -> str:
    """The JSON text inside ``text``: a fenced block if there is one, else the outermost braces."""
    if not text:
        raise ValueError("the reply is empty")
    match = _FENCE.search(text)
    if match:
        return match.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end < start:
        raise ValueError("the reply contains no JSON object")
    return text[start : end + 1]


def parse(text: str | None, schema: type[T]) -> T:
    """A validated ``schema`` instance from ``text``; raises ``ValueError`` (or ``ValidationError``) naming why."""
    return schema.model_validate_json(extract_json(text))


def problem(exc: Exception) -> str:
    """What was wrong with a reply, in one plain sentence: the first invalid field and why (a count of the others),
    or why no JSON could be read; never pydantic's multi-line report or its documentation link."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        if not errors:
            return "the reply did not validate"
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"])
        message = " ".join(str(first["msg"]).removeprefix("Value error, ").split())
        if first["type"] == "missing":
            message = "is missing"
        elif first["type"] == "extra_forbidden":
            message = "is not a field of the schema"
        sentence = f"field {where} {message}" if where else message
        others = len(errors) - 1
        return sentence + (f" (and {others} more problem{'s' if others > 1 else ''})" if others else "")
    return " ".join(str(exc).split())
