"""Scripted participants for tests of failure evidence and diagnosis, for any benchmark.

- :func:`answers_in_text`: a task model that writes the call it means in a markdown block instead of calling the
  tool (what small models often do), so its episodes end with nothing executed;
- :func:`diagnoser_no_change` / :func:`diagnoser_no_change_then_one`: diagnosers that propose no change (always, or
  on the first ask only);
- :func:`diagnoser_claims_systematic`: a diagnoser that calls every pattern systematic, whatever its support.

Addressed as ``scripted/ecdysis.testing.evidence:<fn>``.
"""

from __future__ import annotations

import json
from typing import Any

from ecdysis.testing.evolution import between

MARKDOWN_REPLY = "I will run this:\n```\n{name} {{\"argument\": \"value\"}}\n```\nThat should answer it."
"""The text :func:`answers_in_text` sends; ``{name}`` is the first tool it was offered."""


def answers_in_text(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                    context: dict[str, Any]) -> str:
    """A reply that writes a call to the first offered tool in a markdown block and calls nothing."""
    names = [str((tool.get("function") or {}).get("name")) for tool in tools or []]
    return MARKDOWN_REPLY.format(name=names[0] if names else "tool")


def _records(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    records = between(messages, "FAILURE_RECORDS_JSON_BEGIN", "FAILURE_RECORDS_JSON_END")
    return json.loads(records) if records else []


def _attempt(messages: list[dict[str, Any]]) -> int:
    return sum(1 for message in messages if message.get("role") == "assistant")


def _spec(records: list[dict[str, Any]], *, with_change: bool) -> str:
    ids = sorted(record["failure_id"] for record in records)
    signatures = sorted({record["signature"] for record in records})
    patterns = [{"signature": signature, "description": "the same failure everywhere", "task_ids": ["any-task"],
                 "models": ["any-model"], "failure_ids": [r["failure_id"] for r in records
                                                          if r["signature"] == signature], "systematic": True}
                for signature in signatures]
    changes = [{"component": "system_prompt", "description": "Tell the model to call a tool instead of writing it.",
                "rationale": "nothing was executed", "evidence": ids, "addresses": signatures}] if with_change else []
    return json.dumps({"failure_patterns": patterns, "proposed_changes": changes,
                       "implementation_notes": "", "must_not_change": []})


def diagnoser_no_change(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                        context: dict[str, Any]) -> str:
    """A specification with patterns and no proposed change, on every ask."""
    return _spec(_records(messages), with_change=False)


def diagnoser_no_change_then_one(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                                 context: dict[str, Any]) -> str:
    """No proposed change on the first ask, one change when re-asked."""
    return _spec(_records(messages), with_change=_attempt(messages) > 0)


def diagnoser_claims_systematic(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                                context: dict[str, Any]) -> str:
    """One pattern per signature, each called systematic and claimed for invented tasks and models."""
    return _spec(_records(messages), with_change=True)
