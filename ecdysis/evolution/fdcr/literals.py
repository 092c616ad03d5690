"""Literal values that belong to one task's evidence, and where they occur in a change's text.

A literal is specific enough to be one task's answer when it is that task's id, or a value of that task's evidence
(tool-call arguments, tool results, context excerpt) holding a digit: reservation/order/user ids, dates, zip codes,
amounts. Literals seen in two or more tasks, or already present in the harness source, are general vocabulary and
never indexed. Short numeric task ids (``12``) match only where named as a task (``task 12``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from ecdysis.records import FailureRecord

MIN_LITERAL_CHARS = 4
MIN_INTEGER_AMOUNT = 100
_ID_TOKEN = re.compile(r"#?[A-Za-z0-9][A-Za-z0-9_\-]{3,}")
_AMOUNT_TOKEN = re.compile(r"\$\s?\d[\d,]*(?:\.\d+)?|\b\d+\.\d+\b")
_WORD = r"A-Za-z0-9_"
_AMOUNT = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


class LiteralHit(BaseModel):
    """A literal of one task's evidence found in a change's text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    literal: str
    source: str


class LiteralIndex:
    """Task-specific literals of a round's failure records, searchable in change text.

    Example::

        index = LiteralIndex.build(failures, harness_text=source)
        hits = index.hits("Always rebook reservation ZFA04Y")   # -> [LiteralHit(task_id='t7', literal='ZFA04Y', ...)]
    """

    def __init__(self, literals: dict[str, LiteralHit]) -> None:
        self._literals = dict(sorted(literals.items()))
        self._patterns = {key: _literal_pattern(key) for key in self._literals}
        for key, hit in self._literals.items():
            if hit.source == "task id":
                self._patterns[key] = _task_id_pattern(hit.literal)

    def __len__(self) -> int:
        return len(self._literals)

    @classmethod
    def build(cls, failures: Iterable[FailureRecord], harness_text: str = "") -> LiteralIndex:
        """Index the literals of each task; drop those shared by several tasks or already in the harness source."""
        owners: dict[str, set[str]] = {}
        first: dict[str, LiteralHit] = {}
        failures_list = sorted(failures, key=lambda f: f.failure_id)
        for failure in failures_list:
            for literal, source in _literals_of(failure):
                key = literal.lower()
                owners.setdefault(key, set()).add(failure.task_id)
                first.setdefault(key, LiteralHit(task_id=failure.task_id, literal=literal, source=source))
        harness_lower = harness_text.lower()
        kept = {
            key: hit for key, hit in first.items()
            if len(owners[key]) == 1 and not _literal_pattern(key).search(harness_lower)
        }
        for failure in failures_list:  # a task id is that task's own, whoever else shares its other values
            kept.setdefault(f"task:{failure.task_id.lower()}",
                            LiteralHit(task_id=failure.task_id, literal=failure.task_id, source="task id"))
        return cls(kept)

    def hits(self, text: str) -> list[LiteralHit]:
        """Every indexed literal that occurs in ``text`` as a whole token (case-insensitive), in a stable order."""
        lowered = text.lower()
        return [hit for key, hit in self._literals.items() if self._patterns[key].search(lowered)]


def _task_id_pattern(task_id: str) -> re.Pattern[str]:
    """A long task id matches as a token; a short one (``12``) only where it is named as a task."""
    token = re.escape(task_id.lower())
    if len(task_id) >= MIN_LITERAL_CHARS and not task_id.isdigit():
        return re.compile(rf"(?<![{_WORD}]){token}(?![{_WORD}])")
    return re.compile(rf"\btask(?:[\s_-]*id)?[\s:=#'\"`]*{token}(?![{_WORD}])")


def _literal_pattern(key: str) -> re.Pattern[str]:
    forms = {key, key.lstrip("#")}
    number = _as_number(key)
    if number is not None:
        forms |= {f"{number:.2f}", f"{number:,.2f}"}
        if number == int(number):
            forms |= {str(int(number)), f"{int(number):,}"}
    alternatives = "|".join(re.escape(form) for form in sorted(forms, key=lambda f: (-len(f), f)) if form)
    return re.compile(rf"(?<![{_WORD}.])(?:{alternatives})(?![{_WORD}]|\.\d)")


def _as_number(text: str) -> float | None:
    """The amount ``text`` spells (``1234.5``, ``$1,234.50``), or None; ids such as ``1E50`` are not amounts."""
    cleaned = text.strip().lstrip("$").strip()
    return float(cleaned.replace(",", "")) if _AMOUNT.fullmatch(cleaned) else None


def _qualifies(value: Any) -> str | None:
    """The literal form of ``value`` if it is specific enough to be one task's answer."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        if isinstance(value, float) and not value.is_integer():
            return f"{value}"
        return str(int(value)) if abs(value) >= MIN_INTEGER_AMOUNT else None
    if isinstance(value, str):
        text = value.strip()
        if len(text) < MIN_LITERAL_CHARS or len(text) > 64 or not any(ch.isdigit() for ch in text):
            return None
        if " " in text:
            return None
        return text
    return None


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{key}")
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item, path)
    else:
        yield path, value


def _tokens(text: str) -> Iterator[str]:
    for match in _ID_TOKEN.finditer(text):
        token = match.group(0).rstrip("-_")
        if _qualifies(token):
            yield token
    for match in _AMOUNT_TOKEN.finditer(text):
        number = _as_number(match.group(0))
        if number is not None and (not number.is_integer() or abs(number) >= MIN_INTEGER_AMOUNT):
            yield f"{number:g}" if number.is_integer() else f"{number}"


def _literals_of(failure: FailureRecord) -> Iterator[tuple[str, str]]:
    for call in failure.tool_call_history:
        for path, value in _leaves(call.arguments, call.name):
            literal = _qualifies(value)
            if literal is not None:
                yield literal, f"tool argument {path}"
        for token in _tokens(_result_text(call.result)):
            yield token, f"tool result of {call.name}"
    for token in _tokens(failure.context_excerpt):
        yield token, "context excerpt"


def _result_text(result: str | None) -> str:
    if not result:
        return ""
    try:
        return " ".join(str(v) for _, v in _leaves(json.loads(result), ""))
    except ValueError:
        return result
